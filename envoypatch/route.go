package envoypatch

import (
	"slices"

	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/proto"
	networking "istio.io/api/networking/v1alpha3"
)

// PatchRouteConfiguration applies the set's route-family patches to a
// generated route configuration of this context, as istiod does
// (rc_patch.go): ROUTE_CONFIGURATION merges; then each virtual host's
// REMOVE, MERGE and REPLACE, and its routes' patches; then VIRTUAL_HOST
// ADDs; removed virtual hosts dropped last. ports is the router's gateway
// port map (nil for sidecars). The configuration is never removed.
func (s *Set) PatchRouteConfiguration(c Context, rc *route.RouteConfiguration, ports GatewayPorts) (*route.RouteConfiguration, []Failure) {
	if s == nil || rc == nil {
		return rc, nil
	}
	parts := make([]VirtualHostPart, len(rc.VirtualHosts))
	for i, vh := range rc.VirtualHosts {
		parts[i].Message = vh
	}
	rc.VirtualHosts = nil
	parts, fails := s.PatchRouteConfigurationParts(c, rc, parts, ports)
	for i := range parts {
		rc.VirtualHosts = append(rc.VirtualHosts, parts[i].Message)
	}
	return rc, fails
}

// PatchRouteConfigurationParts is PatchRouteConfiguration on a
// configuration whose virtual hosts are parts: rc holds the other fields
// (its own VirtualHosts must be empty), vhosts the hosts in order (the
// slice is reused). A host stays encoded unless a VIRTUAL_HOST or
// HTTP_ROUTE patch changes it (or a ROUTE_CONFIGURATION merge lists
// virtual hosts: then all are decoded, as the merge sees them); the
// result's parts with a Message are the changed and added hosts.
func (s *Set) PatchRouteConfigurationParts(c Context, rc *route.RouteConfiguration, vhosts []VirtualHostPart, ports GatewayPorts) ([]VirtualHostPart, []Failure) {
	if s == nil || rc == nil {
		return vhosts, nil
	}
	var fails []Failure
	rcMatch := func(p *Patch) bool { return p.inContext(c) && routeConfigMatch(c, rc, p, ports) }
	inRC := false // the hosts are in rc.VirtualHosts, decoded
	for _, p := range s.by[networking.EnvoyFilter_ROUTE_CONFIGURATION] {
		if !isMerge(p.Operation) || !rcMatch(p) {
			continue
		}
		if !inRC && len(p.Value.(*route.RouteConfiguration).GetVirtualHosts()) > 0 {
			for i := range vhosts {
				if err := vhosts[i].decode(); err != nil {
					fails = append(fails, Failure{Patch: p, Err: err})
					continue
				}
				rc.VirtualHosts = append(rc.VirtualHosts, vhosts[i].Message)
			}
			vhosts, inRC = vhosts[:0], true
		}
		mergeValue(p.Operation, rc, p.Value)
	}
	for _, vh := range rc.VirtualHosts {
		vhosts = append(vhosts, VirtualHostPart{Message: vh})
	}
	rc.VirtualHosts = nil

	// rc no longer changes: the patches that match it are chosen once.
	vhPatches := matching(s.by[networking.EnvoyFilter_VIRTUAL_HOST], rcMatch)
	routePatches := matching(s.by[networking.EnvoyFilter_HTTP_ROUTE], rcMatch)
	always := func(*Patch) bool { return true }
	var removed map[string]bool
	for i := range vhosts {
		vp := &vhosts[i]
		gone := false
		for _, p := range vhPatches {
			if !vp.matches(p) {
				continue
			}
			if p.Operation == networking.EnvoyFilter_Patch_REMOVE {
				gone = true
				break
			}
			switch {
			case isMerge(p.Operation):
				if err := vp.decode(); err != nil {
					fails = append(fails, Failure{Patch: p, Err: err})
					continue
				}
				mergeValue(p.Operation, vp.Message, p.Value)
			case p.Operation == networking.EnvoyFilter_Patch_REPLACE:
				vp.Message = proto.Clone(p.Value).(*route.VirtualHost)
			}
		}
		if gone {
			// istiod drops every virtual host of that name, after the adds.
			if removed == nil {
				removed = map[string]bool{}
			}
			removed[vp.name()] = true
			continue
		}
		for _, p := range routePatches {
			if !vp.matches(p) {
				continue
			}
			if err := vp.decode(); err != nil {
				fails = append(fails, Failure{Patch: p, Err: err})
				break
			}
			patchRoutes(routePatches, always, vp.Message)
			break
		}
	}
	for _, p := range vhPatches {
		if p.Operation == networking.EnvoyFilter_Patch_ADD {
			vhosts = append(vhosts, VirtualHostPart{Message: proto.Clone(p.Value).(*route.VirtualHost)})
		}
	}
	if removed != nil {
		vhosts = slices.DeleteFunc(vhosts, func(vp VirtualHostPart) bool {
			if vp.Message != nil {
				return removed[vp.Message.GetName()]
			}
			return removed[string(wireName(vp.Bytes))]
		})
	}
	return vhosts, fails
}

// matching is the patches that match.
func matching(patches []*Patch, match func(*Patch) bool) []*Patch {
	var out []*Patch
	for _, p := range patches {
		if match(p) {
			out = append(out, p)
		}
	}
	return out
}

// patchRoutes applies the HTTP_ROUTE patches to one virtual host: each
// route's REMOVE and MERGE first, then ADD and INSERT_* in order.
func patchRoutes(patches []*Patch, rcMatch func(*Patch) bool, vh *route.VirtualHost) {
	var at []*Patch // the patches that reach this virtual host
	for _, p := range patches {
		if rcMatch(p) && virtualHostMatch(vh, p) {
			at = append(at, p)
		}
	}
	if len(at) == 0 {
		return
	}
	// Generators may share routes (and their slice) between virtual hosts,
	// as istiod's do: the slice is copied before it changes and a route
	// before it is merged, as istiod does.
	owned := false
	own := func() {
		if !owned {
			vh.Routes, owned = slices.Clone(vh.Routes), true
		}
	}
	removed := false
	for i := range vh.Routes {
		cloned := false
		for _, p := range at {
			if !routeMatch(vh.Routes[i], p) {
				continue
			}
			if p.Operation == networking.EnvoyFilter_Patch_REMOVE {
				own()
				vh.Routes[i] = nil
				removed = true
				break
			}
			if isMerge(p.Operation) {
				own()
				if !cloned {
					vh.Routes[i], cloned = proto.Clone(vh.Routes[i]).(*route.Route), true
				}
				mergeValue(p.Operation, vh.Routes[i], p.Value)
			}
		}
	}
	for _, p := range at {
		// clone also makes the slice the virtual host's own (an insert may
		// write into its spare capacity), so it is called before the slice
		// is read for the insert.
		clone := func() *route.Route { own(); return proto.Clone(p.Value).(*route.Route) }
		hasRoute := p.Match.GetRouteConfiguration().GetVhost().GetRoute() != nil
		match := func(r *route.Route) bool { return routeMatch(r, p) }
		switch p.Operation {
		case networking.EnvoyFilter_Patch_ADD:
			r := clone()
			vh.Routes = append(vh.Routes, r)
		case networking.EnvoyFilter_Patch_INSERT_AFTER:
			if !hasRoute {
				r := clone()
				vh.Routes = append(vh.Routes, r)
			} else if i := slices.IndexFunc(vh.Routes, match); i >= 0 {
				r := clone()
				vh.Routes = slices.Insert(vh.Routes, i+1, r)
			}
		case networking.EnvoyFilter_Patch_INSERT_BEFORE:
			if !hasRoute {
				r := clone()
				vh.Routes = slices.Insert(vh.Routes, 0, r)
			} else if i := slices.IndexFunc(vh.Routes, match); i >= 0 {
				r := clone()
				vh.Routes = slices.Insert(vh.Routes, i, r)
			}
		case networking.EnvoyFilter_Patch_INSERT_FIRST:
			// First, but only if a route matches (any, without a route match).
			if !hasRoute || slices.IndexFunc(vh.Routes, match) >= 0 {
				r := clone()
				vh.Routes = slices.Insert(vh.Routes, 0, r)
			}
		}
	}
	if removed {
		vh.Routes = slices.DeleteFunc(vh.Routes, func(r *route.Route) bool { return r == nil })
	}
}

// routeConfigMatch is istiod's: by name and, for sidecars, the port the
// name holds; for gateways, by name, server port name, gateway, and port
// (through the gateway's port map when the route port is in it).
func routeConfigMatch(c Context, rc *route.RouteConfiguration, p *Patch, ports GatewayPorts) bool {
	m := p.Match.GetRouteConfiguration()
	if m == nil {
		return true
	}
	if m.GetName() != "" && m.GetName() != rc.GetName() {
		return false
	}
	if c != Gateway {
		return m.GetPortNumber() == 0 || int(m.GetPortNumber()) == routePort(rc.GetName())
	}
	port, portName, gw := parseGatewayRouteName(rc.GetName())
	if (m.GetPortName() != "" && m.GetPortName() != portName) || (m.GetGateway() != "" && m.GetGateway() != gw) {
		return false
	}
	if m.GetPortNumber() == 0 {
		return true
	}
	want := int(m.GetPortNumber())
	if servers, ok := ports[port]; ok {
		return slices.Contains(servers, want)
	}
	return port == want
}

// virtualHostMatch: the match's virtual host name and a domain among the
// host's domains, if it names them.
func virtualHostMatch(vh *route.VirtualHost, p *Patch) bool {
	m := p.Match.GetRouteConfiguration().GetVhost()
	if m == nil {
		return true
	}
	if vh == nil {
		return false
	}
	return (m.GetName() == "" || m.GetName() == vh.GetName()) &&
		(m.GetDomainName() == "" || slices.Contains(vh.GetDomains(), m.GetDomainName()))
}

// routeMatch: the match's route name and action, if it names them.
func routeMatch(r *route.Route, p *Patch) bool {
	m := p.Match.GetRouteConfiguration().GetVhost().GetRoute()
	if m == nil {
		return true
	}
	if r == nil {
		return false
	}
	if m.GetName() != "" && m.GetName() != r.GetName() {
		return false
	}
	want := m.GetAction()
	switch r.GetAction().(type) {
	case *route.Route_Route:
		return want == networking.EnvoyFilter_RouteConfigurationMatch_RouteMatch_ANY || want == networking.EnvoyFilter_RouteConfigurationMatch_RouteMatch_ROUTE
	case *route.Route_Redirect:
		return want == networking.EnvoyFilter_RouteConfigurationMatch_RouteMatch_ANY || want == networking.EnvoyFilter_RouteConfigurationMatch_RouteMatch_REDIRECT
	case *route.Route_DirectResponse:
		return want == networking.EnvoyFilter_RouteConfigurationMatch_RouteMatch_ANY || want == networking.EnvoyFilter_RouteConfigurationMatch_RouteMatch_DIRECT_RESPONSE
	}
	return true // istiod: another action (or none) matches any
}

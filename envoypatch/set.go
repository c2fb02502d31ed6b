package envoypatch

import (
	"encoding/binary"
	"strconv"
	"strings"

	"github.com/cespare/xxhash/v2"
	networking "istio.io/api/networking/v1alpha3"
)

// numApplyTo bounds the applyTo values a Set groups by (LISTENER_FILTER is
// the largest).
const numApplyTo = int(networking.EnvoyFilter_LISTENER_FILTER) + 1

// byApplyTo is a Set's patches grouped by applyTo, each group in the Set's
// order: istiod applies the patches of one applyTo in filter order, all of
// them before those of the next level (a listener's, then its filter
// chains', then their filters').
type byApplyTo [numApplyTo][]*Patch

func (b *byApplyTo) of(a networking.EnvoyFilter_ApplyTo) []*Patch {
	if int(a) >= numApplyTo || a < 0 {
		return nil
	}
	return b[a]
}

// familyOf is the Family of an applyTo; false for those istiod does not
// apply (BOOTSTRAP is the agent's; INVALID and WAYPOINT-only values).
func familyOf(a networking.EnvoyFilter_ApplyTo) (Family, bool) {
	switch a {
	case networking.EnvoyFilter_CLUSTER:
		return Clusters, true
	case networking.EnvoyFilter_LISTENER, networking.EnvoyFilter_FILTER_CHAIN, networking.EnvoyFilter_NETWORK_FILTER,
		networking.EnvoyFilter_HTTP_FILTER, networking.EnvoyFilter_LISTENER_FILTER:
		return Listeners, true
	case networking.EnvoyFilter_ROUTE_CONFIGURATION, networking.EnvoyFilter_VIRTUAL_HOST, networking.EnvoyFilter_HTTP_ROUTE:
		return Routes, true
	case networking.EnvoyFilter_EXTENSION_CONFIG:
		return Extensions, true
	}
	return 0, false
}

// NewSet is the set of patches, in the order given (istiod's: see Set);
// nil when there are none. Its family sub-sets are built with it. A Set is
// never changed after, so any number of goroutines may apply it at once.
func NewSet(patches []*Patch) *Set {
	if len(patches) == 0 {
		return nil
	}
	s := newSet(patches)
	var fams [numFamilies][]*Patch
	for _, p := range patches {
		if f, ok := familyOf(p.ApplyTo); ok {
			fams[f] = append(fams[f], p)
		}
	}
	for f, ps := range fams {
		switch {
		case len(ps) == 0:
		case len(ps) == len(patches):
			s.families[f] = s // the whole set is of one family
		default:
			sub := newSet(ps)
			sub.families[f] = sub
			s.families[f] = sub
		}
	}
	return s
}

func newSet(patches []*Patch) *Set {
	s := &Set{Patches: patches}
	d := xxhash.New()
	var b [8]byte
	for _, p := range patches {
		binary.LittleEndian.PutUint64(b[:], p.Hash)
		_, _ = d.Write(b[:])
		if int(p.ApplyTo) < numApplyTo && p.ApplyTo >= 0 {
			s.by[p.ApplyTo] = append(s.by[p.ApplyTo], p)
		}
	}
	s.Digest = d.Sum64()
	return s
}

// Family is the sub-set of the patches of one family, in order (memoized
// at NewSet); nil when it has none, so that a key of that family carries
// no patches.
func (s *Set) Family(f Family) *Set {
	if s == nil || f >= numFamilies {
		return nil
	}
	return s.families[f]
}

// patchContext is istiod's patch context of a Context.
func (c Context) patchContext() networking.EnvoyFilter_PatchContext {
	switch c {
	case Outbound:
		return networking.EnvoyFilter_SIDECAR_OUTBOUND
	case Inbound:
		return networking.EnvoyFilter_SIDECAR_INBOUND
	case Gateway:
		return networking.EnvoyFilter_GATEWAY
	}
	return networking.EnvoyFilter_ANY // no context: matches only ANY patches
}

// inContext is istiod's context condition: the patch's context is ANY or
// the resource's.
func (p *Patch) inContext(c Context) bool {
	pc := p.Match.GetContext()
	return pc == networking.EnvoyFilter_ANY || pc == c.patchContext()
}

// MayPatchCluster reports whether a patch of the set may merge into or
// remove a cluster of this context whose name is istiod's subset key of
// hostname, port and subset (hostname "" for an inbound cluster or one not
// named by a service, port 0 for none). Conservative: only the fields that
// cannot match rule a patch out; an inbound cluster may match a service by
// the services of its port, which the name does not hold.
func (s *Set) MayPatchCluster(c Context, hostname string, port uint32, subset string) bool {
	if s == nil {
		return false
	}
	for _, p := range s.by[networking.EnvoyFilter_CLUSTER] {
		if !p.inContext(c) || !mergesOrRemoves(p.Operation) {
			continue
		}
		m := p.Match.GetCluster()
		if m == nil {
			return true
		}
		if m.GetName() != "" {
			_, nsub, nhost, nport := parseSubsetKey(m.GetName())
			if hostname == "" || nhost == "" || (nhost == hostname && nsub == subset && uint32(nport) == port) {
				return true
			}
			continue
		}
		if (m.GetSubset() != "" && m.GetSubset() != subset) ||
			(m.GetPortNumber() != 0 && m.GetPortNumber() != port) ||
			(m.GetService() != "" && c != Inbound && m.GetService() != hostname) {
			continue
		}
		return true
	}
	return false
}

// mergesOrRemoves reports whether the operation changes a generated
// resource in place (the others add new ones, or do nothing at that
// level).
func mergesOrRemoves(op networking.EnvoyFilter_Patch_Operation) bool {
	return isMerge(op) || op == networking.EnvoyFilter_Patch_REMOVE
}

// MayPatchListener reports whether a patch of the set may change a listener
// of this context on this port (0: the virtual listeners, whose filter
// chains carry the ports). Listener names, filter chains and filter names
// are not prefiltered: they depend on the generated content.
func (s *Set) MayPatchListener(c Context, port uint32) bool {
	if s == nil {
		return false
	}
	for _, a := range []networking.EnvoyFilter_ApplyTo{networking.EnvoyFilter_LISTENER, networking.EnvoyFilter_LISTENER_FILTER,
		networking.EnvoyFilter_FILTER_CHAIN, networking.EnvoyFilter_NETWORK_FILTER, networking.EnvoyFilter_HTTP_FILTER} {
		for _, p := range s.by[a] {
			if !p.inContext(c) || (a == networking.EnvoyFilter_LISTENER && p.Operation == networking.EnvoyFilter_Patch_ADD) {
				continue
			}
			if pn := p.Match.GetListener().GetPortNumber(); pn != 0 && port != 0 && pn != port {
				continue
			}
			return true
		}
	}
	return false
}

// MayPatchRouteConfig reports whether a patch of the set may change the
// route configuration of this context with this name, by the match's route
// configuration name and port (gateways: port name and gateway; the port
// through the gateway's port map is not prefiltered).
func (s *Set) MayPatchRouteConfig(c Context, name string) bool {
	if s == nil {
		return false
	}
	for _, a := range []networking.EnvoyFilter_ApplyTo{networking.EnvoyFilter_ROUTE_CONFIGURATION,
		networking.EnvoyFilter_VIRTUAL_HOST, networking.EnvoyFilter_HTTP_ROUTE} {
		for _, p := range s.by[a] {
			if !p.inContext(c) {
				continue
			}
			if a == networking.EnvoyFilter_ROUTE_CONFIGURATION && !isMerge(p.Operation) {
				continue
			}
			m := p.Match.GetRouteConfiguration()
			if m == nil {
				return true
			}
			if m.GetName() != "" && m.GetName() != name {
				continue
			}
			if c == Gateway {
				_, portName, gw := parseGatewayRouteName(name)
				if (m.GetPortName() != "" && m.GetPortName() != portName) || (m.GetGateway() != "" && m.GetGateway() != gw) {
					continue
				}
			} else if m.GetPortNumber() != 0 && int(m.GetPortNumber()) != routePort(name) {
				continue
			}
			return true
		}
	}
	return false
}

// parseSubsetKey splits istiod's cluster name "direction|port|subset|host"
// (or its DNS SRV form "outbound_.port_.subset_.host"); what it cannot
// parse stays zero, as in istiod.
func parseSubsetKey(s string) (dir, subset, hostname string, port int) {
	sep := "|"
	if strings.HasPrefix(s, "outbound_.") || strings.HasPrefix(s, "inbound_.") {
		sep = "_."
	}
	dir, s, ok := strings.Cut(s, sep)
	if !ok {
		return "", "", "", 0
	}
	p, s, ok := strings.Cut(s, sep)
	if !ok {
		return dir, "", "", 0
	}
	port, _ = strconv.Atoi(p)
	subset, s, ok = strings.Cut(s, sep)
	if !ok {
		return dir, "", "", port
	}
	if strings.Contains(s, sep) {
		return dir, subset, "", port
	}
	return dir, subset, s, port
}

// routePort is the listener port a sidecar's route configuration name
// holds: "9080", or an inbound one's subset key port; 0 for the others
// (a host:port name).
func routePort(name string) int {
	if strings.HasPrefix(name, "inbound") {
		_, _, _, port := parseSubsetKey(name)
		return port
	}
	port, _ := strconv.Atoi(name)
	return port
}

// GatewayRoutePort is the port a gateway route configuration's name
// holds ("http.8080" → 8080), istiod's GatewayPortMap key; 0 when the name
// has none.
func GatewayRoutePort(name string) int {
	port, _, _ := parseGatewayRouteName(name)
	return port
}

// parseGatewayRouteName splits a gateway's route configuration name:
// "http.<port>", or "https.<port>.<port name>.<gateway>.<namespace>"
// (gateway: "namespace/name").
func parseGatewayRouteName(name string) (port int, portName, gateway string) {
	if rest, ok := strings.CutPrefix(name, "http."); ok {
		port, _ = strconv.Atoi(rest)
		return port, "", ""
	}
	rest, ok := strings.CutPrefix(name, "https.")
	if !ok || strings.Count(name, ".") != 4 {
		return 0, "", ""
	}
	p, rest, _ := strings.Cut(rest, ".")
	port, _ = strconv.Atoi(p)
	portName, rest, _ = strings.Cut(rest, ".")
	gwName, gwNS, _ := strings.Cut(rest, ".")
	return port, portName, gwNS + "/" + gwName
}

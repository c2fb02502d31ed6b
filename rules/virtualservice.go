package rules

import (
	"cmp"
	"slices"
	"strings"

	networking "istio.io/api/networking/v1alpha3"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/index"
)

// routeView is what RDS and LDS derive from a scope's VirtualServices and
// services once, so that a warm build only looks things up. It is computed
// on first use per Scope (a Scope is immutable; its copies for
// endpoint-only snapshots share it) and dropped with it.
type routeView struct {
	// virtualServices are the VirtualServices bound to the mesh gateway and
	// visible to the scope's namespace, in istiod's precedence order
	// (vsCompare).
	virtualServices []*index.Config
	// wrappers are the virtual hosts each VirtualService owns, in the same
	// order (istiod's BuildSidecarVirtualHostWrapper).
	wrappers []vsWrapper
	// routedBy maps a service hostname to the VirtualService that routes it:
	// the first that names it exactly, else the one with the most specific
	// wildcard host that matches it.
	routedBy map[index.Sym]*index.Config
	// aliases maps a concrete service's hostname to the Kubernetes
	// ExternalName services that resolve to it, sorted by namespace and
	// hostname.
	aliases map[index.Sym][]*index.Service
	// destinations maps a VirtualService to the ExternalName services its
	// routes name.
	destinations map[*index.Config][]*index.Service
	// hashRules maps a service hostname to its DestinationRule when that
	// rule sets a consistent hash (routes then carry a hash policy).
	hashRules map[index.Sym][]encode.HostDestinationRule
	// vsHashRules maps a VirtualService to the consistent-hash rules of the
	// hosts its HTTP routes go to.
	vsHashRules map[*index.Config][]encode.HostDestinationRule
	// tcpRules maps a service hostname to the DestinationRules its TCP
	// proxies read (its own and its TCP/TLS routes' destinations'), for
	// rules that set TCP proxy settings.
	tcpRules map[index.Sym][]encode.HostDestinationRule
	// tcpRoutes maps a service hostname to the VirtualServices with TCP or
	// TLS routes for it, in precedence order (istiod's getConfigsForHost).
	tcpRoutes map[index.Sym][]*index.Config
	// tcpDestinations maps such a VirtualService to the services its TCP
	// and TLS routes name.
	tcpDestinations map[*index.Config][]*index.Service
	// sourceLabels maps a VirtualService whose matches name sourceLabels
	// to the scope's labels of those keys (the keys' SourceLabels), and
	// tcpSourceLabels a service hostname to those of its tcpRoutes; both
	// are empty in a mesh without sourceLabels.
	sourceLabels    map[*index.Config]string
	tcpSourceLabels map[index.Sym]string
}

// vsWrapper is one VirtualService's share of the outbound virtual hosts.
type vsWrapper struct {
	vs *index.Config
	// services are the visible services the VirtualService routes (it is
	// their routedBy), in the order the VirtualService names them.
	services []*index.Service
	// hosts are its hosts that name no visible service (e.g. "google.com").
	hosts []string
}

// routeViewOf returns the scope's route view, computing it once per scope
// and mesh (view.go).
func routeViewOf(sc *Scope, mesh *encode.Mesh) *routeView {
	m := sc.memo
	if r := m.routes.Load(); r != nil && r.mesh == mesh {
		if sc.view.verify && firstUseIn(&m.checkedRoutes, sc.Snapshot) {
			verifyRouteView(sc, mesh, r.v)
		}
		return r.v
	}
	v := newRouteView(sc, mesh)
	m.routes.Store(&routeViewMemo{mesh: mesh, v: v})
	return v
}

// vsSpec returns the VirtualService spec of a config row, or nil.
func vsSpec(c *index.Config) *networking.VirtualService {
	vs, _ := c.Spec.(*networking.VirtualService)
	return vs
}

// boundToMesh reports whether a VirtualService applies to sidecars: no
// gateways, or "mesh" among them.
func boundToMesh(vs *networking.VirtualService) bool {
	if len(vs.GetGateways()) == 0 {
		return true
	}
	return slices.Contains(vs.GetGateways(), "mesh")
}

// vsGroup is the precedence group of a VirtualService visible from ns:
// 0 private to ns, 1 exported to ns by name, 2 public.
// A VirtualService without exportTo is grouped by the mesh's default
// (exportto.go), as istiod files it.
func vsGroup(v *configView, c *index.Config, ns index.Sym) int {
	e := &c.ExportTo
	if e.Unset {
		if d := &v.exports.virtualService; d.all {
			return 2
		}
	} else if !e.Private && len(e.Namespaces) == 0 {
		return 2
	}
	if c.Key.Namespace == ns {
		return 0
	}
	return 1
}

// vsCompare orders the VirtualServices visible from ns as istiod's
// VirtualServicesForGateway lists them: those private to ns, then those
// exported to it by name, then public ones; within a group the oldest
// first (sortConfigByCreationTime), then by name, then by namespace.
// Objects without a creation time (a config directory's, unless it
// writes one) sort as the oldest.
func vsCompare(v *configView, snap *index.Snapshot, ns index.Sym) func(a, b *index.Config) int {
	byAge := byCreationTime(snap) // sort.go
	return func(a, b *index.Config) int {
		if c := cmp.Compare(vsGroup(v, a, ns), vsGroup(v, b, ns)); c != 0 {
			return c
		}
		return byAge(a, b)
	}
}

func newRouteView(sc *Scope, mesh *encode.Mesh) *routeView {
	snap := sc.Snapshot
	v := &routeView{
		routedBy:     map[index.Sym]*index.Config{},
		aliases:      map[index.Sym][]*index.Service{},
		destinations: map[*index.Config][]*index.Service{},

		hashRules:       map[index.Sym][]encode.HostDestinationRule{},
		vsHashRules:     map[*index.Config][]encode.HostDestinationRule{},
		tcpRoutes:       map[index.Sym][]*index.Config{},
		tcpRules:        map[index.Sym][]encode.HostDestinationRule{},
		tcpDestinations: map[*index.Config][]*index.Service{},
	}
	snap.Configs(index.ConfigVirtualService, func(c *index.Config) bool {
		vs := vsSpec(c)
		if vs != nil && boundToMesh(vs) && sc.view.vsVisible(snap, c, sc.Namespace) && sc.Egress.seesConfig(snap, c) {
			v.virtualServices = append(v.virtualServices, sc.vsRow(c, mesh.DomainSuffix)) // virtualservice_delegate.go
		}
		return true
	})
	slices.SortFunc(v.virtualServices, vsCompare(sc.view, snap, sc.Namespace))

	// Which VirtualService routes each service: exact hosts first (the
	// earliest VirtualService wins), then the most specific wildcard.
	type wildcardBest struct {
		vs  *index.Config
		len int
	}
	best := map[index.Sym]wildcardBest{}
	for _, c := range v.virtualServices {
		for _, h := range c.Hosts {
			hostStr := snap.String(h)
			if !strings.HasPrefix(hostStr, "*") {
				if _, ok := sc.ByHost[h]; ok {
					if _, taken := v.routedBy[h]; !taken {
						v.routedBy[h] = c
					}
				}
				continue
			}
			for _, id := range sc.Services {
				svc := snap.ServiceByID(id)
				if !hostMatches(hostStr, snap.String(svc.Key.Host)) {
					continue
				}
				if b, ok := best[svc.Key.Host]; !ok || len(hostStr) > b.len {
					best[svc.Key.Host] = wildcardBest{vs: c, len: len(hostStr)}
				}
			}
		}
	}
	for h, b := range best {
		if _, ok := v.routedBy[h]; !ok {
			v.routedBy[h] = b.vs
		}
	}

	// Each VirtualService's wrapper: its services and its other hosts.
	for _, c := range v.virtualServices {
		w := vsWrapper{vs: c}
		for _, h := range c.Hosts {
			hostStr := snap.String(h)
			if !strings.HasPrefix(hostStr, "*") {
				if svc := sc.Service(h); svc != nil {
					if v.routedBy[h] == c && !slices.Contains(w.services, svc) {
						w.services = append(w.services, svc)
					}
				} else {
					w.hosts = append(w.hosts, hostStr)
				}
				continue
			}
			matched := false
			for _, id := range sc.Services {
				svc := snap.ServiceByID(id)
				if !hostMatches(hostStr, snap.String(svc.Key.Host)) {
					continue
				}
				matched = true
				if v.routedBy[svc.Key.Host] == c && !slices.Contains(w.services, svc) {
					w.services = append(w.services, svc)
				}
			}
			if !matched {
				w.hosts = append(w.hosts, hostStr)
			}
		}
		v.wrappers = append(v.wrappers, w)
	}

	// ExternalName aliases: alias → concrete, following chains.
	for _, id := range sc.Services {
		svc := snap.ServiceByID(id)
		if !isAlias(svc) {
			continue
		}
		target := svc.ExternalName
		for range 8 { // follow alias chains, bounded against loops
			t := sc.Service(target)
			if t == nil || !isAlias(t) {
				break
			}
			target = t.ExternalName
		}
		if t := sc.Service(target); t != nil && !isAlias(t) {
			v.aliases[target] = append(v.aliases[target], svc)
		}
	}
	for h, as := range v.aliases {
		slices.SortFunc(as, func(a, b *index.Service) int {
			if c := cmp.Compare(snap.String(a.Key.Namespace), snap.String(b.Key.Namespace)); c != 0 {
				return c
			}
			return cmp.Compare(snap.String(a.Key.Host), snap.String(b.Key.Host))
		})
		v.aliases[h] = as
	}
	for _, c := range v.virtualServices {
		var dests []*index.Service
		visit := func(d *networking.Destination) {
			if d == nil {
				return
			}
			h, ok := snap.Symbols.Lookup(resolveHost(d.GetHost(), snap.String(c.Key.Namespace), mesh.DomainSuffix))
			if !ok {
				return
			}
			if svc := sc.Service(h); svc != nil && isAlias(svc) && !slices.Contains(dests, svc) {
				dests = append(dests, svc)
			}
		}
		for _, r := range vsSpec(c).GetHttp() {
			for _, d := range r.GetRoute() {
				visit(d.GetDestination())
			}
			visit(r.GetMirror())
			for _, m := range r.GetMirrors() {
				visit(m.GetDestination())
			}
		}
		if len(dests) > 0 {
			v.destinations[c] = dests
		}
	}
	v.addTCPRoutes(sc, mesh)
	v.addHashRules(sc, mesh)
	v.addSourceLabels(sc)
	return v
}

// addSourceLabels fills sourceLabels and tcpSourceLabels.
func (v *routeView) addSourceLabels(sc *Scope) {
	var labels map[string]string
	for _, c := range v.virtualServices {
		if len(c.SourceLabelKeys) == 0 {
			continue
		}
		if v.sourceLabels == nil {
			labels = scopeLabels(sc)
			v.sourceLabels = map[*index.Config]string{}
		}
		v.sourceLabels[c] = sourceLabelsFor(sc.Snapshot, labels, c)
	}
	if v.sourceLabels == nil {
		return
	}
	for h, cs := range v.tcpRoutes {
		if s := sourceLabelsFor(sc.Snapshot, labels, cs...); s != "" {
			if v.tcpSourceLabels == nil {
				v.tcpSourceLabels = map[index.Sym]string{}
			}
			v.tcpSourceLabels[h] = s
		}
	}
}

// addHashRules finds the consistent-hash DestinationRules of the scope's
// services and of the VirtualServices' destinations.
func (v *routeView) addHashRules(sc *Scope, mesh *encode.Mesh) {
	snap := sc.Snapshot
	if snap.NumConfigs(index.ConfigDestinationRule) == 0 {
		return
	}
	own := map[index.Sym]encode.HostDestinationRule{}
	for _, id := range sc.Services {
		svc := snap.ServiceByID(id)
		dr := destinationRule(sc, mesh, svc)
		if dr == nil {
			continue
		}
		r := encode.HostDestinationRule{Host: snap.String(svc.Key.Host), Rule: dr}
		if hasConsistentHash(dr) {
			v.hashRules[svc.Key.Host] = []encode.HostDestinationRule{r}
		}
		if hasTCPSettings(dr) {
			own[svc.Key.Host] = r
		}
	}
	for _, id := range sc.Services {
		svc := snap.ServiceByID(id)
		var rules []encode.HostDestinationRule
		if r, ok := own[svc.Key.Host]; ok {
			rules = append(rules, r)
		}
		for _, c := range v.tcpRoutes[svc.Key.Host] {
			for _, d := range v.tcpDestinations[c] {
				if r, ok := own[d.Key.Host]; ok && !slices.Contains(rules, r) {
					rules = append(rules, r)
				}
			}
		}
		if len(rules) > 0 {
			v.tcpRules[svc.Key.Host] = rules
		}
	}
	for _, c := range v.virtualServices {
		var rules []encode.HostDestinationRule
		for _, r := range vsSpec(c).GetHttp() {
			for _, d := range r.GetRoute() {
				h, ok := snap.Symbols.Lookup(resolveHost(d.GetDestination().GetHost(), snap.String(c.Key.Namespace), mesh.DomainSuffix))
				if !ok {
					continue
				}
				if hr := v.hashRules[h]; len(hr) > 0 && !slices.Contains(rules, hr[0]) {
					rules = append(rules, hr[0])
				}
			}
		}
		if len(rules) > 0 {
			v.vsHashRules[c] = rules
		}
	}
}

// hasTCPSettings reports whether a DestinationRule sets what a TCP proxy
// takes from it: an idle timeout, a maximum connection duration, source IP
// hashing, or a tunnel.
func hasTCPSettings(c *index.Config) bool {
	dr, ok := c.Spec.(*networking.DestinationRule)
	if !ok {
		return false
	}
	tcp := dr.GetTrafficPolicy().GetConnectionPool().GetTcp()
	if tcp.GetIdleTimeout() != nil || tcp.GetMaxConnectionDuration() != nil {
		return true
	}
	if dr.GetTrafficPolicy().GetLoadBalancer().GetConsistentHash().GetUseSourceIp() || dr.GetTrafficPolicy().GetTunnel() != nil {
		return true
	}
	for _, s := range dr.GetSubsets() {
		if s.GetTrafficPolicy().GetLoadBalancer().GetConsistentHash().GetUseSourceIp() || s.GetTrafficPolicy().GetTunnel() != nil {
			return true
		}
	}
	return false
}

// hasConsistentHash reports whether a DestinationRule sets a consistent
// hash load balancer anywhere.
func hasConsistentHash(c *index.Config) bool {
	dr, ok := c.Spec.(*networking.DestinationRule)
	if !ok {
		return false
	}
	tp := func(p *networking.TrafficPolicy) bool {
		if p.GetLoadBalancer().GetConsistentHash() != nil {
			return true
		}
		for _, pls := range p.GetPortLevelSettings() {
			if pls.GetLoadBalancer().GetConsistentHash() != nil {
				return true
			}
		}
		return false
	}
	if tp(dr.GetTrafficPolicy()) {
		return true
	}
	for _, s := range dr.GetSubsets() {
		if tp(s.GetTrafficPolicy()) {
			return true
		}
	}
	return false
}

// isAlias reports whether a service is a Kubernetes ExternalName service,
// which istiod treats as an alias of the service it names.
func isAlias(s *index.Service) bool {
	return s.Origin == index.OriginKubernetes && s.ExternalName != 0
}

// resolveHost is istiod's ResolveShortnameToFQDN.
func resolveHost(h, ns, suffix string) string {
	if h == "*" || strings.IndexByte(h, '.') >= 0 {
		return h
	}
	return h + "." + ns + ".svc." + suffix
}

// hostMatches is istiod's host.Name.Matches: wildcard-aware overlap.
func hostMatches(a, b string) bool {
	aw, bw := strings.HasPrefix(a, "*"), strings.HasPrefix(b, "*")
	switch {
	case aw && bw:
		if len(a) < len(b) {
			return strings.HasSuffix(b[1:], a[1:])
		}
		return strings.HasSuffix(a[1:], b[1:])
	case aw:
		return strings.HasSuffix(b, a[1:])
	case bw:
		return strings.HasSuffix(a, b[1:])
	}
	return a == b
}

// addTCPRoutes indexes the VirtualServices with TCP or TLS routes by the
// hosts they match, and the services those routes name.
func (v *routeView) addTCPRoutes(sc *Scope, mesh *encode.Mesh) {
	snap := sc.Snapshot
	for _, c := range v.virtualServices {
		vs := vsSpec(c)
		if len(vs.GetTcp()) == 0 && len(vs.GetTls()) == 0 {
			continue
		}
		for _, id := range sc.Services {
			svc := snap.ServiceByID(id)
			host := snap.String(svc.Key.Host)
			for _, h := range c.Hosts {
				if hostMatches(snap.String(h), host) {
					v.tcpRoutes[svc.Key.Host] = append(v.tcpRoutes[svc.Key.Host], c)
					break
				}
			}
		}
		var dests []*index.Service
		visit := func(d *networking.Destination) {
			h, ok := snap.Symbols.Lookup(resolveHost(d.GetHost(), snap.String(c.Key.Namespace), mesh.DomainSuffix))
			if !ok {
				return
			}
			if svc := sc.Service(h); svc != nil && !slices.Contains(dests, svc) {
				dests = append(dests, svc)
			}
		}
		for _, r := range vs.GetTcp() {
			for _, d := range r.GetRoute() {
				visit(d.GetDestination())
			}
		}
		for _, r := range vs.GetTls() {
			for _, d := range r.GetRoute() {
				visit(d.GetDestination())
			}
		}
		v.tcpDestinations[c] = dests
	}
}

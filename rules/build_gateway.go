package rules

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"sync"

	networking "istio.io/api/networking/v1alpha3"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/envoypatch"
	"github.com/pilotfish-mesh/pilotfish/index"
)

// mergedGateway is a router's view of the Gateways its labels select
// (istiod's MergedGateway): servers grouped by port, the servers behind
// each RDS route name, and the VirtualServices bound to each Gateway. It
// is computed once per Scope.
type mergedGateway struct {
	ports   []gwPort
	byRoute map[string][]*encode.GatewayServer
	// boundVS maps "NAMESPACE/NAME" of a Gateway to the VirtualServices
	// bound to it and visible to the router's namespace, in istiod's
	// precedence order (vsCompare).
	boundVS map[string][]*index.Config
	// dests maps a VirtualService to the services its routes name.
	dests map[*index.Config][]*index.Service
	// routes caches each route name's virtual host keys (*gwRouteKeys).
	routes sync.Map
	// sourceLabels are the router's labels whose keys the match
	// sourceLabels of its bound VirtualServices name (their keys'
	// SourceLabels; "" for none).
	sourceLabels string
	// digest identifies every input (gateway_reuse.go); names identifies
	// the tables the rows' symbols belong to (index.Names.ID).
	digest uint64
	names  uint64
}

type gwPort struct {
	number  uint32
	kind    gwKind
	servers []encode.GatewayServer
}

// gwKind: servers of different kinds cannot share a port (istiod keeps the
// first and rejects the rest).
type gwKind uint8

const (
	gwPlainHTTP gwKind = iota
	gwTLS              // HTTPS, TLS: filter chains matched by SNI
	gwTCP
)

func kindOf(srv *networking.Server) gwKind {
	p := encode.GatewayProtocol(srv)
	switch {
	case p.IsHTTP():
		return gwPlainHTTP
	case p == index.ProtocolHTTPS || p == index.ProtocolTLS:
		return gwTLS
	}
	return gwTCP
}

// gatewayOf returns the merged gateway of a router's scope, computing it
// once per scope (view.go); a scope of a later config version whose
// Gateways, VirtualServices and services did not change reuses the
// previous version's, route keys and their hashes included.
func gatewayOf(sc *Scope, mesh *encode.Mesh) *mergedGateway {
	m := sc.memo
	if g := m.gateway.Load(); g != nil {
		if sc.view.verify && firstUseIn(&m.checkedGateway, sc.Snapshot) {
			if fresh := newMergedGateway(sc, mesh); fresh.digest != g.digest {
				panic(fmt.Sprintf("engine: verify: the merged gateway of router scope %s (snapshot %d) differs from a fresh one: a memo misses an input",
					sc.Class.Gateways, sc.Snapshot.Version))
			}
		}
		return g
	}
	g := sc.view.reuseGateway(newMergedGateway(sc, mesh))
	if !m.gateway.CompareAndSwap(nil, g) {
		return m.gateway.Load()
	}
	return g
}

// vsGatewayNames resolves a VirtualService's gateways to "NAMESPACE/NAME"
// (short names are relative to the VirtualService), leaving out "mesh".
func vsGatewayNames(vs *networking.VirtualService, ns string) []string {
	var out []string
	for _, g := range vs.GetGateways() {
		switch {
		case g == "mesh":
		case strings.Contains(g, "/"):
			out = append(out, g)
		default:
			out = append(out, ns+"/"+g)
		}
	}
	return out
}

func newMergedGateway(sc *Scope, mesh *encode.Mesh) *mergedGateway {
	snap := sc.Snapshot
	m := &mergedGateway{
		byRoute: map[string][]*encode.GatewayServer{},
		boundVS: map[string][]*index.Config{},
		dests:   map[*index.Config][]*index.Service{},
	}
	if sc.Class.Gateways == "" {
		return m
	}
	refs := strings.Split(sc.Class.Gateways, ",")
	selected := make(map[string]bool, len(refs))
	for _, r := range refs {
		selected[r] = true
	}
	var hosts []string
	snap.Configs(index.ConfigVirtualService, func(c *index.Config) bool {
		vs := vsSpec(c)
		if vs == nil || !sc.view.vsVisible(snap, c, sc.Namespace) {
			return true
		}
		bound := false
		c = sc.vsRow(c, mesh.DomainSuffix) // virtualservice_delegate.go
		vs = vsSpec(c)
		for _, g := range vsGatewayNames(vs, snap.String(c.Key.Namespace)) {
			if selected[g] && !slices.Contains(m.boundVS[g], c) {
				m.boundVS[g] = append(m.boundVS[g], c)
				bound = true
			}
		}
		if bound {
			hosts = vsDestinations(vs, hosts[:0])
			var svcs []*index.Service
			for _, h := range hosts {
				destServices(snap, c.Key.Namespace, h, func(id index.ServiceID) {
					if s := snap.ServiceByID(id); !slices.Contains(svcs, s) {
						svcs = append(svcs, s)
					}
				})
			}
			m.dests[c] = svcs
		}
		return true
	})
	for _, vss := range m.boundVS {
		slices.SortFunc(vss, vsCompare(sc.view, snap, sc.Namespace)) // virtualservice.go
	}
	for _, ref := range refs {
		c := configByRef(snap, index.ConfigGateway, ref)
		if c == nil {
			continue
		}
		gw, _ := c.Spec.(*networking.Gateway)
		for i, srv := range gw.GetServers() {
			m.addServer(sc, c, ref, i, srv)
		}
	}
	slices.SortFunc(m.ports, func(a, b gwPort) int { return cmp.Compare(a.number, b.number) })
	for pi := range m.ports {
		p := &m.ports[pi]
		for si := range p.servers {
			s := &p.servers[si]
			if s.RouteName != "" {
				m.byRoute[s.RouteName] = append(m.byRoute[s.RouteName], s)
			}
		}
	}
	var withLabels []*index.Config
	for _, vss := range m.boundVS {
		for _, c := range vss {
			if len(c.SourceLabelKeys) > 0 {
				withLabels = append(withLabels, c)
			}
		}
	}
	if len(withLabels) > 0 {
		m.sourceLabels = sourceLabelsFor(snap, scopeLabels(sc), withLabels...)
	}
	m.computeDigest(snap.Names().ID(), sc.Class.Namespace, sc.Class.Gateways, mesh.DomainSuffix)
	m.digest = withRouteMesh(m.digest, mesh)               // mesh_routes.go
	m.digest = withDestinationRules(sc, m.digest, m.dests) // destrule_gateway.go
	return m
}

func (m *mergedGateway) addServer(sc *Scope, c *index.Config, ref string, i int, srv *networking.Server) {
	if srv.GetPort() == nil || srv.GetPort().GetNumber() == 0 {
		return
	}
	// The server listens on the port istiod translates its number to
	// (gateway_ports.go); its virtual hosts and route matches keep the number.
	num, kind := gatewayListenPort(sc, srv.GetPort().GetNumber()), kindOf(srv)
	pi := slices.IndexFunc(m.ports, func(p gwPort) bool { return p.number == num })
	if pi < 0 {
		m.ports = append(m.ports, gwPort{number: num, kind: kind})
		pi = len(m.ports) - 1
	}
	p := &m.ports[pi]
	if p.kind != kind {
		return // istiod rejects a server whose protocol conflicts with the port's
	}
	s := encode.GatewayServer{Gateway: c, Index: i, RouteName: encode.GatewayRouteName(sc.Snapshot.Names(), c, srv, num)}
	if s.RouteName == "" {
		s.VirtualServices = m.boundVS[ref]
	}
	if srv.GetTls().GetMode() == networking.ServerTLSSettings_AUTO_PASSTHROUGH {
		s.Services = autoPassthroughServices(sc, srv)
	}
	p.servers = append(p.servers, s)
}

// autoPassthroughServices: the visible in-mesh services whose hostnames the
// server's hosts cover.
func autoPassthroughServices(sc *Scope, srv *networking.Server) []*index.Service {
	hosts := encode.HostsForNamespace(srv.GetHosts(), "*", "")
	var out []*index.Service
	for _, id := range sc.Services {
		svc := sc.Snapshot.ServiceByID(id)
		if svc.MeshExternal {
			continue
		}
		h := sc.Snapshot.String(svc.Key.Host)
		for _, sh := range hosts {
			if encode.HostMatches(sh, h) {
				out = append(out, svc)
				break
			}
		}
	}
	return out
}

// buildGatewayListeners: one listener per server port.
func buildGatewayListeners(sc *Scope, mesh *encode.Mesh, cache *encode.Cache, names []string, wildcard bool, dst []Resource) ([]Resource, error) {
	m := gatewayOf(sc, mesh)
	sec := securityOf(sc, mesh)
	wasm := wasmPlugins(sc, mesh)     // wasm.go
	tracing, _ := tracingOf(sc, mesh) // tracing.go: a gateway's is the client side
	tel := telemetryOf(sc, mesh)      // rules/telemetry.go
	lp := sc.Patches(mesh).Family(envoypatch.Listeners)
	for i := range m.ports {
		p := &m.ports[i]
		k := &encode.GatewayListenerKey{
			Namespace:    sc.Class.Namespace,
			DomainSuffix: mesh.DomainSuffix,
			Port:         p.number,
			IPv6:         sc.Class.IPv6,
			Topology:     sc.Class.GatewayTopology,
			Servers:      p.servers,
			Authz:        sec.authz,
			RequestAuthn: sec.ra,

			PathNormalization: mesh.PathNormalization,
			Telemetry:         tel,
			Tracing:           tracing,
			TLSDefaults:       mesh.TLSDefaults,
			Wasm:              wasmClient(wasm, p.number),
		}
		k.Patches = mayPatchListener(lp, envoypatch.Gateway, p.number)
		if !wildcard && len(names) > 0 && !slices.Contains(names, k.Name()) {
			continue
		}
		e, err := encode.Resource(cache, sc.Snapshot.Names(), k, encode.GatewayListenerGen)
		if err != nil {
			return dst, fmt.Errorf("listener: %w", err)
		}
		if e.Name == "" || e.Removed() {
			continue // no filter chain (a TCP server no VirtualService routes), or an EnvoyFilter REMOVE
		}
		dst = append(dst, resourceOf(e))
	}
	return addedListeners(cache, sc.Snapshot.Names(), lp, []envoypatch.Context{envoypatch.Gateway}, names, wildcard, dst)
}

// gatewayRouteNames lists a router's RDS names in port order.
func gatewayRouteNames(sc *Scope, mesh *encode.Mesh) []string {
	m := gatewayOf(sc, mesh)
	var out []string
	for i := range m.ports {
		for _, s := range m.ports[i].servers {
			if s.RouteName != "" && !slices.Contains(out, s.RouteName) {
				out = append(out, s.RouteName)
			}
		}
	}
	return out
}

// gwRouteKeys are the virtual host keys of one gateway route
// configuration, computed once per scope (they depend on the scope and the
// mesh's domain suffix only): a warm build looks them up (each key caches
// its hash: the keys are immutable) and concatenates cached bytes.
type gwRouteKeys struct {
	domainSuffix string
	keys         []*encode.GatewayVirtualHostKey // sorted by virtual host name
	// blackhole is set when no VirtualService binds: istiod's 404 host.
	blackhole *encode.GatewayVirtualHostKey
	// unknown is set when no server has the name.
	unknown bool
}

// routeKeys returns the keys of route configuration name, computing them
// on first use.
func (m *mergedGateway) routeKeys(sc *Scope, mesh *encode.Mesh, name string) *gwRouteKeys {
	if v, ok := m.routes.Load(name); ok {
		if rk := v.(*gwRouteKeys); rk.domainSuffix == mesh.DomainSuffix {
			return rk
		}
	}
	rk := m.computeRouteKeys(sc, mesh, name)
	if !rk.unknown {
		// Only names the gateways define: a client may invent any number.
		m.routes.Store(name, rk)
	}
	return rk
}

// buildGatewayRoute assembles a gateway route configuration from its cached
// virtual hosts (see computeRouteKeys).
func (b *rdsBuilder) buildGatewayRoute(name string, dst []Resource) ([]Resource, error) {
	rk := gatewayOf(b.sc, b.mesh).routeKeys(b.sc, b.mesh, name)
	b.parts = b.parts[:0]
	if rk.unknown {
		return b.appendTransientRoute(name, encode.RouteConfigValidateOnly, dst)
	}
	if rk.blackhole != nil {
		e, err := encode.Part(b.cache, b.sc.Snapshot.Names(), rk.blackhole, encode.GatewayBlackholeGen)
		if err != nil {
			return dst, fmt.Errorf("route %s: %w", name, err)
		}
		b.parts = append(b.parts, e)
		return b.appendRouteConfig(name, encode.RouteConfigSidecar, dst)
	}
	names := b.sc.Snapshot.Names()
	for _, k := range rk.keys {
		e, err := encode.Part(b.cache, names, k, encode.GatewayVirtualHostGen)
		if err != nil {
			return dst, fmt.Errorf("route %s: %w", name, err)
		}
		b.parts = append(b.parts, e)
	}
	return b.appendRouteConfig(name, encode.RouteConfigSidecar, dst)
}

// computeRouteKeys is istiod's buildGatewayHTTPRouteConfig: for every
// server behind the route name, the VirtualServices bound to its Gateway
// whose hosts meet the server's; each host gets the routes of every such
// (Gateway, VirtualService); hosts with equal sources collapse into one
// virtual host (collapseDuplicateRoutes); virtual hosts are sorted by name.
// Each virtual host is a cached part, so a one-VirtualService change
// re-encodes its hosts only.
func (m *mergedGateway) computeRouteKeys(sc *Scope, mesh *encode.Mesh, name string) *gwRouteKeys {
	snap := sc.Snapshot
	rk := &gwRouteKeys{domainSuffix: mesh.DomainSuffix}
	servers := m.byRoute[name]
	if len(servers) == 0 {
		rk.unknown = true
		return rk
	}
	type hostInfo struct {
		sources    []encode.GatewayRouteSource
		requireTLS bool
	}
	byHost := map[string]*hostInfo{}
	var order []string
	get := func(h string) *hostInfo {
		hi := byHost[h]
		if hi == nil {
			hi = &hostInfo{}
			byHost[h] = hi
			order = append(order, h)
		}
		return hi
	}
	port := uint32(0)
	var vsHosts []string
	for _, s := range servers {
		srv := s.Server()
		if srv == nil {
			continue
		}
		port = srv.GetPort().GetNumber()
		gwName := encode.GatewayName(snap.Names(), s.Gateway)
		gwNS := snap.String(s.Gateway.Key.Namespace)
		redirect := srv.GetTls().GetHttpsRedirect()
		for _, c := range m.boundVS[gwName] {
			vsNS := snap.String(c.Key.Namespace)
			vsHosts = encode.VirtualServiceHosts(snap.Names(), c, vsHosts[:0])
			hosts := encode.IntersectHosts(encode.HostsForNamespace(srv.GetHosts(), vsNS, gwNS), vsHosts)
			if len(hosts) == 0 || !encode.GatewayHasRoutes(snap.Names(), c, gwName, port, sc.Class.Namespace, m.sourceLabels) {
				continue
			}
			for _, h := range hosts {
				hi := get(strings.ToLower(h))
				src := encode.GatewayRouteSource{Gateway: gwName, VirtualService: c}
				if !slices.Contains(hi.sources, src) {
					hi.sources = append(hi.sources, src)
				}
				hi.requireTLS = hi.requireTLS || redirect
			}
		}
		if redirect {
			for _, h := range srv.GetHosts() {
				_, name := encode.GatewayHost(h)
				get(strings.ToLower(name)).requireTLS = true
			}
		}
	}
	if len(order) == 0 {
		rk.blackhole = &encode.GatewayVirtualHostKey{Port: port}
		return rk
	}
	slices.Sort(order)
	groups := map[string]*encode.GatewayVirtualHostKey{}
	var sig []byte
	for _, h := range order {
		hi := byHost[h]
		sig = sig[:0]
		for _, src := range hi.sources {
			c := src.VirtualService
			sig = append(sig, src.Gateway...)
			sig = binary.LittleEndian.AppendUint32(sig, uint32(c.Key.Namespace))
			sig = binary.LittleEndian.AppendUint32(sig, uint32(c.Key.Name))
		}
		if hi.requireTLS {
			sig = append(sig, 1)
		}
		k := groups[string(sig)]
		if k == nil {
			k = &encode.GatewayVirtualHostKey{
				Namespace: sc.Class.Namespace, DomainSuffix: mesh.DomainSuffix,
				Port: port, Sources: hi.sources, RequireTLS: hi.requireTLS,
				Retry: mesh.DefaultRetry,
			}
			seen := map[*index.Service]bool{}
			for _, src := range hi.sources {
				if len(src.VirtualService.SourceLabelKeys) > 0 {
					k.SourceLabels = m.sourceLabels
				}
				for _, d := range m.dests[src.VirtualService] {
					if !seen[d] {
						seen[d] = true
						k.Destinations = append(k.Destinations, d)
					}
				}
			}
			k.DestinationRules = gatewayHashRules(sc, mesh, k.Destinations) // destrule_gateway.go
			rk.keys = append(rk.keys, k)
			groups[string(sig)] = k
		}
		k.Hosts = append(k.Hosts, h)
	}
	// Hosts were visited in order, so each key's first host is its
	// smallest and sorting by it sorts by virtual host name.
	slices.SortStableFunc(rk.keys, func(x, y *encode.GatewayVirtualHostKey) int { return cmp.Compare(x.Name(), y.Name()) })
	names := snap.Names()
	for _, k := range rk.keys {
		k.SetRoutesPort(names)
	}
	return rk
}

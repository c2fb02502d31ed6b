package encode

import (
	"net"
	"strconv"
	"strings"
	"sync/atomic"

	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/proto"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/pilotfish-mesh/pilotfish/index"
)

// GatewayRouteSource is one VirtualService bound to one Gateway: the unit
// istiod translates gateway routes by (routes are shared per (gateway,
// VirtualService), and hosts whose sources are equal collapse into one
// virtual host).
type GatewayRouteSource struct {
	// Gateway is "NAMESPACE/NAME".
	Gateway        string
	VirtualService *index.Config
}

// GatewayVirtualHostKey is every input of one virtual host of a gateway
// route configuration ("http.80", "https.443.https.gw.ns"): the hostnames
// that get identical routes from the same sources (istiod's
// collapseDuplicateRoutes), their sources in order, and the services the
// routes name (a destination without a port goes to the service's only
// port).
type GatewayVirtualHostKey struct {
	// Namespace is the router's (sourceNamespace matches).
	Namespace    string
	DomainSuffix string
	Port         uint32
	// Hosts are the virtual host's domains, sorted; the first names it.
	Hosts        []string
	Sources      []GatewayRouteSource
	RequireTLS   bool
	Destinations []*index.Service
	// DestinationRules are the consistent-hash DestinationRules of the
	// destinations, by hostname (the routes' hash_policy, as sidecars').
	DestinationRules []HostDestinationRule
	// RoutesPort is the port the routes are translated for: Port, or 0
	// when no route depends on the port, so that the virtual hosts of one
	// VirtualService on several ports share one routes part. Set it with
	// SetRoutesPort (verify mode checks it: the reference generator
	// translates for Port).
	RoutesPort uint32
	// SourceLabels are the router's labels whose keys the sources' match
	// sourceLabels name, as VirtualHostKey.SourceLabels.
	SourceLabels string
	// Retry is the mesh's defaultHttpRetryPolicy (VirtualHostKey.Retry).
	Retry HTTPRetry

	// hash caches Hash (0: not computed yet): the engine keeps a router's
	// keys for the life of its scope and looks each up on every build, and
	// a virtual host of a thousand hosts is costly to hash. Set the fields
	// before the key is first used; it is immutable after.
	hash atomic.Uint64
}

// Hash feeds every field.
func (k *GatewayVirtualHostKey) Hash() uint64 {
	if v := k.hash.Load(); v != 0 {
		return v
	}
	v := k.fieldsHash()
	k.hash.Store(v)
	return v
}

func (k *GatewayVirtualHostKey) fieldsHash() uint64 {
	h := NewHasher("GatewayVirtualHostKey")
	h.Str(k.Namespace)
	h.Str(k.DomainSuffix)
	h.U32(k.Port)
	h.Int(len(k.Hosts))
	for _, s := range k.Hosts {
		h.Str(s)
	}
	h.Int(len(k.Sources))
	for i := range k.Sources {
		h.Str(k.Sources[i].Gateway)
		hashCfgRow(&h, k.Sources[i].VirtualService)
	}
	h.Bool(k.RequireTLS)
	hashSvcRows(&h, k.Destinations)
	hashHostRules(&h, k.DestinationRules)
	h.U32(k.RoutesPort)
	h.Str(k.SourceLabels)
	k.Retry.hashInto(&h)
	if v := h.Sum(); v != 0 {
		return v
	}
	return 1
}

// gwRoute is the gateway side of a route translation: which Gateway the
// routes are for, the ports of the services they name, and the router's
// labels that sourceLabels look at.
type gwRoute struct {
	gateway string
	ports   onlyPorts
	labels  string
}

// matches is istiod's gateway-side match predicate (sourceMatchHTTP with
// the Gateway's name): a match naming gateways must name this one (short
// names are relative to the VirtualService); otherwise its sourceLabels
// must be among the router's labels and its sourceNamespace the router's.
func (g *gwRoute) matches(m *networking.HTTPMatchRequest, vsNS, proxyNS string) bool {
	if len(m.GetGateways()) > 0 {
		return gwMatchesGateway(m.GetGateways(), g.gateway, vsNS)
	}
	if !labelsHold(g.labels, m.GetSourceLabels()) {
		return false
	}
	return m.GetSourceNamespace() == "" || m.GetSourceNamespace() == proxyNS
}

// onlyPort returns the port of a destination service with exactly one.
func (g *gwRoute) onlyPort(host string) (uint32, bool) {
	if g == nil {
		return 0, false
	}
	return g.ports.get(host)
}

// onlyPorts finds the port of a destination service that has exactly one
// (a destination without a port goes to it): a linear search over a few
// services, a map over many (a virtual host of a thousand VirtualServices
// would otherwise search its thousand services for each route).
type onlyPorts struct {
	names index.Names
	dests []*index.Service
	m     map[string]uint32
}

func newOnlyPorts(names index.Names, dests []*index.Service) onlyPorts {
	p := onlyPorts{names: names, dests: dests}
	if len(dests) > 8 {
		p.m = make(map[string]uint32, len(dests))
		for _, d := range dests {
			if len(d.Ports) == 1 {
				p.m[names.String(d.Key.Host)] = d.Ports[0].Number
			}
		}
	}
	return p
}

// get returns the only port of the service named host; of two such
// services the last counts.
func (p *onlyPorts) get(host string) (uint32, bool) {
	if p.m != nil {
		port, ok := p.m[host]
		return port, ok
	}
	for i := len(p.dests) - 1; i >= 0; i-- {
		if d := p.dests[i]; len(d.Ports) == 1 && p.names.String(d.Key.Host) == host {
			return d.Ports[0].Number, true
		}
	}
	return 0, false
}

// Name is istiod's virtual host name, "HOST:PORT" of the first host.
func (k *GatewayVirtualHostKey) Name() string {
	if len(k.Hosts) == 0 {
		return ""
	}
	h := k.Hosts[0]
	if strings.IndexByte(h, ':') >= 0 {
		return net.JoinHostPort(h, strconv.FormatUint(uint64(k.Port), 10))
	}
	var buf [10]byte // one allocation: the concatenation
	return h + ":" + string(strconv.AppendUint(buf[:0], uint64(k.Port), 10))
}

// GatewayVirtualHost generates the virtual host of k: each source's HTTP
// routes for the port, catch-all routes last (istiod's SortVHostRoutes).
// It is the reference of GatewayVirtualHostGen, which encodes the same
// virtual host around cached routes (gateway_route_compose.go).
func GatewayVirtualHost(n index.Names, k *GatewayVirtualHostKey) (string, proto.Message) {
	name := k.Name()
	routes := gatewayRoutes(n, k.routesKeyAt(k.Port))
	vh := &route.VirtualHost{
		Name:                       name,
		Domains:                    k.Hosts,
		Routes:                     routes,
		IncludeRequestAttemptCount: true,
	}
	if k.RequireTLS {
		vh.RequireTls = route.VirtualHost_ALL
	}
	return name, vh
}

// GatewayHasRoutes reports whether VirtualService c gives a server of
// gateway ("NAMESPACE/NAME") on port any route, for a router of namespace
// ns with labels (as GatewayVirtualHostKey.SourceLabels). Otherwise
// istiod's BuildHTTPRoutesForVirtualService fails ("no routes matched")
// and the VirtualService adds no virtual host: one with TCP or TLS routes
// only, or whose matches all name other ports, gateways or sources.
func GatewayHasRoutes(n index.Names, c *index.Config, gateway string, port uint32, ns, labels string) bool {
	vs, _ := c.Spec.(*networking.VirtualService)
	if vs == nil {
		return false
	}
	rc := routeCtx{
		k:     &VirtualHostKey{Type: ProxyRouter, Namespace: ns, Port: port, VirtualService: c},
		names: n, vs: vs, gw: &gwRoute{gateway: gateway, labels: labels},
	}
	found := false
	rc.eachRoute(func(_ *networking.HTTPRoute, m *networking.HTTPMatchRequest) (bool, bool) {
		found = found || rc.applies(m)
		return found, found // the first route ends the walk
	})
	return found
}

// gatewayRoutes translates the routes of k (the reference generator's; the
// direct encoder uses gatewayRouteItems).
func gatewayRoutes(n index.Names, k *GatewayRoutesKey) []*route.Route {
	items := gatewayRouteItems(n, k, false, false)
	out := make([]*route.Route, len(items))
	for i := range items {
		out[i] = items[i].r
	}
	return out
}

// gwRouteItem is one route of a gateway virtual host: a translated message
// (r), or, for a simple route the direct encoder writes from strings, its
// name, match, cluster and operation. src is the index in the key's
// sources of its VirtualService.
type gwRouteItem struct {
	r                        *route.Route
	m                        *networking.HTTPMatchRequest
	name, cluster, operation string
	src                      int
}

// gatewayRouteItems walks k's sources' routes as istiod does, catch-all
// routes last (SortVHostRoutes). With omitMeta translated routes carry no
// metadata (the encoder splices it in); with direct, simple routes
// (gwSimple) are not translated.
func gatewayRouteItems(n index.Names, k *GatewayRoutesKey, omitMeta, direct bool) []gwRouteItem {
	var items, catchAll []gwRouteItem
	// One key and gateway side serve every source: routes keep no
	// reference to them.
	vk := &VirtualHostKey{Type: ProxyRouter, Namespace: k.Namespace, DomainSuffix: k.DomainSuffix, Port: k.Port,
		DestinationRules: k.DestinationRules, Retry: k.Retry}
	gw := &gwRoute{ports: newOnlyPorts(n, k.Destinations), labels: k.SourceLabels}
	for i := range k.Sources {
		s := &k.Sources[i]
		vs, _ := s.VirtualService.Spec.(*networking.VirtualService)
		if vs == nil {
			continue
		}
		vk.VirtualService, gw.gateway = s.VirtualService, s.Gateway
		rc := routeCtx{k: vk, names: n, vs: vs, gw: gw, omitMeta: omitMeta}
		rc.eachRoute(func(in *networking.HTTPRoute, m *networking.HTTPMatchRequest) (bool, bool) {
			var it gwRouteItem
			var ca bool
			if direct && !k.Retry.Set && gwSimple(in, m) && rc.destinationConsistentHash(in.GetRoute()[0].GetDestination()) == nil {
				if !rc.applies(m) {
					return false, false
				}
				it = gwRouteItem{m: m, name: rtRouteName(in, m), src: i}
				it.cluster = rc.destinationCluster(in.GetRoute()[0].GetDestination())
				it.operation = gwOperation(it.cluster, m)
				ca = gwSimpleCatchAll(m)
			} else {
				r := rc.translate(in, m)
				if r == nil {
					return false, false
				}
				it, ca = gwRouteItem{r: r, src: i}, rtIsCatchAll(r)
			}
			if ca {
				catchAll = append(catchAll, it)
			} else {
				items = append(items, it)
			}
			return true, ca
		})
	}
	return append(items, catchAll...)
}

// GatewayBlackholeGen generates GatewayBlackholeVirtualHost.
var GatewayBlackholeGen = partGen(KindVirtualHost, GatewayBlackholeVirtualHost)

// GatewayBlackholeVirtualHost is istiod's answer for a gateway route
// configuration with no virtual host: "blackhole:PORT" matching every
// domain with no routes, so Envoy answers 404. It reads k.Port only.
func GatewayBlackholeVirtualHost(_ index.Names, k *GatewayVirtualHostKey) (string, proto.Message) {
	name := "blackhole:" + strconv.FormatUint(uint64(k.Port), 10)
	return name, &route.VirtualHost{Name: name, Domains: []string{"*"}}
}

package encode

import (
	"net"
	"strconv"

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
	// Syms resolves the rows' symbols; not hashed.
	Syms *index.Symbols
	// Namespace is the router's (sourceNamespace matches).
	Namespace    string
	DomainSuffix string
	Port         uint32
	// Hosts are the virtual host's domains, sorted; the first names it.
	Hosts        []string
	Sources      []GatewayRouteSource
	RequireTLS   bool
	Destinations []*index.Service
}

// Hash feeds every field but Syms.
func (k *GatewayVirtualHostKey) Hash() uint64 {
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
	return h.Sum()
}

// gwRoute is the gateway side of a route translation: which Gateway the
// routes are for and the ports of the services they name.
type gwRoute struct {
	gateway string
	// ports maps a destination hostname to its service's only port.
	ports map[string]uint32
}

// matches is istiod's gateway-side match predicate: a match naming
// gateways must name this one (short names are relative to the
// VirtualService), and a sourceNamespace must be the router's. Source
// labels cannot be evaluated per class, so such a match never applies.
func (g *gwRoute) matches(m *networking.HTTPMatchRequest, vsNS, proxyNS string) bool {
	if !gwMatchesGateway(m.GetGateways(), g.gateway, vsNS) {
		return false
	}
	if len(m.GetSourceLabels()) > 0 {
		return false
	}
	return m.GetSourceNamespace() == "" || m.GetSourceNamespace() == proxyNS
}

// onlyPort returns the port of a destination service with exactly one.
func (g *gwRoute) onlyPort(host string) (uint32, bool) {
	if g == nil {
		return 0, false
	}
	p, ok := g.ports[host]
	return p, ok
}

// Name is istiod's virtual host name, "HOST:PORT" of the first host.
func (k *GatewayVirtualHostKey) Name() string {
	if len(k.Hosts) == 0 {
		return ""
	}
	return net.JoinHostPort(k.Hosts[0], strconv.FormatUint(uint64(k.Port), 10))
}

// GatewayVirtualHost generates the virtual host of k: each source's HTTP
// routes for the port, catch-all routes last (istiod's SortVHostRoutes).
// AppendGatewayVirtualHost encodes the same virtual host directly.
func GatewayVirtualHost(k *GatewayVirtualHostKey) (string, proto.Message) {
	name := k.Name()
	vh := &route.VirtualHost{
		Name:                       name,
		Domains:                    k.Hosts,
		Routes:                     gatewayRoutes(k),
		IncludeRequestAttemptCount: true,
	}
	if k.RequireTLS {
		vh.RequireTls = route.VirtualHost_ALL
	}
	return name, vh
}

// gatewayRoutes translates the routes of k's virtual host.
func gatewayRoutes(k *GatewayVirtualHostKey) []*route.Route {
	var routes, catchAll []*route.Route
	ports := k.onlyPorts()
	for i := range k.Sources {
		src := &k.Sources[i]
		vs, _ := src.VirtualService.Spec.(*networking.VirtualService)
		if vs == nil {
			continue
		}
		vk := &VirtualHostKey{
			Syms: k.Syms, Type: ProxyRouter, Namespace: k.Namespace, DomainSuffix: k.DomainSuffix,
			Port: k.Port, VirtualService: src.VirtualService,
		}
		rc := routeCtx{k: vk, vs: vs, gw: &gwRoute{gateway: src.Gateway, ports: ports}}
		for _, r := range rc.virtualServiceRoutes() {
			if rtIsCatchAll(r) {
				catchAll = append(catchAll, r)
			} else {
				routes = append(routes, r)
			}
		}
	}
	return append(routes, catchAll...)
}

// onlyPorts maps the hostname of each destination service with one port to
// that port.
func (k *GatewayVirtualHostKey) onlyPorts() map[string]uint32 {
	ports := make(map[string]uint32, len(k.Destinations))
	for _, d := range k.Destinations {
		if len(d.Ports) == 1 {
			ports[k.Syms.String(d.Key.Host)] = d.Ports[0].Number
		}
	}
	return ports
}

// GatewayBlackholeVirtualHost is istiod's answer for a gateway route
// configuration with no virtual host: "blackhole:PORT" matching every
// domain with no routes, so Envoy answers 404.
func GatewayBlackholeVirtualHost(k *GatewayVirtualHostKey) (string, proto.Message) {
	name := "blackhole:" + strconv.FormatUint(uint64(k.Port), 10)
	return name, &route.VirtualHost{Name: name, Domains: []string{"*"}}
}

package encode

import (
	"strconv"
	"strings"

	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/pilotfish-mesh/pilotfish/index"
)

// GatewayTopology is a router's gatewayTopology from its PROXY_CONFIG node
// metadata (istiod's meshconfig.Topology): where it sits behind other
// proxies. The zero value is istiod's default.
type GatewayTopology struct {
	// NumTrustedProxies in front of the gateway: the HCM's
	// xff_num_trusted_hops.
	NumTrustedProxies uint32
	// ForwardClientCert is meshconfig's ForwardClientCertDetails (0
	// UNDEFINED: SANITIZE_SET; 1 SANITIZE .. 5 ALWAYS_FORWARD_ONLY), one
	// above Envoy's enum.
	ForwardClientCert uint8
	// ProxyProtocol: connections start with a PROXY protocol header, which
	// the listener strips first.
	ProxyProtocol bool
}

func (t GatewayTopology) hashInto(h *Hasher) {
	h.U32(t.NumTrustedProxies)
	h.U32(uint32(t.ForwardClientCert))
	h.Bool(t.ProxyProtocol)
}

// Meshconfig's ForwardClientCertDetails values pilotfish distinguishes.
const (
	fccUndefined   = 0
	fccAppend      = 3
	fccSanitizeSet = 4
	fccMax         = 5
)

// forwardClientCert is the HCM's forward_client_cert_details and whether
// set_current_client_cert_details applies (istiod's
// buildGatewayConnectionManager: only when details may be added).
func (t GatewayTopology) forwardClientCert() (hcm.HttpConnectionManager_ForwardClientCertDetails, bool) {
	v := t.ForwardClientCert
	if v == fccUndefined || v > fccMax {
		v = fccSanitizeSet
	}
	return hcm.HttpConnectionManager_ForwardClientCertDetails(v - 1), v == fccAppend || v == fccSanitizeSet
}

// GatewayServer is one server of a router's merged gateways: a server of a
// Gateway row (by position, so the row's content hash covers it), the RDS
// route name istiod gives it, and for TCP and TLS passthrough servers the
// VirtualServices bound to its Gateway, whose tcp and tls routes become its
// filter chains.
type GatewayServer struct {
	Gateway *index.Config
	Index   int
	// RouteName is "http.PORT" for plain HTTP servers and
	// "https.PORT.PORTNAME.GATEWAY.NAMESPACE" for HTTPS servers that
	// terminate TLS; "" for TCP, TLS and passthrough servers.
	RouteName string
	// VirtualServices bound to the Gateway (TCP and TLS servers only), in
	// precedence order.
	VirtualServices []*index.Config
	// Services are the services an AUTO_PASSTHROUGH server forwards to by
	// SNI (outbound_.PORT_._.HOST), sorted by hostname.
	Services []*index.Service
}

// Server returns the server's spec.
func (s *GatewayServer) Server() *networking.Server {
	gw, _ := s.Gateway.Spec.(*networking.Gateway)
	if gw == nil || s.Index >= len(gw.Servers) {
		return nil
	}
	return gw.Servers[s.Index]
}

// GatewayName is istiod's name for the server's Gateway, "NAMESPACE/NAME".
func GatewayName(names index.Names, gw *index.Config) string {
	return names.String(gw.Key.Namespace) + "/" + names.String(gw.Key.Name)
}

// GatewayRouteName is istiod's gatewayRDSRouteName for a server listening
// on listenPort (its port, or the target port istiod translates it to):
// "http.LISTENPORT" for HTTP, "https.PORT.PORTNAME.GATEWAY.NAMESPACE" (the
// server's own port) for HTTPS that terminates TLS, "" otherwise.
func GatewayRouteName(names index.Names, gw *index.Config, srv *networking.Server, listenPort uint32) string {
	p := GatewayProtocol(srv)
	bind := ""
	if srv.GetBind() != "" {
		bind = "." + srv.GetBind()
	}
	if p.IsHTTP() {
		return "http." + strconv.FormatUint(uint64(listenPort), 10) + bind
	}
	if p == index.ProtocolHTTPS && !IsPassthrough(srv) {
		port := strconv.FormatUint(uint64(srv.GetPort().GetNumber()), 10)
		return "https." + port + "." + srv.GetPort().GetName() + "." + names.String(gw.Key.Name) + "." + names.String(gw.Key.Namespace) + bind
	}
	return ""
}

// IsPassthrough reports whether a server passes TLS through (PASSTHROUGH or
// AUTO_PASSTHROUGH) instead of terminating it.
func IsPassthrough(srv *networking.Server) bool {
	m := srv.GetTls().GetMode()
	return srv.GetTls() != nil && (m == networking.ServerTLSSettings_PASSTHROUGH || m == networking.ServerTLSSettings_AUTO_PASSTHROUGH)
}

// GatewayHost is a Gateway server host split into its namespace part
// ("*" when none is written, "." for the Gateway's own namespace) and name.
func GatewayHost(h string) (ns, name string) {
	if ns, name, ok := strings.Cut(h, "/"); ok {
		return ns, name
	}
	return "*", h
}

// HostsForNamespace is istiod's host.NamesForNamespace: the server hosts
// that apply to config in namespace ns (a Gateway in gwNS).
func HostsForNamespace(hosts []string, ns, gwNS string) []string {
	var out []string
	for _, h := range hosts {
		hn, name := GatewayHost(h)
		if hn == "*" || hn == ns || (hn == "." && ns == gwNS) {
			out = append(out, name)
		}
	}
	return out
}

// HostMatches is istiod's host.Name.Matches: wildcard-aware overlap.
func HostMatches(a, b string) bool {
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

// subsetOf is istiod's host.Name.SubsetOf: every name a matches, b matches.
func subsetOf(a, b string) bool {
	if strings.HasPrefix(b, "*") {
		if strings.HasPrefix(a, "*") {
			return strings.HasSuffix(a[1:], b[1:])
		}
		return strings.HasSuffix(a, b[1:])
	}
	return a == b
}

// IntersectHosts is istiod's Names.Intersection: for each matching pair the
// more specific name, each once, in server-host order.
func IntersectHosts(server, vs []string) []string {
	var out []string
	add := func(h string) {
		for _, o := range out {
			if o == h {
				return
			}
		}
		out = append(out, h)
	}
	for _, a := range server {
		for _, b := range vs {
			switch {
			case subsetOf(a, b):
				add(a)
			case subsetOf(b, a):
				add(b)
			}
		}
	}
	return out
}

// VirtualServiceHosts returns a VirtualService row's hosts as istiod
// matches them against a Gateway server's: fully qualified in the
// VirtualService's namespace (istiod's ResolveVirtualServiceShortnames, done
// at ingest: index.Config.Hosts), so a short name such as "productpage"
// meets a server host "*/productpage.shop.svc.cluster.local".
func VirtualServiceHosts(names index.Names, c *index.Config, dst []string) []string {
	for _, h := range c.Hosts {
		dst = append(dst, names.String(h))
	}
	return dst
}

// GatewayProtocol is istiod's protocol.Parse of a server port's protocol
// (SidecarProtocol's names), except that a gateway never sniffs: an
// unknown name, UDP and HTTP_PROXY are TCP.
func GatewayProtocol(srv *networking.Server) index.Protocol {
	name := srv.GetPort().GetProtocol()
	switch p := SidecarProtocol(name); {
	case p == index.ProtocolUnknown, p == index.ProtocolUDP, strings.EqualFold(name, "HTTP_PROXY"):
		return index.ProtocolTCP
	default:
		return p
	}
}

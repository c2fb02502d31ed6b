package encode

import (
	"net/netip"
	"slices"
	"strconv"
	"strings"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/pilotfish-mesh/pilotfish/envoypatch"
	"github.com/pilotfish-mesh/pilotfish/index"
)

// A Sidecar's ingress listeners replace the workload's service ports on the
// inbound side, as istiod's buildInboundChainConfigs does (with its default
// PILOT_ENABLE_SIDECAR_SERVICE_INBOUND_LISTENER_MERGE=false): one set of
// chains per ingress port, named BIND_PORT, to inbound|PORT||, with the
// Sidecar's API path as filter chain metadata. A listener whose captureMode
// is NONE becomes a listener of its own bound to BIND:PORT instead of chains
// of virtualInbound. Ingress TLS is ignored, as istiod ignores it unless
// ENABLE_TLS_ON_SIDECAR_INGRESS is set.

// SidecarIngressOf returns the ingress listeners of a Sidecar row (nil
// without any).
func SidecarIngressOf(c *index.Config) []*networking.IstioIngressListener {
	if c == nil {
		return nil
	}
	sc, _ := c.Spec.(*networking.Sidecar)
	return sc.GetIngress()
}

// SidecarProtocol is istiod's protocol.Parse for a Sidecar port's protocol:
// an exact, case-insensitive protocol name, anything else auto-detected.
func SidecarProtocol(s string) index.Protocol {
	switch strings.ToUpper(s) {
	case "HTTP", "HTTP_PROXY":
		return index.ProtocolHTTP
	case "HTTP2":
		return index.ProtocolHTTP2
	case "HTTPS":
		return index.ProtocolHTTPS
	case "GRPC":
		return index.ProtocolGRPC
	case "GRPC-WEB":
		return index.ProtocolGRPCWeb
	case "TCP":
		return index.ProtocolTCP
	case "TLS":
		return index.ProtocolTLS
	case "MONGO":
		return index.ProtocolMongo
	case "REDIS":
		return index.ProtocolRedis
	case "MYSQL":
		return index.ProtocolMySQL
	case "UDP":
		return index.ProtocolUDP
	}
	return index.ProtocolUnknown
}

// SidecarBindsPort reports whether an ingress listener is a real listener
// (captureMode NONE) rather than chains of virtualInbound.
func SidecarBindsPort(in *networking.IstioIngressListener) bool {
	return in.GetCaptureMode() == networking.CaptureMode_NONE
}

// GlobalUnicastIP is istiod's GlobalUnicastIP: the first of ips that is a
// global unicast address, or "".
func GlobalUnicastIP(ips []string) string {
	for _, s := range ips {
		if a, err := netip.ParseAddr(s); err == nil && a.IsGlobalUnicast() {
			return s
		}
	}
	return ""
}

// sidecarIngressBind is where an ingress listener binds: its bind, else the
// proxy's global unicast IP, else the wildcard (istiod's
// getSidecarInboundBindIPs).
func (k *VirtualInboundKey) sidecarIngressBind(in *networking.IstioIngressListener) string {
	if b := in.GetBind(); b != "" {
		return b
	}
	if ip := GlobalUnicastIP(strings.Split(k.ProxyIPs, ",")); ip != "" {
		return ip
	}
	return lsWildcard(k.IPv6)
}

// sidecarIngress lists the ingress listeners that build chains, sorted by
// port, the first per port winning (istiod keys them by port).
func (k *VirtualInboundKey) sidecarIngress() []*networking.IstioIngressListener {
	var out []*networking.IstioIngressListener
	for _, in := range SidecarIngressOf(k.Sidecar) {
		if in.GetPort() == nil || slices.ContainsFunc(out, func(o *networking.IstioIngressListener) bool {
			return o.GetPort().GetNumber() == in.GetPort().GetNumber()
		}) {
			continue
		}
		out = append(out, in)
	}
	slices.SortStableFunc(out, func(a, b *networking.IstioIngressListener) int {
		return int(a.GetPort().GetNumber()) - int(b.GetPort().GetNumber())
	})
	return out
}

// sidecarMTLS is PeerAuthentication's mode on an ingress port.
func (k viIn) sidecarMTLS(port uint32) ServiceMTLS {
	for _, pm := range k.SidecarMTLS {
		if pm.Port == port {
			return pm.MTLS
		}
	}
	return k.MTLS
}

// sidecarChains appends the virtualInbound chains of the Sidecar's ingress
// listeners that do not bind a port of their own.
func (k viIn) sidecarChains(chains []*listener.FilterChain, sec *inboundSecurity) []*listener.FilterChain {
	for _, in := range k.sidecarIngress() {
		if SidecarBindsPort(in) || SidecarProtocol(in.GetPort().GetProtocol()) == index.ProtocolUDP {
			continue
		}
		chains = append(chains, k.ingressChains(in, sec)...)
	}
	return chains
}

// ingressChains builds the chains of one ingress listener, as instanceChains
// does for a service port.
func (k viIn) ingressChains(in *networking.IstioIngressListener, sec *inboundSecurity) []*listener.FilterChain {
	port := in.GetPort().GetNumber()
	proto := SidecarProtocol(in.GetPort().GetProtocol())
	opts := inboundOpts(lsClassOf(proto), k.sidecarMTLS(port))
	name := k.sidecarIngressBind(in) + "_" + strconv.FormatUint(uint64(port), 10)
	cluster := InboundClusterName(port)
	// Sidecar ingress has no service: istiod names it NAME.NAMESPACE for
	// telemetry (the trace decorator).
	host := k.names.String(k.Sidecar.Key.Name) + "." + k.names.String(k.Sidecar.Key.Namespace)
	meta := sidecarConfigMetadata(k.names, k.Sidecar)
	out := make([]*listener.FilterChain, 0, len(opts))
	for _, o := range opts {
		fc := &listener.FilterChain{
			Name: name,
			FilterChainMatch: &listener.FilterChainMatch{
				DestinationPort:      wrapperspb.UInt32(port),
				ApplicationProtocols: o.alpn,
				TransportProtocol:    o.transport,
			},
			Metadata: meta,
		}
		if o.http {
			fc.Filters = sec.httpChain(port, sec.withHTTP(lsHCM(hcmOpts{
				statPrefix:  "inbound_" + name + ";",
				inbound:     true,
				protocol:    proto,
				path:        k.PathNormalization,
				tel:         k.Telemetry,
				tracing:     &k.Tracing,
				routeConfig: inboundRouteConfig(cluster, port, host, port, proto),
			}), port))
		} else {
			fc.Filters = sec.tcp(lsTCPProxy(cluster, cluster), port)
		}
		if o.tls {
			fc.TransportSocket = k.mtls(o.http)
		}
		out = append(out, fc)
	}
	return out
}

// sidecarConfigMetadata is istiod's BuildConfigInfoMetadata for a Sidecar:
// filter_metadata.istio.config, the resource's API path.
func sidecarConfigMetadata(names index.Names, c *index.Config) *core.Metadata {
	path := "/apis/networking.istio.io/v1/namespaces/" + names.String(c.Key.Namespace) + "/sidecar/" + names.String(c.Key.Name)
	return &core.Metadata{FilterMetadata: map[string]*structpb.Struct{
		"istio": {Fields: map[string]*structpb.Value{"config": structpb.NewStringValue(path)}},
	}}
}

// SidecarIngressListenerKey is every input of the listener of one ingress
// port whose captureMode is NONE: the workload's inbound inputs and the
// port.
type SidecarIngressListenerKey struct {
	Inbound VirtualInboundKey
	Port    uint32
}

// Hash feeds every field.
func (k *SidecarIngressListenerKey) Hash() uint64 {
	h := NewHasher("SidecarIngressListenerKey")
	h.U64(k.Inbound.Hash())
	h.U32(k.Port)
	return h.Sum()
}

// patchSet: the patches of Inbound (set for this listener's port).
func (k *SidecarIngressListenerKey) patchSet() (*envoypatch.Set, envoypatch.Context) {
	return k.Inbound.Patches, envoypatch.Inbound
}

// Name is the listener's name, BIND_PORT.
func (k *SidecarIngressListenerKey) Name() string {
	for _, in := range k.Inbound.sidecarIngress() {
		if in.GetPort().GetNumber() == k.Port {
			return k.Inbound.sidecarIngressBind(in) + "_" + strconv.FormatUint(uint64(k.Port), 10)
		}
	}
	return ""
}

// SidecarIngressListenerGen generates SidecarIngressListenerKey's listener.
var SidecarIngressListenerGen = resourceGen(KindListener, ListenerType, SidecarIngressListener)

// SidecarIngressListener is istiod's inboundCustomListener: a listener
// bound to BIND:PORT with the ingress port's chains, without the original
// destination filter (nothing redirects to it).
func SidecarIngressListener(n index.Names, k *SidecarIngressListenerKey) (string, proto.Message) {
	vk := viIn{&k.Inbound, n}
	var in *networking.IstioIngressListener
	for _, x := range vk.sidecarIngress() {
		if x.GetPort().GetNumber() == k.Port {
			in = x
		}
	}
	if in == nil {
		return "", nil
	}
	name := vk.sidecarIngressBind(in) + "_" + strconv.FormatUint(uint64(k.Port), 10)
	chains := vk.ingressChains(in, vk.security())
	l := &listener.Listener{
		Name:                                 name,
		Address:                              lsAddress(vk.sidecarIngressBind(in), k.Port),
		FilterChains:                         chains,
		TrafficDirection:                     core.TrafficDirection_INBOUND,
		ContinueOnListenerFiltersTimeout:     true,
		MaxConnectionsToAcceptPerSocketEvent: wrapperspb.UInt32(1),
		ListenerFiltersTimeout:               durationpb.New(vk.ProtocolDetectionTimeout),
		AccessLog:                            vk.Telemetry.accessLogs(sideInbound, true),
	}
	// The inspectors as on virtualInbound, less original_dst.
	if lf := inboundListenerFilters(chains); len(lf) > 1 {
		l.ListenerFilters = lf[1:]
	}
	return name, l
}

// hashSidecarInbound feeds VirtualInboundKey's Sidecar fields.
func hashSidecarInbound(h *Hasher, k *VirtualInboundKey) {
	hashCfgRow(h, k.Sidecar)
	h.Int(len(k.SidecarMTLS))
	for _, pm := range k.SidecarMTLS {
		h.U32(pm.Port)
		h.U32(uint32(pm.MTLS))
	}
	h.Str(k.ProxyIPs)
}

package encode

import (
	"slices"
	"strconv"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/pilotfish-mesh/pilotfish/envoypatch"
	"github.com/pilotfish-mesh/pilotfish/index"
)

// Istio's capture ports and the names of its virtual listeners.
const (
	VirtualOutboundListenerName = "virtualOutbound"
	VirtualInboundListenerName  = "virtualInbound"
	virtualOutboundPort         = 15001
	virtualInboundPort          = 15006
	inboundPassthroughCluster   = "InboundPassthroughCluster"
)

// lsWildcard is the address a proxy's wildcard listeners bind.
func lsWildcard(ipv6 bool) string {
	if ipv6 {
		return "::"
	}
	return "0.0.0.0"
}

// VirtualOutboundKey is every input of the virtualOutbound listener (15001),
// which iptables redirects outbound traffic to and which hands connections
// to the listener of their original destination.
type VirtualOutboundKey struct {
	OutboundAllowAny bool
	// EgressCluster replaces PassthroughCluster when set (a Sidecar's
	// outboundTrafficPolicy.egressProxy).
	EgressCluster string
	IPv6          bool
	// Telemetry is the class's stats filter and access logs (nil: none).
	Telemetry *Telemetry
	// Patches are the EnvoyFilter patches that may apply to the resource
	// (nil: none; envoyfilter.go).
	Patches *envoypatch.Set
}

// Hash feeds every field.
func (k *VirtualOutboundKey) Hash() uint64 {
	h := NewHasher("VirtualOutboundKey")
	h.Bool(k.OutboundAllowAny)
	h.Str(k.EgressCluster)
	h.Bool(k.IPv6)
	k.Telemetry.hashInto(&h)
	hashPatches(&h, k.Patches)
	return h.Sum()
}

func (k *VirtualOutboundKey) patchSet() (*envoypatch.Set, envoypatch.Context) {
	return k.Patches, envoypatch.Outbound
}

// VirtualOutboundListener is istiod's buildVirtualOutboundListener: connections
// to 15001 itself are dropped, the rest pass through (ALLOW_ANY) or are
// dropped (REGISTRY_ONLY). With an egress proxy, istiod adds a bare
// tls_inspector so the proxy's cluster sees SNI.
func VirtualOutboundListener(_ index.Names, k *VirtualOutboundKey) (string, proto.Message) {
	catchAll := catchAllCluster(k.OutboundAllowAny, k.EgressCluster)
	var filters []*listener.ListenerFilter
	if k.OutboundAllowAny && k.EgressCluster != "" {
		filters = []*listener.ListenerFilter{{Name: lfTLSInspector.Name}}
	}
	return VirtualOutboundListenerName, &listener.Listener{
		Name:            VirtualOutboundListenerName,
		Address:         lsAddress(lsWildcard(k.IPv6), virtualOutboundPort),
		UseOriginalDst:  wrapperspb.Bool(true),
		ListenerFilters: filters,
		FilterChains: []*listener.FilterChain{
			{
				Name:             "virtualOutbound-blackhole",
				FilterChainMatch: &listener.FilterChainMatch{DestinationPort: wrapperspb.UInt32(virtualOutboundPort)},
				Filters:          withTelemetryTCP(k.Telemetry, sideOutbound, false, []*listener.Filter{lsTCPProxy(blackholeCluster, blackholeCluster)}),
			},
			{
				Name:    "virtualOutbound-catchall-tcp",
				Filters: withTelemetryTCP(k.Telemetry, sideOutbound, true, []*listener.Filter{lsTCPProxy(catchAll, catchAll)}),
			},
		},
		AccessLog:                            k.Telemetry.accessLogs(sideOutbound, true),
		TrafficDirection:                     core.TrafficDirection_OUTBOUND,
		MaxConnectionsToAcceptPerSocketEvent: wrapperspb.UInt32(1),
	}
}

// PortMTLS is a workload port's PeerAuthentication mode.
type PortMTLS struct {
	Port uint32
	MTLS ServiceMTLS
}

// InboundInstance is one service port the proxy serves.
type InboundInstance struct {
	Service *index.Service
	// Port is the service port; TargetPort the workload's.
	Port       index.Port
	TargetPort uint32
	// MTLS is PeerAuthentication's mode for the workload on TargetPort
	// (ServiceMTLSUnknown reads as PERMISSIVE, istiod's default).
	MTLS ServiceMTLS
}

// VirtualInboundKey is every input of the virtualInbound listener (15006):
// the proxy's own service ports (the first per target port wins, as in
// istiod), the mesh's trust domain, and the workload's security policy:
// PeerAuthentication modes (per port on the instances, workload-wide for
// the passthrough chains), AuthorizationPolicies and RequestAuthentications.
type VirtualInboundKey struct {
	TrustDomain              string
	IPv6                     bool
	ProtocolDetectionTimeout time.Duration
	// PathNormalization is the mesh's (meshConfig pathNormalization).
	PathNormalization PathNormalization
	// Telemetry is the class's stats filter and access logs (nil: none).
	Telemetry *Telemetry
	// Tracing is the HTTP chains' tracing (server side).
	Tracing Tracing
	// Instances are sorted by target port.
	Instances []InboundInstance
	// MTLS is the workload-wide mode, for ports no service declares.
	MTLS ServiceMTLS
	// PassthroughPorts are the ports PeerAuthentication's portLevelMtls
	// names that no instance serves, by port: each gets passthrough chains
	// of its own mode.
	PassthroughPorts []PortMTLS
	// Authz are the AuthorizationPolicies selecting the workload.
	Authz AuthzPolicies
	// RequestAuthn are the RequestAuthentications selecting the workload,
	// root namespace first, and their rules' keys.
	RequestAuthn JWTRules
	// Sidecar is the Sidecar row selecting the workload when it has ingress
	// listeners, which then replace Instances (inbound_sidecar.go);
	// SidecarMTLS the PeerAuthentication modes of its ports, and ProxyIPs
	// the proxy's addresses (comma-separated) its default bind comes from.
	Sidecar     *index.Config
	SidecarMTLS []PortMTLS
	ProxyIPs    string
	// MeshMTLS is meshConfig.meshMTLS (Mesh.MeshMTLS): the istio mTLS
	// chains' minimum TLS version and cipher suites.
	MeshMTLS TLSDefaults
	// PeerTrustDomains are the trust domains besides TrustDomain whose
	// SPIFFE identities the istio mTLS chains accept (Mesh.PeerTrustDomains:
	// trustDomainAliases, then caCertificates' trustDomains).
	PeerTrustDomains []string
	// Wasm are the WasmPlugins for the workload's server side (mode
	// SERVER), with their ports: each chain takes those of its port.
	Wasm WasmFilters
	// Patches are the EnvoyFilter patches that may apply to the resource
	// (nil: none; envoyfilter.go).
	Patches *envoypatch.Set
}

// Hash feeds every field.
func (k *VirtualInboundKey) Hash() uint64 {
	h := NewHasher("VirtualInboundKey")
	h.Str(k.TrustDomain)
	h.Bool(k.IPv6)
	h.U64(uint64(k.ProtocolDetectionTimeout))
	h.U32(uint32(k.PathNormalization))
	k.Telemetry.hashInto(&h)
	k.Tracing.hashInto(&h)
	h.Int(len(k.Instances))
	for i := range k.Instances {
		in := &k.Instances[i]
		hashSvcRow(&h, in.Service)
		h.U32(uint32(in.Port.Name))
		h.U32(in.Port.Number)
		h.U32(in.Port.TargetPort)
		h.U32(uint32(in.Port.Protocol))
		h.U32(in.TargetPort)
		h.U32(uint32(in.MTLS))
	}
	h.U32(uint32(k.MTLS))
	h.Int(len(k.PassthroughPorts))
	for _, pp := range k.PassthroughPorts {
		h.U32(pp.Port)
		h.U32(uint32(pp.MTLS))
	}
	k.Authz.hashInto(&h)
	k.RequestAuthn.hashInto(&h)
	hashSidecarInbound(&h, k)
	k.MeshMTLS.hashInto(&h)
	h.Strs(k.PeerTrustDomains)
	k.Wasm.hash(&h)
	hashPatches(&h, k.Patches)
	return h.Sum()
}

func (k *VirtualInboundKey) patchSet() (*envoypatch.Set, envoypatch.Context) {
	return k.Patches, envoypatch.Inbound
}

// inboundOpt is istiod's FilterChainMatchOptions for PERMISSIVE mTLS.
type inboundOpt struct {
	alpn      []string
	transport string
	http      bool
	tls       bool
}

var (
	lsMTLSHTTPALPNs     = []string{"istio-http/1.0", "istio-http/1.1", "istio-h2"}
	lsAllIstioMTLSALPNs = []string{"istio", "istio-peer-exchange", "istio-http/1.0", "istio-http/1.1", "istio-h2"}
	lsMTLSTCPWithMx     = []string{"istio-peer-exchange", "istio"}

	inboundPermissiveAuto = []inboundOpt{
		{alpn: lsMTLSHTTPALPNs, transport: "tls", http: true, tls: true},
		{alpn: lsPlaintextHTTPALPNs, transport: "raw_buffer", http: true},
		{alpn: lsMTLSTCPWithMx, transport: "tls", tls: true},
		{transport: "raw_buffer"},
		{transport: "tls"},
	}
	inboundPermissiveHTTP = []inboundOpt{
		{alpn: lsAllIstioMTLSALPNs, transport: "tls", http: true, tls: true},
		{transport: "raw_buffer", http: true},
	}
	inboundPermissiveTCP = []inboundOpt{
		{alpn: lsAllIstioMTLSALPNs, transport: "tls", tls: true},
		{transport: "tls"},
		{transport: "raw_buffer"},
	}
)

// Generators of the virtual listeners.
var (
	VirtualOutboundGen = resourceGen(KindListener, ListenerType, VirtualOutboundListener)
	VirtualInboundGen  = resourceGen(KindListener, ListenerType, VirtualInboundListener)
)

// VirtualInboundListener is istiod's inbound virtual listener: a blackhole
// for 15006 itself, passthrough chains for ports no service declares, and
// chains per served port to inbound|PORT||.
func VirtualInboundListener(n index.Names, key *VirtualInboundKey) (string, proto.Message) {
	k := viIn{key, n}
	wildcard := lsWildcard(k.IPv6)
	chains := []*listener.FilterChain{{
		Name:             "virtualInbound-blackhole",
		FilterChainMatch: &listener.FilterChainMatch{DestinationPort: wrapperspb.UInt32(virtualInboundPort)},
		Filters:          withTelemetryTCP(k.Telemetry, sideInbound, false, []*listener.Filter{nfMxTCP, lsTCPProxy(blackholeCluster, blackholeCluster)}),
	}}
	sec := k.security()
	// Passthrough chains, for ports no service declares: workload-wide,
	// then one set per port PeerAuthentication gives a mode of its own.
	chains = k.passthroughChains(chains, 0, k.MTLS, sec)
	for _, pp := range k.PassthroughPorts {
		chains = k.passthroughChains(chains, pp.Port, pp.MTLS, sec)
	}
	// One set of chains per target port; the first instance wins.
	var seen []uint32
	if k.Sidecar != nil {
		chains = k.sidecarChains(chains, sec)
	}
	for i := range k.Instances {
		if k.Sidecar != nil {
			break // the Sidecar's ingress replaces the service ports
		}
		in := &k.Instances[i]
		if slices.Contains(seen, in.TargetPort) || in.Port.Protocol == index.ProtocolUDP {
			continue
		}
		seen = append(seen, in.TargetPort)
		chains = append(chains, k.instanceChains(wildcard, in, sec)...)
	}
	l := &listener.Listener{
		Name:                                 VirtualInboundListenerName,
		Address:                              lsAddress(wildcard, virtualInboundPort),
		FilterChains:                         chains,
		AccessLog:                            k.Telemetry.accessLogs(sideInbound, true),
		TrafficDirection:                     core.TrafficDirection_INBOUND,
		ContinueOnListenerFiltersTimeout:     true,
		MaxConnectionsToAcceptPerSocketEvent: wrapperspb.UInt32(1),
		ListenerFiltersTimeout:               durationpb.New(k.ProtocolDetectionTimeout),
	}
	l.ListenerFilters = inboundListenerFilters(chains)
	return VirtualInboundListenerName, l
}

// passthroughChains appends istiod's passthrough chains (to
// InboundPassthroughCluster) for mode m, matching destination port port
// (0: any).
func (k viIn) passthroughChains(chains []*listener.FilterChain, port uint32, m ServiceMTLS, sec *inboundSecurity) []*listener.FilterChain {
	for _, o := range inboundOpts(lsAuto, m) {
		fc := &listener.FilterChain{FilterChainMatch: &listener.FilterChainMatch{ApplicationProtocols: o.alpn, TransportProtocol: o.transport}}
		if port != 0 {
			fc.FilterChainMatch.DestinationPort = wrapperspb.UInt32(port)
		}
		if o.http {
			fc.Name = "virtualInbound-catchall-http"
			fc.Filters = sec.httpChain(port, sec.withHTTP(lsHCM(hcmOpts{
				statPrefix:  inboundPassthroughCluster + ";",
				inbound:     true,
				path:        k.PathNormalization,
				tel:         k.Telemetry,
				tracing:     &k.Tracing,
				routeConfig: inboundRouteConfig(inboundPassthroughCluster, 0, "", 0, index.ProtocolUnknown),
			}), port))
		} else {
			fc.Name = VirtualInboundListenerName
			fc.Filters = sec.tcp(lsTCPProxy(inboundPassthroughCluster, inboundPassthroughCluster), port)
		}
		if o.tls {
			fc.TransportSocket = k.mtls(o.http)
		}
		chains = append(chains, fc)
	}
	return chains
}

func (k viIn) mtls(http bool) *core.TransportSocket {
	if http {
		return lsInboundMTLS(k.TrustDomain, k.PeerTrustDomains, lsALPNInboundHTTP, &k.MeshMTLS)
	}
	return lsInboundMTLS(k.TrustDomain, k.PeerTrustDomains, lsALPNInboundTCP, &k.MeshMTLS)
}

// instanceChains builds the chains of one served port.
func (k viIn) instanceChains(wildcard string, in *InboundInstance, sec *inboundSecurity) []*listener.FilterChain {
	opts := inboundOpts(lsClassOf(in.Port.Protocol), in.MTLS)
	tport := strconv.FormatUint(uint64(in.TargetPort), 10)
	name := wildcard + "_" + tport
	cluster := "inbound|" + tport + "||"
	host := k.names.String(in.Service.Key.Host)
	out := make([]*listener.FilterChain, 0, len(opts))
	for _, o := range opts {
		fc := &listener.FilterChain{
			Name: name,
			FilterChainMatch: &listener.FilterChainMatch{
				DestinationPort:      wrapperspb.UInt32(in.TargetPort),
				ApplicationProtocols: o.alpn,
				TransportProtocol:    o.transport,
			},
		}
		if o.http {
			fc.Filters = sec.httpChain(in.TargetPort, sec.withHTTP(lsHCM(hcmOpts{
				statPrefix:  "inbound_" + name + ";",
				inbound:     true,
				protocol:    in.Port.Protocol,
				path:        k.PathNormalization,
				tel:         k.Telemetry,
				tracing:     &k.Tracing,
				routeConfig: inboundRouteConfig(cluster, in.Port.Number, host, in.Port.Number, in.Port.Protocol),
			}), in.TargetPort))
		} else {
			fc.Filters = sec.tcp(lsTCPProxy(cluster, cluster), in.TargetPort)
		}
		if o.tls {
			fc.TransportSocket = k.mtls(o.http)
		}
		out = append(out, fc)
	}
	return out
}

// inboundRouteConfig is istiod's buildSidecarInboundHTTPRouteConfig: one
// wildcard virtual host routing everything to the inbound cluster, no
// timeout, retrying requests reset before they reached the application
// (not for gRPC).
func inboundRouteConfig(cluster string, vhPort uint32, host string, opPort uint32, p index.Protocol) *route.RouteConfiguration {
	action := &route.RouteAction{
		ClusterSpecifier: &route.RouteAction_Cluster{Cluster: cluster},
		Timeout:          rtNoTimeout,
		MaxStreamDuration: &route.RouteAction_MaxStreamDuration{
			MaxStreamDuration:    rtNoTimeout,
			GrpcTimeoutHeaderMax: rtNoTimeout,
		},
	}
	if p != index.ProtocolGRPC && p != index.ProtocolGRPCWeb {
		action.RetryPolicy = rtDefaultInboundRetryPolicy
	}
	return &route.RouteConfiguration{
		Name: cluster,
		VirtualHosts: []*route.VirtualHost{{
			Name:    "inbound|http|" + strconv.FormatUint(uint64(vhPort), 10),
			Domains: []string{"*"},
			Routes: []*route.Route{{
				Name:      defaultRouteName,
				Match:     &route.RouteMatch{PathSpecifier: &route.RouteMatch_Prefix{Prefix: "/"}},
				Action:    &route.Route_Route{Route: action},
				Decorator: &route.Decorator{Operation: host + ":" + strconv.FormatUint(uint64(opPort), 10) + "/*"},
			}},
		}},
		ValidateClusters: wrapperspb.Bool(false),
	}
}

// inboundListenerFilters is istiod's populateListenerFilters for the
// virtual inbound listener: original destination, then TLS and HTTP
// inspectors, each disabled on the ports whose chains do not need it.
func inboundListenerFilters(chains []*listener.FilterChain) []*listener.ListenerFilter {
	type need struct{ tls, http bool }
	var ports []uint32
	needs := map[uint32]need{}
	for _, fc := range chains {
		m := fc.GetFilterChainMatch()
		p := m.GetDestinationPort().GetValue()
		n, ok := needs[p]
		if !ok {
			ports = append(ports, p)
		}
		n.tls = n.tls || m.GetTransportProtocol() == "tls"
		for _, a := range m.GetApplicationProtocols() {
			if a == "http/1.1" || a == "h2c" {
				n.http = true
			}
		}
		needs[p] = n
	}
	slices.Sort(ports)
	out := []*listener.ListenerFilter{lfOriginalDst}
	anyTLS, anyHTTP := false, false
	for _, n := range needs {
		anyTLS = anyTLS || n.tls
		anyHTTP = anyHTTP || n.http
	}
	if anyTLS {
		var off []uint32
		if needs[0].tls {
			for _, p := range ports {
				if p != 0 && !needs[p].tls {
					off = append(off, p)
				}
			}
			out = append(out, lsInspector(lfTLSInspector, lsExcludePorts(off)))
		} else {
			var on []uint32
			for _, p := range ports {
				if p != 0 && needs[p].tls {
					on = append(on, p)
				}
			}
			var pred *listener.ListenerFilterChainMatchPredicate
			if len(on) > 0 {
				pred = &listener.ListenerFilterChainMatchPredicate{Rule: &listener.ListenerFilterChainMatchPredicate_NotMatch{NotMatch: lsExcludePorts(on)}}
			}
			out = append(out, lsInspector(lfTLSInspector, pred))
		}
	}
	if anyHTTP {
		var off []uint32
		for _, p := range ports {
			if !needs[p].http {
				off = append(off, p)
			}
		}
		out = append(out, lsInspector(lfHTTPInspector, lsExcludePorts(off)))
	}
	return out
}

func lsInspector(base *listener.ListenerFilter, disabled *listener.ListenerFilterChainMatchPredicate) *listener.ListenerFilter {
	if disabled == nil {
		return base
	}
	return &listener.ListenerFilter{Name: base.Name, ConfigType: base.ConfigType, FilterDisabled: disabled}
}

// lsExcludePorts is istiod's listenerPredicateExcludePorts; nil for none.
func lsExcludePorts(ports []uint32) *listener.ListenerFilterChainMatchPredicate {
	if len(ports) == 0 {
		return nil
	}
	rules := make([]*listener.ListenerFilterChainMatchPredicate, 0, len(ports))
	for _, p := range ports {
		rules = append(rules, &listener.ListenerFilterChainMatchPredicate{
			Rule: &listener.ListenerFilterChainMatchPredicate_DestinationPortRange{
				DestinationPortRange: &typev3.Int32Range{Start: int32(p), End: int32(p + 1)},
			},
		})
	}
	if len(rules) == 1 {
		return rules[0]
	}
	return &listener.ListenerFilterChainMatchPredicate{Rule: &listener.ListenerFilterChainMatchPredicate_OrMatch{
		OrMatch: &listener.ListenerFilterChainMatchPredicate_MatchSet{Rules: rules},
	}}
}

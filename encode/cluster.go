package encode

import (
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	httpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/pilotfish-mesh/pilotfish/envoypatch"
	"github.com/pilotfish-mesh/pilotfish/index"
)

// ClusterRole says which cluster a [ClusterKey] describes.
type ClusterRole uint8

const (
	// ClusterOutbound is "outbound|PORT|SUBSET|HOST" for a service port (and
	// one of its DestinationRule subsets).
	ClusterOutbound ClusterRole = iota
	// ClusterInbound is "inbound|PORT||" for a port the proxy's workload
	// serves.
	ClusterInbound
	// ClusterBlackHole is the fixed BlackHoleCluster.
	ClusterBlackHole
	// ClusterPassthrough is the fixed PassthroughCluster (sidecars).
	ClusterPassthrough
	// ClusterInboundPassthrough is the fixed InboundPassthroughCluster
	// (sidecars).
	ClusterInboundPassthrough
	// ClusterSNIDNAT is "outbound_.PORT_.SUBSET_.HOST", the cluster a
	// router's AUTO_PASSTHROUGH server forwards to by SNI (cluster_snidnat.go).
	ClusterSNIDNAT
)

// ServiceMTLS is a service's mutual TLS mode as istiod infers it for its
// clients (BestEffortInferServiceMTLSMode): from PeerAuthentication at
// namespace and mesh level, and for passthrough services from whether every
// endpoint has a sidecar. Auto mTLS applies unless it is Unknown or Disable.
type ServiceMTLS uint8

const (
	ServiceMTLSUnknown ServiceMTLS = iota // mesh-external services
	ServiceMTLSDisable
	ServiceMTLSPermissive
	ServiceMTLSStrict
)

// ClusterKey holds every input of [Cluster]. Row pointers are hashed by
// their content hash (see TestKeysHashEveryField); the symbols and label
// sets of the key and its rows resolve through the index.Names the cache
// call is given.
type ClusterKey struct {
	Role ClusterRole
	Mesh *Mesh
	// ProxyType: routers never get ORIGINAL_DST service clusters nor
	// use_downstream_protocol; proxyless gRPC gets istiod's grpc shape.
	ProxyType ProxyType
	// IPv6: the proxy has only IPv6 addresses (DNS lookup family, the
	// inbound bind address ::6).
	IPv6 bool
	// Locality is the proxy's "region/zone/subzone", set only for DNS
	// clusters whose inline endpoints get locality priorities (outlier
	// detection or a locality setting in the DestinationRule); "" otherwise,
	// so that proxies of every locality share the bytes.
	Locality string

	// Service and Port are the cluster's service port (for inbound, the
	// service port of the first instance on the workload port).
	Service *index.Service
	Port    index.Port
	// Subset is the DestinationRule subset name ("" for the default
	// cluster) and SubsetLabels its interned labels.
	Subset       string
	SubsetLabels index.LabelSetID
	// DestinationRule is the rule that applies to the service for this
	// proxy (nil when none); its Spec is a *networking.DestinationRule.
	DestinationRule *index.Config
	// ServiceAccounts are the service accounts of the service's endpoints
	// (sorted, unique), in the service's namespace: the SANs istiod checks
	// with ISTIO_MUTUAL.
	ServiceAccounts []index.Sym
	// MTLS is the service's inferred mTLS mode.
	MTLS ServiceMTLS
	// Endpoints is the service's endpoint shard, set only for DNS clusters
	// (STRICT_DNS/LOGICAL_DNS carry their endpoints inline); nil otherwise,
	// so that endpoint churn never changes an EDS cluster.
	Endpoints *index.EndpointShard

	// TargetPort is the workload port of an inbound cluster.
	TargetPort uint32
	// Inbound lists every service with an instance on TargetPort (the
	// first is Service), for the cluster's telemetry metadata.
	Inbound []*index.Service
	// ClusterID is the endpoints' cluster ("Kubernetes" by default), in the
	// telemetry metadata of DNS clusters' inline endpoints.
	ClusterID string
	// Patches are the EnvoyFilter patches that may apply to the resource
	// (nil: none; envoyfilter.go).
	Patches *envoypatch.Set
}

// Hash feeds every field of the key (0 allocations).
func (k *ClusterKey) Hash() uint64 {
	h := NewHasher("cluster")
	h.U32(uint32(k.Role))
	clHashMesh(&h, k.Mesh)
	h.U32(uint32(k.ProxyType))
	h.Bool(k.IPv6)
	h.Str(k.Locality)
	clHashService(&h, k.Service)
	clHashPort(&h, k.Port)
	h.Str(k.Subset)
	h.U32(uint32(k.SubsetLabels))
	clHashConfig(&h, k.DestinationRule)
	h.Int(len(k.ServiceAccounts))
	for _, sa := range k.ServiceAccounts {
		h.U32(uint32(sa))
	}
	h.U32(uint32(k.MTLS))
	clHashShard(&h, k.Endpoints)
	h.U32(k.TargetPort)
	h.Int(len(k.Inbound))
	for _, s := range k.Inbound {
		clHashService(&h, s)
	}
	h.Str(k.ClusterID)
	hashPatches(&h, k.Patches)
	return h.Sum()
}

func (k *ClusterKey) patchSet() (*envoypatch.Set, envoypatch.Context) {
	return k.Patches, k.PatchContext()
}

// PatchContext is the EnvoyFilter context of the cluster: a router's are
// GATEWAY, the inbound ones SIDECAR_INBOUND, the rest SIDECAR_OUTBOUND.
func (k *ClusterKey) PatchContext() envoypatch.Context {
	switch {
	case k.ProxyType == ProxyRouter:
		return envoypatch.Gateway
	case k.Role == ClusterInbound || k.Role == ClusterInboundPassthrough:
		return envoypatch.Inbound
	}
	return envoypatch.Outbound
}

func clHashMesh(h *Hasher, m *Mesh) {
	h.Bool(m != nil)
	if m != nil {
		m.hashInto(h)
	}
}

func clHashService(h *Hasher, s *index.Service) {
	h.Bool(s != nil)
	if s != nil {
		h.U64(s.Hash)
	}
}

func clHashConfig(h *Hasher, c *index.Config) {
	h.Bool(c != nil)
	if c != nil {
		h.U64(c.Hash)
		h.U32(uint32(c.Key.Namespace))
		h.U32(uint32(c.Key.Name))
	}
}

func clHashShard(h *Hasher, s *index.EndpointShard) {
	h.Bool(s != nil)
	if s != nil {
		h.U64(s.Hash)
	}
}

func clHashPort(h *Hasher, p index.Port) {
	h.U32(uint32(p.Name))
	h.U32(p.Number)
	h.U32(p.TargetPort)
	h.U32(uint32(p.Protocol))
}

// clIn is a cluster key with the names that resolve its symbols: what
// every cluster helper reads.
type clIn struct {
	*ClusterKey
	names index.Names
}

// Cluster builds the cluster k describes. It is a pure function of k (and
// of the strings n resolves its symbols to).
func Cluster(n index.Names, key *ClusterKey) (string, proto.Message) {
	k := clIn{key, n}
	var c *clusterv3.Cluster
	switch k.Role {
	case ClusterBlackHole:
		c = clBlackHole(k)
	case ClusterPassthrough:
		c = clPassthrough(k)
	case ClusterInboundPassthrough:
		c = clInboundPassthrough(k)
	case ClusterInbound:
		c = clInbound(k)
	case ClusterSNIDNAT:
		c = clSNIDNAT(k)
	default:
		if k.ProxyType == ProxyGRPC {
			c = clGRPC(k)
		} else {
			c = clOutbound(k)
		}
	}
	return c.Name, c
}

// clDNSRefreshRate is istiod's default meshConfig.dnsRefreshRate (Mesh.DNSRefreshRate 0).
const clDNSRefreshRate = 60 * time.Second

// clDNSJitter is istiod's PILOT_DNS_JITTER_DURATION default.
const clDNSJitter = 100 * time.Millisecond

// clMaxSeconds is the largest duration Envoy accepts (about 292
// years), used to disable inbound ORIGINAL_DST cleanup.
const clMaxSeconds = (1<<63 - 1 - 999999999) / 1000000000

// clState is a cluster under construction, with the upstream HTTP
// protocol options that are marshaled into typed_extension_protocol_options
// at the end (istiod's clusterWrapper).
type clState struct {
	k    clIn
	c    *clusterv3.Cluster
	hpo  *httpv3.HttpProtocolOptions
	host string
	dr   *networking.DestinationRule
}

func (s *clState) httpOptions() *httpv3.HttpProtocolOptions {
	if s.hpo == nil {
		s.hpo = &httpv3.HttpProtocolOptions{}
	}
	return s.hpo
}

// finish marshals the HTTP protocol options, defaulting the required
// upstream protocol to HTTP/1.1 as istiod does.
func (s *clState) finish() *clusterv3.Cluster {
	if s.hpo != nil {
		if s.hpo.UpstreamProtocolOptions == nil {
			s.hpo.UpstreamProtocolOptions = &httpv3.HttpProtocolOptions_ExplicitHttpConfig_{
				ExplicitHttpConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig{
					ProtocolConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig_HttpProtocolOptions{
						HttpProtocolOptions: &corev3.Http1ProtocolOptions{},
					},
				},
			}
		}
		s.c.TypedExtensionProtocolOptions = map[string]*anypb.Any{
			clHTTPProtocolOptionsName: clAny(s.hpo),
		}
	}
	return s.c
}

const clHTTPProtocolOptionsName = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"

func clDestinationRule(c *index.Config) *networking.DestinationRule {
	if c == nil {
		return nil
	}
	dr, _ := c.Spec.(*networking.DestinationRule)
	return dr
}

// clDefaultConnectTimeout is istiod's default connect timeout, shared.
var clDefaultConnectTimeout = durationpb.New(10 * time.Second)

func clConnectTimeout(m *Mesh) *durationpb.Duration {
	if m == nil || m.ConnectTimeout == 0 || m.ConnectTimeout == 10*time.Second {
		return clDefaultConnectTimeout
	}
	return durationpb.New(m.ConnectTimeout)
}

// clDiscoveryType is istiod's convertResolution.
func clDiscoveryType(t ProxyType, svc *index.Service) clusterv3.Cluster_DiscoveryType {
	switch svc.Resolution {
	case index.ResolutionDNS:
		return clusterv3.Cluster_STRICT_DNS
	case index.ResolutionDNSRoundRobin:
		return clusterv3.Cluster_LOGICAL_DNS
	case index.ResolutionPassthrough:
		if t == ProxyRouter {
			// Gateways cannot use passthrough clusters.
			return clusterv3.Cluster_EDS
		}
		return clusterv3.Cluster_ORIGINAL_DST
	default:
		return clusterv3.Cluster_EDS
	}
}

// clHostname is the service's hostname string.
func clHostname(k clIn) string { return k.names.String(k.Service.Key.Host) }

// clOutbound builds outbound|PORT|SUBSET|HOST for Envoy proxies,
// following istiod's buildOutboundClusters / buildSubsetCluster.
func clOutbound(k clIn) *clusterv3.Cluster {
	host := clHostname(k)
	name := ClusterName(k.Port.Number, k.Subset, host)
	dr := clDestinationRule(k.DestinationRule)
	var subset *networking.Subset
	if k.Subset != "" {
		subset = clFindSubset(dr, k.Subset)
	}
	policy := clResolvePolicy(dr, k.Port.Number, subset, k.Mesh.defaultPolicy())
	// istiod's endpoint builder reads the rule alone (not the mesh's
	// default policy) for which endpoints a DNS cluster lists.
	drPolicy := clResolvePolicy(dr, k.Port.Number, subset, nil)

	typ := clDiscoveryType(k.ProxyType, k.Service)
	if subset != nil && subset.GetTrafficPolicy().GetLoadBalancer().GetSimple() == networking.LoadBalancerSettings_PASSTHROUGH {
		typ = clusterv3.Cluster_ORIGINAL_DST
	}
	c := &clusterv3.Cluster{
		Name:                 name,
		AltStatName:          name + ";",
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: typ},
		CommonLbConfig:       &clusterv3.Cluster_CommonLbConfig{},
	}
	s := &clState{k: k, c: c, host: host, dr: dr}
	switch typ {
	case clusterv3.Cluster_STRICT_DNS, clusterv3.Cluster_LOGICAL_DNS:
		c.DnsLookupFamily = clusterv3.Cluster_V4_ONLY
		if k.IPv6 {
			c.DnsLookupFamily = clusterv3.Cluster_V6_ONLY
		}
		c.TypedDnsResolverConfig = clCaresResolver
		c.DnsJitter = durationpb.New(clDNSJitter)                  //nolint:staticcheck // istiod still sets it
		c.DnsRefreshRate = durationpb.New(k.Mesh.dnsRefreshRate()) //nolint:staticcheck // istiod still sets it
		c.RespectDnsTtl = true                                     //nolint:staticcheck // istiod still sets it
		c.LoadAssignment = &endpointv3.ClusterLoadAssignment{
			ClusterName: name,
			Endpoints:   clDNSEndpoints(k, drPolicy),
		}
	case clusterv3.Cluster_ORIGINAL_DST:
		// Kubernetes headless services whose targetPort differs from the
		// port (istiod's PassthroughTargetPorts).
		if k.Service.Origin == index.OriginKubernetes && k.Port.TargetPort != 0 && k.Port.TargetPort != k.Port.Number {
			c.LbConfig = &clusterv3.Cluster_OriginalDstLbConfig_{
				OriginalDstLbConfig: &clusterv3.Cluster_OriginalDstLbConfig{
					UpstreamPortOverride: clU32(k.Port.TargetPort),
				},
			}
		}
	}
	s.setUpstreamProtocol(k.Port)
	clSetServiceMetadata(c, clServiceMetadata(k, k.Service))

	sni := ClusterSNI(k.Port.Number, k.Subset, host)
	s.applyTrafficPolicy(policy, true, sni)
	if c.GetType() == clusterv3.Cluster_EDS {
		c.EdsClusterConfig = &clusterv3.Cluster_EdsClusterConfig{
			ServiceName: name,
			EdsConfig:   clADSConfigSource(true),
		}
	}
	c.Filters = append(c.Filters, clMXFilter)
	if subset == nil && k.Service.MeshExternal {
		clIstioMetadata(c).Fields["external"] = clStructBool(true)
	}
	if k.DestinationRule != nil && dr != nil {
		clAddConfigMetadata(c, k)
		if subset != nil {
			clIstioMetadata(c).Fields["subset"] = clStructString(k.Subset)
		}
		if m := policy.tls.GetMode(); m == networking.ClientTLSSettings_SIMPLE || m == networking.ClientTLSSettings_MUTUAL {
			clIstioMetadata(c).Fields["alpn_override"] = clStructString("false")
		}
	}
	return s.finish()
}

// setUpstreamProtocol is istiod's setUpstreamProtocol: HTTP/2 for HTTP2 and
// gRPC ports, use_downstream_protocol for sidecars on auto-detected ports.
func (s *clState) setUpstreamProtocol(p index.Port) {
	if p.Protocol == index.ProtocolHTTP2 || p.Protocol == index.ProtocolGRPC || p.Protocol == index.ProtocolGRPCWeb {
		s.setH2()
		return
	}
	if p.Protocol == index.ProtocolUnknown && s.k.ProxyType == ProxySidecar {
		s.setUseDownstreamProtocol()
	}
}

func (s *clState) setH2() {
	o := s.httpOptions()
	if o.UpstreamProtocolOptions == nil {
		o.UpstreamProtocolOptions = &httpv3.HttpProtocolOptions_ExplicitHttpConfig_{
			ExplicitHttpConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig{
				ProtocolConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig_Http2ProtocolOptions{
					Http2ProtocolOptions: &corev3.Http2ProtocolOptions{},
				},
			},
		}
	}
}

func (s *clState) setUseDownstreamProtocol() {
	o := s.httpOptions()
	h1 := o.GetExplicitHttpConfig().GetHttpProtocolOptions()
	if h1 == nil {
		h1 = &corev3.Http1ProtocolOptions{}
	}
	o.UpstreamProtocolOptions = &httpv3.HttpProtocolOptions_UseDownstreamProtocolConfig{
		UseDownstreamProtocolConfig: &httpv3.HttpProtocolOptions_UseDownstreamHttpConfig{
			HttpProtocolOptions:  h1,
			Http2ProtocolOptions: &corev3.Http2ProtocolOptions{},
		},
	}
}

func (s *clState) isH2() bool {
	return s.hpo != nil && s.hpo.GetExplicitHttpConfig().GetHttp2ProtocolOptions() != nil
}

// clInbound builds inbound|TARGETPORT|| (istiod's buildInboundCluster).
// With the PASSTHROUGH inbound traffic policy (the default) it is
// ORIGINAL_DST, bound to 127.0.0.6 so iptables lets the connection
// through; with LOCALHOST it is STATIC, to the target port on the loopback
// address, unbound (iptables does not capture loopback traffic).
func clInbound(k clIn) *clusterv3.Cluster {
	name := InboundClusterName(k.TargetPort)
	local := k.Mesh != nil && k.Mesh.InboundTrafficPolicy == InboundLocalhost
	c := &clusterv3.Cluster{
		Name:                 name,
		AltStatName:          name + ";",
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_ORIGINAL_DST},
		CommonLbConfig:       &clusterv3.Cluster_CommonLbConfig{},
		CleanupInterval:      &durationpb.Duration{Seconds: clMaxSeconds},
	}
	if local {
		c.ClusterDiscoveryType = &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC}
		c.CleanupInterval = nil
		c.LoadAssignment = clLocalhostEndpoints(name, k.TargetPort, k.IPv6)
	}
	s := &clState{k: k, c: c}
	s.setUpstreamProtocol(k.Port)
	if k.Service != nil && !k.Service.MeshExternal {
		var services []*index.Service
		seen := map[index.Sym]bool{}
		for _, svc := range k.Inbound {
			if svc == nil || seen[svc.Key.Host] {
				continue
			}
			seen[svc.Key.Host] = true
			services = append(services, svc)
		}
		if len(services) == 0 {
			services = append(services, k.Service)
		}
		vals := make([]*structpb.Value, 0, len(services))
		for _, svc := range services {
			vals = append(vals, clServiceMetadata(k, svc))
		}
		clSetServiceMetadata(c, vals...)
	}
	var policy clPolicy
	if dr := clDestinationRule(k.DestinationRule); dr != nil && dr.TrafficPolicy != nil {
		policy = clResolvePolicy(dr, k.Port.Number, nil, nil)
		if c.Metadata != nil {
			clAddConfigMetadata(c, k)
		}
	}
	policy = policy.withMeshDefault(k.Mesh.defaultPolicy())
	s.applyTrafficPolicy(policy, false, "")
	if !local {
		c.UpstreamBindConfig = &corev3.BindConfig{SourceAddress: clInboundBind(k.IPv6)}
	}
	return s.finish()
}

// clLocalhostEndpoints is the one endpoint of a LOCALHOST inbound cluster:
// the target port on 127.0.0.1 (::1 for IPv6-only proxies).
func clLocalhostEndpoints(name string, port uint32, ipv6 bool) *endpointv3.ClusterLoadAssignment {
	addr := "127.0.0.1"
	if ipv6 {
		addr = "::1"
	}
	return &endpointv3.ClusterLoadAssignment{
		ClusterName: name,
		Endpoints: []*endpointv3.LocalityLbEndpoints{{LbEndpoints: []*endpointv3.LbEndpoint{{
			HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
				Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
					Address: addr, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port}}}},
			}},
		}}}},
	}
}

func clInboundBind(ipv6 bool) *corev3.SocketAddress {
	addr := "127.0.0.6"
	if ipv6 {
		addr = "::6"
	}
	return &corev3.SocketAddress{Address: addr, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 0}}
}

func clBlackHole(k clIn) *clusterv3.Cluster {
	return &clusterv3.Cluster{
		Name:                 BlackHoleCluster,
		AltStatName:          BlackHoleCluster + ";",
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
		ConnectTimeout:       clConnectTimeout(k.Mesh),
		LbPolicy:             clusterv3.Cluster_ROUND_ROBIN,
	}
}

// clPassthrough is istiod's buildDefaultPassthroughCluster.
func clPassthrough(k clIn) *clusterv3.Cluster {
	c := &clusterv3.Cluster{
		Name:                 PassthroughCluster,
		AltStatName:          PassthroughCluster + ";",
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_ORIGINAL_DST},
		ConnectTimeout:       clConnectTimeout(k.Mesh),
		LbPolicy:             clusterv3.Cluster_CLUSTER_PROVIDED,
		CircuitBreakers:      clDefaultCircuitBreakers,
		TypedExtensionProtocolOptions: map[string]*anypb.Any{
			clHTTPProtocolOptionsName: clPassthroughHTTPOptions(),
		},
		Filters:                   []*clusterv3.Filter{clMXFilter},
		UpstreamConnectionOptions: clKeepalive(k.Mesh.keepalive(), nil),
	}
	if def := k.Mesh.defaultPolicy(); def.GetConnectionPool() != nil {
		// The mesh's default connection pool caps passthrough egress. istiod
		// applies it to a wrapper it never builds: only the cluster's own
		// fields (timeout, breakers, keepalive) take it, not HTTP options.
		(&clState{k: k, c: c}).applyConnectionPool(def.GetConnectionPool(), nil)
	}
	return c
}

// clInboundPassthrough is the passthrough cluster renamed, without
// filters, bound to 127.0.0.6 (its alt_stat_name stays PassthroughCluster;
// as in istiod).
func clInboundPassthrough(k clIn) *clusterv3.Cluster {
	c := clPassthrough(k)
	c.Name = InboundPassthroughCluster
	c.Filters = nil
	c.UpstreamBindConfig = &corev3.BindConfig{SourceAddress: clInboundBind(k.IPv6)}
	return c
}

func clPassthroughHTTPOptions() *anypb.Any {
	return clAny(&httpv3.HttpProtocolOptions{
		CommonHttpProtocolOptions: &corev3.HttpProtocolOptions{IdleTimeout: durationpb.New(5 * time.Minute)},
		UpstreamProtocolOptions: &httpv3.HttpProtocolOptions_UseDownstreamProtocolConfig{
			UseDownstreamProtocolConfig: &httpv3.HttpProtocolOptions_UseDownstreamHttpConfig{
				HttpProtocolOptions:  &corev3.Http1ProtocolOptions{},
				Http2ProtocolOptions: &corev3.Http2ProtocolOptions{},
			},
		},
	})
}

// clADSConfigSource is the EDS config source istiod uses: ADS, no initial
// fetch timeout, V3. Proxyless gRPC clusters get the bare ADS source.
func clADSConfigSource(envoy bool) *corev3.ConfigSource {
	if envoy {
		return clEnvoyEDSConfig
	}
	return clGRPCEDSConfig
}

// The EDS config sources, shared (immutable).
var (
	clEnvoyEDSConfig = clNewADSConfigSource(true)
	clGRPCEDSConfig  = clNewADSConfigSource(false)
)

func clNewADSConfigSource(envoy bool) *corev3.ConfigSource {
	cs := &corev3.ConfigSource{
		ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
	}
	if envoy {
		cs.InitialFetchTimeout = &durationpb.Duration{}
		cs.ResourceApiVersion = corev3.ApiVersion_V3
	}
	return cs
}

func clFindSubset(dr *networking.DestinationRule, name string) *networking.Subset {
	for _, s := range dr.GetSubsets() {
		if s.GetName() == name {
			return s
		}
	}
	return nil
}

// clDNSEndpoints are the inline endpoints of a STRICT_DNS or
// LOGICAL_DNS cluster: the service's endpoints for the port and subset
// (hostnames included), or for a ServiceEntry without endpoints or
// selector, its host itself.
func clDNSEndpoints(k clIn, p clPolicy) []*endpointv3.LocalityLbEndpoints {
	in := clDNSEndpointsInput(k, p)
	if k.Endpoints != nil && len(k.Endpoints.Groups) > 0 {
		return epBuildLocalities(in)
	}
	if k.Service.HasSelector || k.Service.Origin != index.OriginServiceEntry {
		return nil
	}
	port := k.Port.Number
	if k.Port.TargetPort != 0 {
		port = k.Port.TargetPort
	}
	name := k.names.String(k.Service.Name)
	ns := k.names.String(k.Service.Key.Namespace)
	return []*endpointv3.LocalityLbEndpoints{{
		Locality: &corev3.Locality{},
		LbEndpoints: []*endpointv3.LbEndpoint{{
			HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
				Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
					Address:       clHostname(k),
					PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port},
				}}},
			}},
			Metadata: &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{
				"istio": {Fields: map[string]*structpb.Value{"workload": clStructString(name + ";" + ns + ";" + name + ";;" + k.ClusterID)}},
			}},
			LoadBalancingWeight: clU32(1),
		}},
		LoadBalancingWeight: clU32(1),
	}}
}

func clDNSEndpointsInput(k clIn, p clPolicy) *epInput {
	in := &epInput{
		names: k.names, svc: k.Service, shard: k.Endpoints, port: k.Port,
		subsetLabels: k.SubsetLabels, clusterID: k.ClusterID, hostnames: true,
		sendUnhealthy: p.outlierDetection.GetMinHealthPercent() <= 0,
		mtlsDisabled:  k.MTLS == ServiceMTLSDisable || (p.tls != nil && p.tls.Mode != networking.ClientTLSSettings_ISTIO_MUTUAL),
	}
	return in
}

// ClusterSkipped reports whether istiod would leave out the cluster k
// describes: a DNS cluster with no endpoint for its port and subset (Envoy
// rejects a STRICT_DNS cluster without hosts). The engine asks before
// generating; it allocates nothing.
func ClusterSkipped(n index.Names, k *ClusterKey) bool {
	if k.Role != ClusterOutbound || k.Service == nil || k.ProxyType == ProxyGRPC {
		return false
	}
	if k.Service.Resolution != index.ResolutionDNS && k.Service.Resolution != index.ResolutionDNSRoundRobin {
		return false
	}
	dr := clDestinationRule(k.DestinationRule)
	var subset *networking.Subset
	if k.Subset != "" {
		subset = clFindSubset(dr, k.Subset)
		if subset.GetTrafficPolicy().GetLoadBalancer().GetSimple() == networking.LoadBalancerSettings_PASSTHROUGH {
			return false
		}
	}
	p := clResolvePolicy(dr, k.Port.Number, subset, nil)
	if p.loadBalancer.GetSimple() == networking.LoadBalancerSettings_PASSTHROUGH {
		return false
	}
	if k.Endpoints == nil || len(k.Endpoints.Groups) == 0 {
		return k.Service.HasSelector || k.Service.Origin != index.OriginServiceEntry
	}
	sendUnhealthy := p.outlierDetection.GetMinHealthPercent() <= 0
	for gi := range k.Endpoints.Groups {
		g := &k.Endpoints.Groups[gi]
		if _, ok := epEndpointPort(k.Service, g, k.Port); !ok {
			continue
		}
		for i := range g.Endpoints {
			e := &g.Endpoints[i]
			if e.Health == index.HealthDraining || (e.Health == index.HealthUnhealthy && !sendUnhealthy) {
				continue
			}
			if k.SubsetLabels != 0 && !n.Matches(k.SubsetLabels, e.Labels) {
				continue
			}
			if e.Addr.IsValid() || e.Hostname != 0 {
				return false
			}
		}
	}
	return true
}

// UsesLocality reports whether the proxy's locality changes the cluster k
// describes: a DNS cluster whose inline endpoints get locality priorities
// (outlier detection on) or weights (a locality distribution). The engine
// sets k.Locality only then. It allocates nothing.
func (k *ClusterKey) UsesLocality() bool {
	if k.Role != ClusterOutbound || k.Service == nil || k.ProxyType == ProxyGRPC {
		return false
	}
	if k.Service.Resolution != index.ResolutionDNS && k.Service.Resolution != index.ResolutionDNSRoundRobin {
		return false
	}
	dr := clDestinationRule(k.DestinationRule)
	var subset *networking.Subset
	if k.Subset != "" {
		subset = clFindSubset(dr, k.Subset)
	}
	p := clResolvePolicy(dr, k.Port.Number, subset, k.Mesh.defaultPolicy())
	setting, ok := epEffectiveLocalityLB(p.loadBalancer, k.Mesh.localityLB())
	return ok && (p.outlierDetection != nil || setting.GetDistribute() != nil)
}

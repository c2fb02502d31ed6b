package encode

import (
	"sync/atomic"
	"time"
)

// ProxyType is the kind of xDS client.
type ProxyType uint8

const (
	// ProxySidecar is an Envoy sidecar (`sidecar~...` node IDs).
	ProxySidecar ProxyType = iota
	// ProxyRouter is an Envoy gateway (`router~...` node IDs).
	ProxyRouter
	// ProxyGRPC is a proxyless gRPC client or server (node metadata
	// GENERATOR=grpc, as istio-agent sets it).
	ProxyGRPC
)

func (t ProxyType) String() string {
	switch t {
	case ProxyRouter:
		return "router"
	case ProxyGRPC:
		return "grpc"
	default:
		return "sidecar"
	}
}

// ProxyClass is the part of a proxy that generators may depend on. Proxies
// of equal class share every generated resource, so it holds as little as
// istiod's output actually varies by: never a proxy's ID or IP.
type ProxyClass struct {
	Type ProxyType
	// Namespace is the proxy's namespace (DNS search domains, scoping).
	Namespace string
	// IstioVersion is the proxy's major.minor Istio version ("1.31"), for
	// features that depend on it; "" when unknown.
	IstioVersion string
	ClusterID    string
	Network      string
	// Locality is "region/zone/subzone"; EDS uses it for locality-aware
	// priorities when outlier detection is set.
	Locality string
	// IPv6 is set for proxies with only IPv6 addresses (wildcard listeners
	// bind "::").
	IPv6 bool
	// Sidecar is the Sidecar resource that scopes the proxy, "NAMESPACE/NAME"
	// ("" for none): proxies of one namespace under one Sidecar share a
	// class, and their scope is the Sidecar's egress, not the whole mesh.
	Sidecar string
	// Gateways lists the Gateway resources a router's labels select,
	// "NAMESPACE/NAME" joined by commas in sorted order ("" for none).
	Gateways string
	// Labels are the workload's labels (node metadata LABELS) that
	// workload selectors of AuthorizationPolicy, PeerAuthentication and
	// RequestAuthentication and VirtualService match sourceLabels look
	// at, plus security.istio.io/tlsMode, as
	// sorted "k=v" pairs joined by newlines ("-": labels known, none of
	// them relevant). Proxies that differ only in other labels share a
	// class.
	Labels string
	// ProxyIPs are the proxy's addresses, comma-separated, set only when
	// its Sidecar's ingress listeners bind or send to the pod's own address
	// (istiod names and binds them by it): only then is a class per proxy.
	ProxyIPs string
	// GatewayTopology is a router's PROXY_CONFIG gatewayTopology (zero for
	// other proxies): routers behind different load balancers do not
	// share listeners.
	GatewayTopology GatewayTopology
	// Trace is what the Istio tracing tags say of the proxy, set only when
	// the mesh traces (Mesh.Tracing): the HCMs of proxies of different
	// canonical services differ, as in istiod.
	Trace TraceIdentity
	// EnvoyFilterProxy is what EnvoyFilter patches' match.proxy read of the
	// proxy: its full ISTIO_VERSION, then "\nKEY=VALUE" for each metadata
	// key a match names; "" when no patch has a proxy match, so that
	// proxies of every version share a class then.
	EnvoyFilterProxy string
}

// Hash feeds every field of the class.
func (p *ProxyClass) hashInto(h *Hasher) {
	h.U32(uint32(p.Type))
	h.Str(p.Namespace)
	h.Str(p.IstioVersion)
	h.Str(p.ClusterID)
	h.Str(p.Network)
	h.Str(p.Locality)
	h.Bool(p.IPv6)
	h.Str(p.Sidecar)
	h.Str(p.Gateways)
	h.Str(p.Labels)
	h.Str(p.ProxyIPs)
	p.GatewayTopology.hashInto(h)
	p.Trace.hashInto(h)
	h.Str(p.EnvoyFilterProxy)
}

// Mesh holds mesh-wide settings (istiod's MeshConfig subset pilotfish
// honours). One value is shared by all keys built from one configuration;
// it is immutable.
type Mesh struct {
	// DomainSuffix is the cluster DNS domain ("cluster.local").
	DomainSuffix string
	// TrustDomain is the SPIFFE trust domain ("cluster.local").
	TrustDomain string
	// RootNamespace holds mesh-wide config ("istio-system").
	RootNamespace string
	// ConnectTimeout is the default cluster connect timeout (10s).
	ConnectTimeout time.Duration
	// OutboundAllowAny: outboundTrafficPolicy ALLOW_ANY (the default) sends
	// unknown destinations to PassthroughCluster instead of BlackHoleCluster.
	OutboundAllowAny bool
	// EnableAutoMTLS: use ISTIO_MUTUAL to endpoints labelled tlsMode=istio
	// when no DestinationRule sets TLS (the default).
	EnableAutoMTLS bool
	// ProtocolDetectionTimeout for sniffed ports (istiod: 0, disabled).
	ProtocolDetectionTimeout time.Duration
	// ClusterID is the cluster the registry's endpoints belong to (istiod's
	// CLUSTER_ID, "Kubernetes"): it goes into endpoint and cluster metadata
	// ("istio.workload"), whatever cluster a proxy says it is in.
	ClusterID string
	// TrustDomainAliases are the trust domains (meshConfig
	// trustDomainAliases) whose identities count as the mesh's own: an
	// AuthorizationPolicy principal of TrustDomain or of an alias matches
	// each of them (istiod's trust domain bundle).
	TrustDomainAliases []string
	// JWKSFetchMode is PILOT_JWT_ENABLE_REMOTE_JWKS: who fetches a
	// RequestAuthentication rule's jwksUri.
	JWKSFetchMode JWKSFetchMode

	// Listeners, routes and visibility (meshConfig fields; engine's
	// applyListenerMesh sets them, docs/mesh-config.md).
	//
	// PathNormalization: pathNormalization.normalization of every HCM.
	PathNormalization PathNormalization
	// DefaultRetry: defaultHttpRetryPolicy (unset: istiod's built-in).
	DefaultRetry HTTPRetry
	// InboundTrafficPolicy: inboundTrafficPolicy.mode of inbound clusters.
	InboundTrafficPolicy InboundTrafficPolicy
	// DefaultServiceExportTo, DefaultVirtualServiceExportTo and
	// DefaultDestinationRuleExportTo are the exportTo of objects that set
	// none (nil: "*"), as written ("*", ".", "~", namespaces).
	DefaultServiceExportTo         []string
	DefaultVirtualServiceExportTo  []string
	DefaultDestinationRuleExportTo []string
	// Cluster and endpoint settings (MeshConfig; engine/mesh_cluster.go
	// copies them, encode/mesh_cluster.go has their types). Zero values are
	// istiod's defaults.

	// H2Upgrade is h2UpgradePolicy UPGRADE: clusters of HTTP service ports
	// speak HTTP/2 unless a DestinationRule's h2UpgradePolicy or
	// useClientProtocol says otherwise.
	H2Upgrade bool
	// TCPKeepalive is tcpKeepalive (nil: unset): upstream socket keepalive
	// of every cluster with a connection pool (outbound, inbound,
	// PassthroughCluster).
	TCPKeepalive *TCPKeepalive
	// DNSRefreshRate is dnsRefreshRate, of STRICT_DNS and LOGICAL_DNS
	// clusters (istiod's default 60s; 0 means it too).
	DNSRefreshRate time.Duration
	// LocalityLB is localityLbSetting (nil: istiod's default, enabled).
	LocalityLB *LocalityLB
	// TLSDefaults is tlsDefaults: curves and suites of originated TLS;
	// curves, suites and minimum version of gateway TLS servers.
	TLSDefaults TLSDefaults
	// MeshMTLS is meshMTLS: minimum version and suites of the sidecars'
	// inbound istio mTLS.
	MeshMTLS TLSDefaults
	// CATrustDomains are caCertificates' trustDomains: with TrustDomain
	// and TrustDomainAliases, the trust domains whose identities the
	// sidecars' istio mTLS accepts (PeerTrustDomains).
	CATrustDomains []string
	// DefaultTrafficPolicy is defaultTrafficPolicy (connectionPool and
	// outlierDetection) encoded by EncodeDefaultTrafficPolicy ("" none):
	// the baseline under every DestinationRule's, no rule included.
	DefaultTrafficPolicy string
	// ExtAuthz are extensionProviders of kinds envoyExtAuthzHttp and
	// envoyExtAuthzGrpc, in mesh config order (engine/mesh_extauthz.go).
	ExtAuthz []ExtAuthzProvider

	// Stats is the telemetry istiod gives every proxy when the mesh's
	// default metrics providers name a prometheus provider
	// (defaultProviders.metrics; engine/mesh_telemetry.go): the istio.stats
	// filter on every HTTP connection manager and TCP chain of sidecars and
	// gateways (encode/telemetry.go).
	Stats bool
	// Telemetry is the telemetry of a proxy no Telemetry resource applies
	// to (engine/mesh_telemetry.go): Stats and the mesh config's
	// accessLogFile or defaultProviders.accessLogging. nil: Stats alone
	// decides (DefaultTelemetry).
	Telemetry *Telemetry
	// TelemetryProviders are the mesh config's extensionProviders as
	// Telemetry resources name them (engine/mesh_accesslog.go), and
	// DefaultMetrics and DefaultLogging its defaultProviders.metrics and
	// accessLogging: what rules merge Telemetry resources with.
	TelemetryProviders []TelemetryProvider
	DefaultMetrics     []string
	DefaultLogging     []string
	// MeshAccessLog is the logger of accessLogFile, accessLogFormat and
	// accessLogEncoding (nil: no accessLogFile), istiod's fallback where
	// no Telemetry configures access logging.
	MeshAccessLog *AccessLog
	// NoListenerLogs is disableEnvoyListenerLog (Telemetry.NoListenerLogs).
	NoListenerLogs bool

	// Tracing is the mesh config's tracing (enableTracing, defaultConfig.
	// tracing, defaultProviders.tracing; engine/mesh_tracing.go), nil for
	// none: rules resolves it per class into the keys of HCM-bearing
	// listeners (encode/tracing.go).
	Tracing *MeshTracing
	// TraceDefaults are defaultConfig.tracing's sampling, customTags and
	// maxPathTagLength and PILOT_TRACE_SAMPLING (Provider unset), which
	// a Telemetry's tracing falls back to whatever Tracing is; nil: none
	// read (tests), PILOT_TRACE_SAMPLING's default applies.
	TraceDefaults *MeshTracing

	// hash caches the hash of the fields above (0: not computed yet), which
	// every key holding the mesh feeds: hashing its strings again for each
	// of a push's thousands of keys cost a sixth of a warm CDS build. Set
	// the fields before the mesh is first used; it is immutable after.
	hash atomic.Uint64
}

// DefaultTelemetry is the telemetry of proxies no Telemetry resource
// applies to.
func (m *Mesh) DefaultTelemetry() *Telemetry {
	switch {
	case m.Telemetry != nil:
		return m.Telemetry
	case m.Stats:
		return StatsOnly
	}
	return nil
}

// DefaultMesh returns istiod's defaults.
func DefaultMesh() *Mesh {
	return &Mesh{
		DomainSuffix:     "cluster.local",
		TrustDomain:      "cluster.local",
		RootNamespace:    "istio-system",
		ConnectTimeout:   10 * time.Second,
		OutboundAllowAny: true,
		EnableAutoMTLS:   true,
		ClusterID:        "Kubernetes",
		DNSRefreshRate:   clDNSRefreshRate,
	}
}

// Clone returns a copy of m to change before its first use (a Mesh value
// must not be copied: the copy would keep m's cached hash).
func (m *Mesh) Clone() *Mesh {
	c := &Mesh{
		DomainSuffix:             m.DomainSuffix,
		TrustDomain:              m.TrustDomain,
		RootNamespace:            m.RootNamespace,
		ConnectTimeout:           m.ConnectTimeout,
		OutboundAllowAny:         m.OutboundAllowAny,
		EnableAutoMTLS:           m.EnableAutoMTLS,
		ProtocolDetectionTimeout: m.ProtocolDetectionTimeout,
		ClusterID:                m.ClusterID,
		TrustDomainAliases:       append([]string(nil), m.TrustDomainAliases...),
		JWKSFetchMode:            m.JWKSFetchMode,

		PathNormalization:              m.PathNormalization,
		DefaultRetry:                   m.DefaultRetry,
		InboundTrafficPolicy:           m.InboundTrafficPolicy,
		DefaultServiceExportTo:         cloneStrings(m.DefaultServiceExportTo),
		DefaultVirtualServiceExportTo:  cloneStrings(m.DefaultVirtualServiceExportTo),
		DefaultDestinationRuleExportTo: cloneStrings(m.DefaultDestinationRuleExportTo),
	}
	m.cloneClusterFields(c)
	c.Stats = m.Stats
	c.Tracing = m.Tracing.clone()
	c.TraceDefaults = m.TraceDefaults.clone()
	c.Telemetry = m.Telemetry // immutable, shared
	c.TelemetryProviders = m.TelemetryProviders
	c.DefaultMetrics = m.DefaultMetrics
	c.DefaultLogging = m.DefaultLogging
	c.MeshAccessLog = m.MeshAccessLog
	c.NoListenerLogs = m.NoListenerLogs
	c.ExtAuthz = cloneExtAuthz(m.ExtAuthz)
	return c
}

// cloneStrings copies s, keeping nil (unset) apart from empty.
func cloneStrings(s []string) []string {
	if s == nil {
		return nil
	}
	return append([]string{}, s...)
}

// JWKSFetchMode says who fetches a jwksUri (istiod's
// PILOT_JWT_ENABLE_REMOTE_JWKS values).
type JWKSFetchMode uint8

const (
	// JWKSFetchIstiod: the control plane fetches it and inlines the keys
	// ("istiod", "false", the default).
	JWKSFetchIstiod JWKSFetchMode = iota
	// JWKSFetchHybrid: Envoy fetches it when its host is a mesh service,
	// else the control plane ("hybrid", "true").
	JWKSFetchHybrid
	// JWKSFetchEnvoy: Envoy fetches it, through the cluster of its host
	// ("envoy").
	JWKSFetchEnvoy
)

// ParseJWKSFetchMode reads istiod's values; anything else is istiod's
// default, as istiod reads it, and ok is false.
func ParseJWKSFetchMode(s string) (m JWKSFetchMode, ok bool) {
	switch s {
	case "istiod", "false", "":
		return JWKSFetchIstiod, true
	case "hybrid", "true":
		return JWKSFetchHybrid, true
	case "envoy":
		return JWKSFetchEnvoy, true
	}
	return JWKSFetchIstiod, false
}

func (m JWKSFetchMode) String() string {
	switch m {
	case JWKSFetchHybrid:
		return "hybrid"
	case JWKSFetchEnvoy:
		return "envoy"
	}
	return "istiod"
}

func (m *Mesh) hashInto(h *Hasher) {
	v := m.hash.Load()
	if v == 0 {
		v = m.fieldsHash()
		m.hash.Store(v)
	}
	h.U64(v)
}

func (m *Mesh) fieldsHash() uint64 {
	hh := NewHasher("mesh")
	h := &hh
	h.Str(m.DomainSuffix)
	h.Str(m.TrustDomain)
	h.Str(m.RootNamespace)
	h.U64(uint64(m.ConnectTimeout))
	h.Bool(m.OutboundAllowAny)
	h.Bool(m.EnableAutoMTLS)
	h.U64(uint64(m.ProtocolDetectionTimeout))
	h.Str(m.ClusterID)
	h.Int(len(m.TrustDomainAliases))
	for _, a := range m.TrustDomainAliases {
		h.Str(a)
	}
	h.U32(uint32(m.JWKSFetchMode))

	h.U32(uint32(m.PathNormalization))
	m.DefaultRetry.hashInto(h)
	h.U32(uint32(m.InboundTrafficPolicy))
	h.Bool(m.Stats)
	m.Tracing.hashInto(h)
	m.TraceDefaults.hashInto(h)
	m.Telemetry.hashInto(h)
	h.Int(len(m.TelemetryProviders))
	for i := range m.TelemetryProviders {
		m.TelemetryProviders[i].hashInto(h)
	}
	h.Strs(m.DefaultMetrics)
	h.Strs(m.DefaultLogging)
	h.Bool(m.NoListenerLogs)
	h.Bool(m.MeshAccessLog != nil)
	if m.MeshAccessLog != nil {
		m.MeshAccessLog.hashInto(h)
	}
	for _, l := range [...][]string{m.DefaultServiceExportTo, m.DefaultVirtualServiceExportTo, m.DefaultDestinationRuleExportTo} {
		h.Bool(l == nil)
		h.Int(len(l))
		for _, x := range l {
			h.Str(x)
		}
	}
	m.hashClusterFields(h)
	hashExtAuthz(h, m.ExtAuthz)
	if v := h.Sum(); v != 0 {
		return v
	}
	return 1
}

// Digest is the hash of every field of m that keys holding m feed: two
// meshes of equal Digest generate the same bytes.
func (m *Mesh) Digest() uint64 {
	v := m.hash.Load()
	if v == 0 {
		v = m.fieldsHash()
		m.hash.Store(v)
	}
	return v
}

package encode

import (
	"cmp"
	"slices"
	"time"

	tracingcfg "github.com/envoyproxy/go-control-plane/envoy/config/trace/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	metadatav3 "github.com/envoyproxy/go-control-plane/envoy/type/metadata/v3"
	tracingv3 "github.com/envoyproxy/go-control-plane/envoy/type/tracing/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// Tracing as istiod's configureTracing sets it on an HTTP connection
// manager (docs/telemetry.md, "Tracing"). Two values, so that a resource
// keeps being encoded once per class:
//
//   - MeshTracing (Mesh.Tracing) is what the mesh config says: built by
//     engine/mesh_tracing.go, hashed once per mesh with it.
//   - Tracing is what one HCM gets: rules resolves it per class and side
//     (the provider's collector cluster looked up in the registry, the
//     proxy's identity for the Istio tags) and puts it in the keys of the
//     listeners holding HCMs (outbound, virtual inbound and sidecar
//     ingress, gateway). A Telemetry resource's tracing is another source
//     of the same value: rules merges it over the mesh's per side
//     (client: outbound and gateway; server: inbound).

// TraceKind is the kind of a tracing extension provider.
type TraceKind uint8

const (
	TraceZipkin TraceKind = iota + 1
	TraceDatadog
	TraceSkyWalking
	TraceOpenTelemetry
)

// TraceHeader is a header (zipkin and OpenTelemetry HTTP exporters) or
// gRPC initial metadata entry (OpenTelemetry gRPC exporter).
type TraceHeader struct{ Name, Value string }

// TraceProvider is a tracing extensionProvider of the mesh config, its
// service not resolved yet (istiod looks it up at every push).
type TraceProvider struct {
	Name string
	Kind TraceKind
	// Service is "HOST" or "NAMESPACE/HOST"; Port its service port.
	Service string
	Port    uint32
	// MaxTagLength is the provider's maxTagLength (0: unset).
	MaxTagLength uint32

	// Zipkin: Path (""): /api/v2/spans; TraceID64 is enable64bitTraceId;
	// W3C is traceContextOption USE_B3_WITH_W3C_PROPAGATION.
	Path      string
	TraceID64 bool
	W3C       bool
	// Timeout (zipkin, OpenTelemetry http or grpc) when HasTimeout.
	Timeout    time.Duration
	HasTimeout bool
	// Headers: zipkin headers, OpenTelemetry http headers or grpc
	// initialMetadata, values resolved (envName read from pilotfish's
	// environment, as istiod reads its own).
	Headers []TraceHeader

	// OpenTelemetry: OTelHTTP exports over HTTP to Path, else over gRPC;
	// EnvDetector and DynatraceDetector are its resourceDetectors.
	OTelHTTP          bool
	EnvDetector       bool
	DynatraceDetector bool
}

// TraceTagKind is how a custom tag gets its value.
type TraceTagKind uint8

const (
	TraceTagLiteral TraceTagKind = iota
	TraceTagEnvironment
	TraceTagHeader
	// TraceTagFormatter: Value is a substitution format string (a
	// Telemetry customTags formatter, Envoy's CustomTag value).
	TraceTagFormatter
)

// TraceTag is a custom tag (defaultConfig.tracing.customTags): Value is
// the literal, or the environment variable or request header Name with
// its Default.
type TraceTag struct {
	Tag     string
	Kind    TraceTagKind
	Value   string
	Default string
}

// MeshTracing is the mesh config's tracing, as istiod applies it when no
// Telemetry resource selects a proxy.
type MeshTracing struct {
	// Provider is defaultProviders.tracing[0]'s provider. When
	// HasDefaultProvider and it is nil (no provider of that name, or not a
	// kind pilotfish generates), HCMs get no tracing, as in istiod.
	// Without a default provider, enableTracing gives HCMs tracing without
	// a provider (the tracer istio-agent's bootstrap sets).
	Provider           *TraceProvider
	HasDefaultProvider bool
	// Sampling is defaultConfig.tracing.sampling as istiod reads it.
	Sampling float64
	// DefaultSampling is PILOT_TRACE_SAMPLING (istiod's default 1): the
	// sampling of a proxy whose PROXY_CONFIG tracing sets none.
	DefaultSampling float64
	// IstioTags adds the proxy's Istio tags (canonical service, ...).
	IstioTags bool
	// Tags are defaultConfig.tracing.customTags, sorted by tag.
	Tags []TraceTag
	// MaxPathTagLength is defaultConfig.tracing.maxPathTagLength.
	MaxPathTagLength uint32
}

func (t *MeshTracing) hashInto(h *Hasher) {
	h.Bool(t != nil)
	if t == nil {
		return
	}
	h.Bool(t.Provider != nil)
	if t.Provider != nil {
		t.Provider.hashInto(h)
	}
	h.Bool(t.HasDefaultProvider)
	h.F64(t.Sampling)
	h.F64(t.DefaultSampling)
	h.Bool(t.IstioTags)
	hashTraceTags(h, t.Tags)
	h.U32(t.MaxPathTagLength)
}

func (p *TraceProvider) hashInto(h *Hasher) {
	h.Str(p.Name)
	h.U32(uint32(p.Kind))
	h.Str(p.Service)
	h.U32(p.Port)
	h.U32(p.MaxTagLength)
	h.Str(p.Path)
	h.Bool(p.TraceID64)
	h.Bool(p.W3C)
	h.U64(uint64(p.Timeout))
	h.Bool(p.HasTimeout)
	h.Int(len(p.Headers))
	for _, x := range p.Headers {
		h.Str(x.Name)
		h.Str(x.Value)
	}
	h.Bool(p.OTelHTTP)
	h.Bool(p.EnvDetector)
	h.Bool(p.DynatraceDetector)
}

func hashTraceTags(h *Hasher, tags []TraceTag) {
	h.Bool(tags == nil)
	h.Int(len(tags))
	for _, t := range tags {
		h.Str(t.Tag)
		h.U32(uint32(t.Kind))
		h.Str(t.Value)
		h.Str(t.Default)
	}
}

func (t *MeshTracing) clone() *MeshTracing {
	if t == nil {
		return nil
	}
	c := *t
	if t.Provider != nil {
		p := *t.Provider
		p.Headers = slices.Clone(p.Headers)
		c.Provider = &p
	}
	c.Tags = slices.Clone(t.Tags)
	return &c
}

// SortTraceTags sorts tags by tag, as istiod orders them.
func SortTraceTags(tags []TraceTag) {
	slices.SortStableFunc(tags, func(a, b TraceTag) int { return cmp.Compare(a.Tag, b.Tag) })
}

// TraceIdentity is what the Istio tags and a provider's service name say
// of a proxy, with istiod's defaults applied ("unknown", "latest",
// "default").
type TraceIdentity struct {
	CanonicalService  string
	CanonicalRevision string
	MeshID            string
	Namespace         string
	ClusterID         string
	// ServiceCluster is the node's cluster (istio-agent's service
	// cluster), the span service name of datadog and OpenTelemetry.
	ServiceCluster string
	// ProxyConfig is the proxy's PROXY_CONFIG tracing settings
	// (rules.TraceProxyConfig), "" without PROXY_CONFIG: in a class only,
	// rules turns it into Tracing's settings.
	ProxyConfig string
}

func (id *TraceIdentity) hashInto(h *Hasher) {
	h.Str(id.CanonicalService)
	h.Str(id.CanonicalRevision)
	h.Str(id.MeshID)
	h.Str(id.Namespace)
	h.Str(id.ClusterID)
	h.Str(id.ServiceCluster)
	h.Str(id.ProxyConfig)
}

// Tracing is one HTTP connection manager's tracing: the zero value is
// none (no tracing field, istiod's default request ID extension).
type Tracing struct {
	// On: the HCM has a tracing field.
	On bool
	// Sampling is random_sampling (client and overall sampling are 100).
	Sampling float64
	// IstioTags adds Identity's tags and the dry-run policy tags.
	IstioTags bool
	Identity  TraceIdentity
	// Tags are custom tags, sorted by tag.
	Tags []TraceTag
	// MaxPathTagLength is the fallback max_path_tag_length (0: unset).
	MaxPathTagLength uint32
	// Provider, when set, is the HCM's tracer, exporting to Cluster (its
	// collector service's outbound cluster) with authority Hostname.
	Provider *TraceProvider
	Cluster  string
	Hostname string
	// SpawnUpstreamSpan: a router's, or a SkyWalking provider's.
	SpawnUpstreamSpan bool
	// ZipkinHTTPService: a zipkin collector as an HttpService (proxies of
	// Istio 1.29 and later), else the legacy collector fields.
	ZipkinHTTPService bool
	// ZipkinTraceContext: trace_context_option is set (Istio 1.28+).
	ZipkinTraceContext bool
	// NoRequestIDSampling: a Telemetry's useRequestIdForTraceSampling
	// false (the UUID request ID extension stops deciding sampling).
	NoRequestIDSampling bool
	// NoContextPropagation: a Telemetry's disableContextPropagation, on
	// proxies of Istio 1.30 and later.
	NoContextPropagation bool
}

func (t *Tracing) hashInto(h *Hasher) {
	h.Bool(t.On)
	if !t.On {
		return
	}
	h.F64(t.Sampling)
	h.Bool(t.IstioTags)
	t.Identity.hashInto(h)
	hashTraceTags(h, t.Tags)
	h.U32(t.MaxPathTagLength)
	h.Bool(t.Provider != nil)
	if t.Provider != nil {
		t.Provider.hashInto(h)
	}
	h.Str(t.Cluster)
	h.Str(t.Hostname)
	h.Bool(t.SpawnUpstreamSpan)
	h.Bool(t.ZipkinHTTPService)
	h.Bool(t.ZipkinTraceContext)
	h.Bool(t.NoRequestIDSampling)
	h.Bool(t.NoContextPropagation)
}

// apply sets h's tracing as istiod's configureTracing does (the request
// ID extension stays istiod's default unless a Telemetry sets
// useRequestIdForTraceSampling false).
func (t *Tracing) apply(h *hcm.HttpConnectionManager) {
	if t == nil || !t.On {
		return
	}
	tr := &hcm.HttpConnectionManager_Tracing{}
	if t.Provider != nil {
		if t.SpawnUpstreamSpan {
			tr.SpawnUpstreamSpan = wrapperspb.Bool(true)
		}
		name, cfg := t.providerConfig()
		tr.Provider = &tracingcfg.Tracing_Http{Name: name, ConfigType: &tracingcfg.Tracing_Http_TypedConfig{TypedConfig: cfg}}
		if t.Provider.MaxTagLength != 0 {
			tr.MaxPathTagLength = wrapperspb.UInt32(t.Provider.MaxTagLength)
		}
	}
	tr.ClientSampling = &typev3.Percent{Value: 100}
	tr.OverallSampling = &typev3.Percent{Value: 100}
	tr.RandomSampling = &typev3.Percent{Value: t.Sampling}
	tr.CustomTags = t.customTags()
	if tr.MaxPathTagLength == nil && t.MaxPathTagLength != 0 {
		tr.MaxPathTagLength = wrapperspb.UInt32(t.MaxPathTagLength)
	}
	tr.NoContextPropagation = t.NoContextPropagation
	h.Tracing = tr
	if t.NoRequestIDSampling {
		h.RequestIdExtension = hfUUIDRequestIDNoSampling
	}
}

// customTags are istiod's: the Istio tags when on, then the custom tags,
// all sorted by tag.
func (t *Tracing) customTags() []*tracingv3.CustomTag {
	var out []*tracingv3.CustomTag
	if t.IstioTags {
		id := &t.Identity
		out = append(out,
			literalTag("istio.canonical_revision", id.CanonicalRevision),
			literalTag("istio.canonical_service", id.CanonicalService),
			literalTag("istio.mesh_id", id.MeshID),
			literalTag("istio.namespace", id.Namespace),
			literalTag("istio.cluster_id", id.ClusterID),
		)
		out = append(out, dryRunTraceTags...)
	}
	for _, x := range t.Tags {
		ct := &tracingv3.CustomTag{Tag: x.Tag}
		switch x.Kind {
		case TraceTagEnvironment:
			ct.Type = &tracingv3.CustomTag_Environment_{Environment: &tracingv3.CustomTag_Environment{Name: x.Value, DefaultValue: x.Default}}
		case TraceTagHeader:
			ct.Type = &tracingv3.CustomTag_RequestHeader{RequestHeader: &tracingv3.CustomTag_Header{Name: x.Value, DefaultValue: x.Default}}
		case TraceTagFormatter:
			ct.Type = &tracingv3.CustomTag_Value{Value: x.Value}
		default:
			ct.Type = &tracingv3.CustomTag_Literal_{Literal: &tracingv3.CustomTag_Literal{Value: x.Value}}
		}
		out = append(out, ct)
	}
	slices.SortStableFunc(out, func(a, b *tracingv3.CustomTag) int { return cmp.Compare(a.Tag, b.Tag) })
	return out
}

func literalTag(tag, value string) *tracingv3.CustomTag {
	return &tracingv3.CustomTag{Tag: tag, Type: &tracingv3.CustomTag_Literal_{Literal: &tracingv3.CustomTag_Literal{Value: value}}}
}

// dryRunTraceTags carry the RBAC shadow rules' results (AuthorizationPolicy
// dry-run) into spans, from the RBAC filter's dynamic metadata.
var dryRunTraceTags = []*tracingv3.CustomTag{
	dryRunTraceTag("istio.authorization.dry_run.allow_policy.name", "istio_dry_run_allow_shadow_effective_policy_id"),
	dryRunTraceTag("istio.authorization.dry_run.allow_policy.result", "istio_dry_run_allow_shadow_engine_result"),
	dryRunTraceTag("istio.authorization.dry_run.deny_policy.name", "istio_dry_run_deny_shadow_effective_policy_id"),
	dryRunTraceTag("istio.authorization.dry_run.deny_policy.result", "istio_dry_run_deny_shadow_engine_result"),
}

func dryRunTraceTag(tag, key string) *tracingv3.CustomTag {
	return &tracingv3.CustomTag{Tag: tag, Type: &tracingv3.CustomTag_Metadata_{Metadata: &tracingv3.CustomTag_Metadata{
		Kind: &metadatav3.MetadataKind{Kind: &metadatav3.MetadataKind_Request_{Request: &metadatav3.MetadataKind_Request{}}},
		MetadataKey: &metadatav3.MetadataKey{
			Key:  "envoy.filters.http.rbac",
			Path: []*metadatav3.MetadataKey_PathSegment{{Segment: &metadatav3.MetadataKey_PathSegment_Key{Key: key}}},
		},
	}}}
}

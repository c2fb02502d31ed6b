package rules

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"
	meshv1alpha1 "istio.io/api/mesh/v1alpha1"
	telemetry "istio.io/api/telemetry/v1alpha1"

	"github.com/pilotfish-mesh/pilotfish/encode"
)

// tracingOf is the tracing of a class's HTTP connection managers per
// side (client: outbound and gateway; server: inbound), as istiod's
// configureTracing gives it. Without Telemetry tracing it is the mesh
// config's (meshTracingOf), the same on both sides; with it, the
// Telemetries' tracing merged over the mesh's (telemetryTracingOf).
func tracingOf(sc *Scope, mesh *encode.Mesh) (client, server encode.Tracing) {
	if specs := tracingSpecs(sc, mesh); len(specs) > 0 {
		return telemetryTracingOf(sc, mesh, specs, telemetry.WorkloadMode_CLIENT),
			telemetryTracingOf(sc, mesh, specs, telemetry.WorkloadMode_SERVER)
	}
	t := meshTracingOf(sc, mesh)
	return t, t
}

// meshTracingOf is the tracing of a class's HCMs from the mesh config (no
// Telemetry tracing): the mesh's settings with the class's identity, and
// the default provider's collector cluster, looked up in the registry at
// every build as istiod's LookupCluster does (a provider whose service is
// not there leaves the HCMs without tracing, as in istiod, until it
// appears).
func meshTracingOf(sc *Scope, mesh *encode.Mesh) encode.Tracing {
	mt := mesh.Tracing
	if mt == nil {
		return encode.Tracing{}
	}
	t := encode.Tracing{
		On:               true,
		Sampling:         mt.Sampling,
		IstioTags:        mt.IstioTags,
		Tags:             mt.Tags,
		MaxPathTagLength: mt.MaxPathTagLength,
	}
	// A proxy's PROXY_CONFIG replaces the mesh's defaultConfig, tracing
	// included (istiod's ProxyConfigOrDefault); enableIstioTags counts
	// only without a default provider.
	if sampling, tags, maxPath, istioTags, ok := proxyTraceSettings(sc.Class.Trace.ProxyConfig, mt.DefaultSampling); ok {
		t.Sampling, t.Tags, t.MaxPathTagLength = sampling, tags, maxPath
		if !mt.HasDefaultProvider {
			t.IstioTags = istioTags
		}
	}
	if !mt.HasDefaultProvider {
		setTraceIdentity(sc, &t)
		return t // enableTracing: the bootstrap's tracer
	}
	return withTraceProvider(sc, t, mt.Provider)
}

// setTraceIdentity gives t the class's Istio tags when it adds them.
func setTraceIdentity(sc *Scope, t *encode.Tracing) {
	if t.IstioTags {
		t.Identity = sc.Class.Trace
		t.Identity.ServiceCluster = ""
		t.Identity.ProxyConfig = ""
	}
}

// withTraceProvider is t exporting to p (istiod's
// configureFromProviderConfig); none when p is nil or its service is not
// in the registry.
func withTraceProvider(sc *Scope, t encode.Tracing, p *encode.TraceProvider) encode.Tracing {
	if p == nil {
		return encode.Tracing{}
	}
	host, err := lookupProviderService(sc.Snapshot, p.Service)
	if err != nil {
		return encode.Tracing{}
	}
	setTraceIdentity(sc, &t)
	t.Provider = p
	t.Hostname = host
	t.Cluster = "outbound|" + strconv.FormatUint(uint64(p.Port), 10) + "||" + host
	t.SpawnUpstreamSpan = sc.Class.Type == encode.ProxyRouter || p.Kind == encode.TraceSkyWalking
	switch p.Kind {
	case encode.TraceDatadog, encode.TraceOpenTelemetry:
		// The span service name is the node's cluster.
		t.Identity.ServiceCluster = sc.Class.Trace.ServiceCluster
	case encode.TraceZipkin:
		t.ZipkinHTTPService = istioAtLeast(sc.Class.IstioVersion, 29)
		t.ZipkinTraceContext = istioAtLeast(sc.Class.IstioVersion, 28)
	}
	return t
}

// istioAtLeast reports whether a "1.N" Istio version is 1.minor or later
// ("": unknown, as istiod treats a proxy without a version: no).
func istioAtLeast(v string, minor int) bool {
	major, rest, ok := strings.Cut(v, ".")
	if !ok {
		return false
	}
	ma, err1 := strconv.Atoi(major)
	mi, err2 := strconv.Atoi(rest)
	if err1 != nil || err2 != nil {
		return false
	}
	return ma > 1 || (ma == 1 && mi >= minor)
}

// ErrBadTracing: a tracing setting Envoy would refuse.
var ErrBadTracing = errors.New("invalid tracing setting")

// TraceSettings reads a ProxyConfig's tracing as istiod does (the mesh's
// defaultConfig, or a proxy's PROXY_CONFIG): the random sampling
// percentage (unset or 0: def, PILOT_TRACE_SAMPLING; above 100: 1), the
// custom tags sorted by tag (one without a kind is skipped, as
// istiod skips it), maxPathTagLength and enableIstioTags (default true).
// A negative sampling, which Envoy refuses with the whole listener, fails.
func TraceSettings(pc *meshv1alpha1.Tracing, def float64) (sampling float64, tags []encode.TraceTag, maxPath uint32, istioTags bool, err error) {
	sampling = def
	if s := pc.GetSampling(); s < 0 {
		return 0, nil, 0, false, fmt.Errorf("%w: tracing.sampling %v: want 0 to 100", ErrBadTracing, s)
	} else if s > 100 {
		sampling = 1
	} else if s != 0 {
		sampling = s
	}
	for name, tag := range pc.GetCustomTags() {
		t := encode.TraceTag{Tag: name}
		switch k := tag.GetType().(type) {
		case *meshv1alpha1.Tracing_CustomTag_Literal:
			t.Kind, t.Value = encode.TraceTagLiteral, k.Literal.GetValue()
		case *meshv1alpha1.Tracing_CustomTag_Environment:
			t.Kind, t.Value, t.Default = encode.TraceTagEnvironment, k.Environment.GetName(), k.Environment.GetDefaultValue()
		case *meshv1alpha1.Tracing_CustomTag_Header:
			t.Kind, t.Value, t.Default = encode.TraceTagHeader, k.Header.GetName(), k.Header.GetDefaultValue()
		default:
			continue
		}
		tags = append(tags, t)
	}
	encode.SortTraceTags(tags)
	istioTags = pc.GetEnableIstioTags() == nil || pc.GetEnableIstioTags().GetValue()
	return sampling, tags, pc.GetMaxPathTagLength(), istioTags, nil
}

// TraceProxyConfig is the class value (encode.TraceIdentity.ProxyConfig)
// of a proxy's PROXY_CONFIG tracing: the fields istiod reads, encoded;
// "" for a proxy without PROXY_CONFIG (the mesh's defaultConfig applies).
func TraceProxyConfig(pc *meshv1alpha1.Tracing) string {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(&meshv1alpha1.Tracing{
		Sampling:         pc.GetSampling(),
		CustomTags:       pc.GetCustomTags(),
		MaxPathTagLength: pc.GetMaxPathTagLength(),
		EnableIstioTags:  pc.GetEnableIstioTags(),
	})
	if err != nil {
		panic("rules: marshal a tracing config: " + err.Error())
	}
	return "p" + string(b)
}

// proxyTraceSettings decodes TraceProxyConfig's value; ok is false for ""
// (or a value TraceProxyConfig did not make).
func proxyTraceSettings(v string, def float64) (sampling float64, tags []encode.TraceTag, maxPath uint32, istioTags, ok bool) {
	if v == "" || v[0] != 'p' {
		return 0, nil, 0, false, false
	}
	var pc meshv1alpha1.Tracing
	if proto.Unmarshal([]byte(v[1:]), &pc) != nil {
		return 0, nil, 0, false, false
	}
	sampling, tags, maxPath, istioTags, err := TraceSettings(&pc, def)
	return sampling, tags, maxPath, istioTags, err == nil
}

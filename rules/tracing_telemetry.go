package rules

import (
	telemetry "istio.io/api/telemetry/v1alpha1"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/index"
)

// Telemetry tracing (docs/telemetry.md, "Tracing"), as istiod's
// Telemetries.Tracing merges it (pilot/pkg/model/telemetry.go) and
// configureTracingFromTelemetry applies it: the tracing entries of the
// Telemetries that apply to a class (root namespace, namespace, workload:
// applicableTelemetries), in that order, each over the previous ones, on
// the sides its match mode names. A provider is named by its first
// provider reference; every other field replaces the previous level's
// when set (customTags as a whole, as istiod's shallow merge).

// tracingSpecs are the tracing entries of the Telemetries that apply to
// sc's class, in merge order; nil when none.
func tracingSpecs(sc *Scope, mesh *encode.Mesh) []*telemetry.Tracing {
	if sc.Snapshot.NumConfigs(index.ConfigTelemetry) == 0 {
		return nil
	}
	var out []*telemetry.Tracing
	for _, t := range applicableTelemetries(sc, mesh.RootNamespace) {
		out = append(out, t.GetTracing()...)
	}
	return out
}

// traceSpec is one side's merged tracing (istiod's TracingSpec).
type traceSpec struct {
	provider    *encode.TraceProvider
	disabled    bool
	sampling    *float64
	tags        map[string]*telemetry.Tracing_CustomTag
	requestID   bool // useRequestIdForTraceSampling
	istioTags   bool // enableIstioTags
	noPropagate bool // disableContextPropagation
}

// mergeTraceSpecs merges specs for mode over the mesh's default provider.
func mergeTraceSpecs(mesh *encode.Mesh, specs []*telemetry.Tracing, mode telemetry.WorkloadMode) traceSpec {
	s := traceSpec{requestID: true, istioTags: true}
	if mt := mesh.Tracing; mt != nil && mt.HasDefaultProvider {
		s.provider = mt.Provider
	}
	for _, m := range specs {
		if mm := m.GetMatch().GetMode(); m.GetMatch() != nil && mm != telemetry.WorkloadMode_CLIENT_AND_SERVER && mm != mode {
			continue
		}
		if refs := m.GetProviders(); len(refs) > 0 {
			// One provider per side: the first, as istiod.
			s.provider = nil
			if p := providerByName(mesh, refs[0].GetName()); p != nil {
				s.provider = p.Trace
			}
		}
		if d := m.GetDisableSpanReporting(); d != nil {
			s.disabled = d.GetValue()
		}
		if m.GetCustomTags() != nil {
			s.tags = m.GetCustomTags()
		}
		if r := m.GetRandomSamplingPercentage(); r != nil {
			v := r.GetValue()
			s.sampling = &v
		}
		if u := m.GetUseRequestIdForTraceSampling(); u != nil {
			s.requestID = u.GetValue()
		}
		if e := m.GetEnableIstioTags(); e != nil {
			s.istioTags = e.GetValue()
		}
		if d := m.GetDisableContextPropagation(); d != nil {
			s.noPropagate = d.GetValue()
		}
	}
	return s
}

// telemetryTracingOf is the tracing of one side of sc's class with
// Telemetry tracing: none when span reporting is disabled or no provider
// is in scope (or its service is not in the registry); the sampling and
// custom tags fall back to the proxy config's (defaultConfig.tracing, or
// the proxy's PROXY_CONFIG), then PILOT_TRACE_SAMPLING.
func telemetryTracingOf(sc *Scope, mesh *encode.Mesh, specs []*telemetry.Tracing, mode telemetry.WorkloadMode) encode.Tracing {
	s := mergeTraceSpecs(mesh, specs, mode)
	if s.disabled || s.provider == nil {
		return encode.Tracing{}
	}
	def := encode.MeshTracing{Sampling: 1, DefaultSampling: 1}
	if mesh.TraceDefaults != nil {
		def = *mesh.TraceDefaults
	}
	sampling, tags, maxPath := def.Sampling, def.Tags, def.MaxPathTagLength
	if ps, pt, pm, _, ok := proxyTraceSettings(sc.Class.Trace.ProxyConfig, def.DefaultSampling); ok {
		sampling, tags, maxPath = ps, pt, pm
	}
	if s.sampling != nil {
		sampling = *s.sampling
	}
	if len(s.tags) > 0 {
		tags = telemetryTraceTags(s.tags, istioAtLeast(sc.Class.IstioVersion, 29))
	}
	t := encode.Tracing{
		On:                   true,
		Sampling:             sampling,
		IstioTags:            s.istioTags,
		Tags:                 tags,
		MaxPathTagLength:     maxPath,
		NoRequestIDSampling:  !s.requestID,
		NoContextPropagation: s.noPropagate && istioAtLeast(sc.Class.IstioVersion, 30),
	}
	return withTraceProvider(sc, t, s.provider)
}

// telemetryTraceTags are a Telemetry's custom tags, sorted by tag; a
// formatter tag only for proxies that know it (Istio 1.29+), a tag
// without a kind skipped, as istiod does.
func telemetryTraceTags(m map[string]*telemetry.Tracing_CustomTag, formatter bool) []encode.TraceTag {
	out := make([]encode.TraceTag, 0, len(m))
	for name, tag := range m {
		t := encode.TraceTag{Tag: name}
		switch k := tag.GetType().(type) {
		case *telemetry.Tracing_CustomTag_Literal:
			t.Kind, t.Value = encode.TraceTagLiteral, k.Literal.GetValue()
		case *telemetry.Tracing_CustomTag_Environment:
			t.Kind, t.Value, t.Default = encode.TraceTagEnvironment, k.Environment.GetName(), k.Environment.GetDefaultValue()
		case *telemetry.Tracing_CustomTag_Header:
			t.Kind, t.Value, t.Default = encode.TraceTagHeader, k.Header.GetName(), k.Header.GetDefaultValue()
		case *telemetry.Tracing_CustomTag_Formatter:
			if !formatter {
				continue
			}
			t.Kind, t.Value = encode.TraceTagFormatter, k.Formatter.GetValue()
		default:
			continue
		}
		out = append(out, t)
	}
	encode.SortTraceTags(out)
	return out
}

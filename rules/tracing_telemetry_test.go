package rules

import (
	"testing"

	"google.golang.org/protobuf/types/known/wrapperspb"
	telemetry "istio.io/api/telemetry/v1alpha1"

	"github.com/pilotfish-mesh/pilotfish/encode"
)

// TestTelemetryTracingFormatterTag: a formatter custom tag reaches proxies
// of Istio 1.29 and later only (istiod's buildCustomTagsFromProvider);
// the other kinds reach every proxy, sorted by tag.
func TestTelemetryTracingFormatterTag(t *testing.T) {
	tags := map[string]*telemetry.Tracing_CustomTag{
		"fmt": {Type: &telemetry.Tracing_CustomTag_Formatter{Formatter: &telemetry.Tracing_Formatter{Value: "%REQ(:PATH)%"}}},
		"lit": {Type: &telemetry.Tracing_CustomTag_Literal{Literal: &telemetry.Tracing_Literal{Value: "v"}}},
		"env": {Type: &telemetry.Tracing_CustomTag_Environment{Environment: &telemetry.Tracing_Environment{Name: "POD", DefaultValue: "d"}}},
		"hdr": {Type: &telemetry.Tracing_CustomTag_Header{Header: &telemetry.Tracing_RequestHeader{Name: "x-u", DefaultValue: "a"}}},
		"nil": {},
	}
	newer := telemetryTraceTags(tags, istioAtLeast("1.29", 29))
	want := []encode.TraceTag{
		{Tag: "env", Kind: encode.TraceTagEnvironment, Value: "POD", Default: "d"},
		{Tag: "fmt", Kind: encode.TraceTagFormatter, Value: "%REQ(:PATH)%"},
		{Tag: "hdr", Kind: encode.TraceTagHeader, Value: "x-u", Default: "a"},
		{Tag: "lit", Kind: encode.TraceTagLiteral, Value: "v"},
	}
	if len(newer) != len(want) {
		t.Fatalf("1.29: %+v, want %+v", newer, want)
	}
	for i := range want {
		if newer[i] != want[i] {
			t.Errorf("1.29 tag %d: %+v, want %+v", i, newer[i], want[i])
		}
	}
	older := telemetryTraceTags(tags, istioAtLeast("1.28", 29))
	if len(older) != 3 {
		t.Fatalf("1.28: %+v, want the three tags without the formatter", older)
	}
	for _, tag := range older {
		if tag.Kind == encode.TraceTagFormatter {
			t.Errorf("1.28 got the formatter tag %+v", tag)
		}
	}
}

// TestTelemetryTracingMerge: istiod's merge of the levels' tracing per
// side: a SERVER-only entry leaves the client side alone, a later level's
// provider and custom tags replace the earlier ones' (whole), unset
// fields keep the earlier values, and an unknown provider name leaves the
// side without a provider.
func TestTelemetryTracingMerge(t *testing.T) {
	zipkin := &encode.TraceProvider{Name: "zipkin", Kind: encode.TraceZipkin}
	otel := &encode.TraceProvider{Name: "otel", Kind: encode.TraceOpenTelemetry}
	mesh := &encode.Mesh{TelemetryProviders: []encode.TelemetryProvider{
		{Name: "zipkin", Trace: zipkin}, {Name: "Otel", Trace: otel}, {Name: "prom", Prometheus: true},
	}}
	lit := func(v string) map[string]*telemetry.Tracing_CustomTag {
		return map[string]*telemetry.Tracing_CustomTag{v: {Type: &telemetry.Tracing_CustomTag_Literal{Literal: &telemetry.Tracing_Literal{Value: v}}}}
	}
	specs := []*telemetry.Tracing{
		{Providers: []*telemetry.ProviderRef{{Name: "zipkin"}}, RandomSamplingPercentage: wrapperspb.Double(10), CustomTags: lit("a")},
		{Providers: []*telemetry.ProviderRef{{Name: "otel"}}, CustomTags: lit("b")},
		{Match: &telemetry.Tracing_TracingSelector{Mode: telemetry.WorkloadMode_SERVER}, RandomSamplingPercentage: wrapperspb.Double(50),
			UseRequestIdForTraceSampling: wrapperspb.Bool(false), EnableIstioTags: wrapperspb.Bool(false), DisableSpanReporting: wrapperspb.Bool(true)},
	}
	c := mergeTraceSpecs(mesh, specs, telemetry.WorkloadMode_CLIENT)
	if c.provider != otel || c.sampling == nil || *c.sampling != 10 || c.tags["b"] == nil || c.tags["a"] != nil || !c.requestID || !c.istioTags || c.disabled {
		t.Errorf("client: %+v", c)
	}
	s := mergeTraceSpecs(mesh, specs, telemetry.WorkloadMode_SERVER)
	if s.provider != otel || *s.sampling != 50 || s.requestID || s.istioTags || !s.disabled {
		t.Errorf("server: %+v", s)
	}
	unknown := mergeTraceSpecs(mesh, append(specs[:1:1], &telemetry.Tracing{Providers: []*telemetry.ProviderRef{{Name: "prom"}}}), telemetry.WorkloadMode_CLIENT)
	if unknown.provider != nil {
		t.Errorf("a provider of no tracing kind: %+v", unknown.provider)
	}
	// With a mesh default provider and no Telemetry naming one, the
	// default is the provider.
	mesh.Tracing = &encode.MeshTracing{HasDefaultProvider: true, Provider: zipkin}
	d := mergeTraceSpecs(mesh, []*telemetry.Tracing{{RandomSamplingPercentage: wrapperspb.Double(1)}}, telemetry.WorkloadMode_SERVER)
	if d.provider != zipkin {
		t.Errorf("default provider: %+v", d.provider)
	}
}

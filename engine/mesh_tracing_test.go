package engine

import (
	"errors"
	"strings"
	"testing"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/inject"
)

// TestApplyTracingMesh: what each mesh config gives encode.Mesh.Tracing,
// and the values pilotfish refuses, naming the field.
func TestApplyTracingMesh(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		sampling   float64 // PILOT_TRACE_SAMPLING (0: unset)
		check      func(t *testing.T, tr *encode.MeshTracing)
		err        string
	}{
		{name: "istiod default: tracing without provider", yaml: "{}", check: func(t *testing.T, tr *encode.MeshTracing) {
			if tr == nil || tr.HasDefaultProvider || !tr.IstioTags || tr.Sampling != 1 || tr.DefaultSampling != 1 || len(tr.Tags) != 0 {
				t.Errorf("got %+v", tr)
			}
		}},
		{name: "enableTracing false", yaml: "enableTracing: false", check: func(t *testing.T, tr *encode.MeshTracing) {
			if tr != nil {
				t.Errorf("got %+v, want none", tr)
			}
		}},
		{name: "sampling above 100 is 1, tags sorted, istio tags off", yaml: `defaultConfig:
  tracing:
    sampling: 150
    enableIstioTags: false
    maxPathTagLength: 7
    customTags:
      b: {header: {name: x-b, defaultValue: d}}
      a: {literal: {value: v}}
      c: {environment: {name: E}}`, check: func(t *testing.T, tr *encode.MeshTracing) {
			want := []encode.TraceTag{{Tag: "a", Value: "v"}, {Tag: "b", Kind: encode.TraceTagHeader, Value: "x-b", Default: "d"}, {Tag: "c", Kind: encode.TraceTagEnvironment, Value: "E"}}
			if tr.Sampling != 1 || tr.IstioTags || tr.MaxPathTagLength != 7 || len(tr.Tags) != 3 || tr.Tags[0] != want[0] || tr.Tags[1] != want[1] || tr.Tags[2] != want[2] {
				t.Errorf("got %+v", tr)
			}
		}},
		{name: "default provider by name without case, enableTracing ignored", yaml: `enableTracing: false
defaultProviders: {tracing: [ZIP, other]}
extensionProviders:
- {name: zip, zipkin: {service: zipkin.obs.svc.cluster.local, port: 9411, enable64bitTraceId: true}}
- {name: other, datadog: {service: dd.obs.svc.cluster.local, port: 8126}}`, check: func(t *testing.T, tr *encode.MeshTracing) {
			if tr == nil || !tr.HasDefaultProvider || tr.Provider == nil || tr.Provider.Kind != encode.TraceZipkin || !tr.Provider.TraceID64 || !tr.IstioTags {
				t.Errorf("got %+v", tr)
			}
		}},
		{name: "default provider missing: tracing off", yaml: "defaultProviders: {tracing: [nope]}", check: func(t *testing.T, tr *encode.MeshTracing) {
			if tr == nil || !tr.HasDefaultProvider || tr.Provider != nil {
				t.Errorf("got %+v", tr)
			}
		}},
		{name: "lightstep: no tracer", yaml: `defaultProviders: {tracing: [ls]}
extensionProviders:
- {name: ls, lightstep: {service: ls.obs.svc.cluster.local, port: 8080}}`, check: func(t *testing.T, tr *encode.MeshTracing) {
			if tr == nil || tr.Provider != nil {
				t.Errorf("got %+v", tr)
			}
		}},
		{name: "otel grpc metadata", yaml: `defaultProviders: {tracing: [o]}
extensionProviders:
- {name: o, opentelemetry: {service: otel.obs.svc.cluster.local, port: 4317, grpc: {timeout: 2s, initialMetadata: [{name: k, value: v}]}}}`, check: func(t *testing.T, tr *encode.MeshTracing) {
			p := tr.Provider
			if p == nil || p.OTelHTTP || !p.HasTimeout || p.Timeout.Seconds() != 2 || len(p.Headers) != 1 || p.Headers[0] != (encode.TraceHeader{Name: "k", Value: "v"}) {
				t.Errorf("got %+v", p)
			}
		}},
		{name: "PILOT_TRACE_SAMPLING is the default, not an override", yaml: "{}", sampling: 30, check: func(t *testing.T, tr *encode.MeshTracing) {
			if tr.Sampling != 30 || tr.DefaultSampling != 30 {
				t.Errorf("got %+v", tr)
			}
		}},
		{name: "PILOT_TRACE_SAMPLING under defaultConfig's", yaml: "defaultConfig: {tracing: {sampling: 5}}", sampling: 30, check: func(t *testing.T, tr *encode.MeshTracing) {
			if tr.Sampling != 5 || tr.DefaultSampling != 30 {
				t.Errorf("got %+v", tr)
			}
		}},
		{name: "PILOT_TRACE_SAMPLING out of range", yaml: "{}", sampling: 101, err: "PILOT_TRACE_SAMPLING"},
		{name: "negative sampling", yaml: "defaultConfig: {tracing: {sampling: -1}}", err: "defaultConfig: invalid tracing setting: tracing.sampling"},
		{name: "otel sampler", yaml: `defaultProviders: {tracing: [o]}
extensionProviders:
- {name: o, opentelemetry: {service: otel.obs.svc.cluster.local, port: 4317, dynatraceSampler: {tenant: t, clusterId: 1}}}`, err: "dynatraceSampler"},
		{name: "otel semantic conventions", yaml: `defaultProviders: {tracing: [o]}
extensionProviders:
- {name: o, opentelemetry: {service: otel.obs.svc.cluster.local, port: 4317, serviceAttributeEnrichment: OTEL_SEMANTIC_CONVENTIONS}}`, err: "serviceAttributeEnrichment"},
		{name: "provider without port", yaml: `defaultProviders: {tracing: [z]}
extensionProviders:
- {name: z, zipkin: {service: zipkin.obs.svc.cluster.local}}`, err: "port must be"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := inject.ParseMesh([]byte(tc.yaml))
			if err != nil {
				t.Fatal(err)
			}
			m, err := MeshSettings{Config: cfg, TraceSampling: tc.sampling}.Mesh()
			if tc.err != "" {
				if !errors.Is(err, ErrBadMeshSetting) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want ErrBadMeshSetting naming %s", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, m.Tracing)
		})
	}
}

package engine

import (
	"errors"
	"testing"

	"github.com/pilotfish-mesh/pilotfish/inject"
)

// TestApplyTelemetryMesh: defaultProviders.metrics turns stats on exactly
// when it names a prometheus provider, as istiod resolves names (its
// built-in providers included, case ignored), and refuses two.
func TestApplyTelemetryMesh(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       bool
		err        bool
	}{
		{"istiod default: no default providers", "", false, false},
		{"the chart's", "defaultProviders: {metrics: [prometheus]}", true, false},
		{"name case ignored", "defaultProviders: {metrics: [Prometheus]}", true, false},
		{"built-in stackdriver: no filter", "defaultProviders: {metrics: [stackdriver]}", false, false},
		{"unknown provider: nothing", "defaultProviders: {metrics: [nosuch]}", false, false},
		{"access log provider: nothing", "defaultProviders: {metrics: [envoy]}", false, false},
		{"a prometheus provider of its own", "extensionProviders: [{name: prom, prometheus: {}}]\ndefaultProviders: {metrics: [prom]}", true, false},
		{"built-in name given another kind", "extensionProviders: [{name: prometheus, envoyFileAccessLog: {path: /dev/stdout}}]\ndefaultProviders: {metrics: [prometheus]}", false, false},
		{"tracing and logs only", "defaultProviders: {tracing: [zipkin], accessLogging: [envoy]}", false, false},
		{"two prometheus providers", "extensionProviders: [{name: prom, prometheus: {}}]\ndefaultProviders: {metrics: [prometheus, prom]}", false, true},
		{"one provider named twice", "defaultProviders: {metrics: [prometheus, prometheus]}", true, false},
		{"one provider, two spellings", "defaultProviders: {metrics: [prometheus, Prometheus]}", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := inject.ParseMesh([]byte(tc.yaml))
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			m, err := MeshSettings{Config: cfg}.Mesh()
			if tc.err {
				if !errors.Is(err, ErrBadMeshSetting) {
					t.Fatalf("err %v, want ErrBadMeshSetting", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if m.Stats != tc.want {
				t.Errorf("Stats %v, want %v", m.Stats, tc.want)
			}
		})
	}
}

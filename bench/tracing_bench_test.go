package bench

import (
	"context"
	"fmt"
	"testing"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/engine"
	"github.com/pilotfish-mesh/pilotfish/inject"
)

// chartMeshYAML is the mesh config of istiod's chart (inject/testdata/chart/default/mesh.yaml):
// stats, and tracing by istiod's default enableTracing.
const chartMeshYAML = `defaultConfig:
  discoveryAddress: istiod.istio-system.svc:15012
defaultProviders:
  metrics:
  - prometheus
enablePrometheusMerge: true
rootNamespace: istio-system
trustDomain: cluster.local
`

// BenchmarkProxyConfigTracing: BenchmarkProxyConfigCold and Warm with the
// mesh pilotfish builds from istiod's chart mesh config, as serve does:
// istio.stats and istiod's default tracing (custom tags, sampling) on
// every HCM. Compare with ProxyConfigStats (stats only) and
// ProxyConfig(Cold|Warm) (the default mesh, neither).
func BenchmarkProxyConfigTracing(b *testing.B) {
	cfg, err := inject.ParseMesh([]byte(chartMeshYAML))
	if err != nil {
		b.Fatal(err)
	}
	mesh, err := engine.MeshSettings{Config: cfg}.Mesh()
	if err != nil {
		b.Fatal(err)
	}
	if mesh.Tracing == nil || !mesh.Stats {
		b.Fatal("the chart's mesh config gives no tracing or no stats")
	}
	for _, wc := range []workloadCase{{"http", 100}, {"http", 1000}} {
		b.Run(fmt.Sprintf("cold/%s/services=%d", wc.name, wc.services), func(b *testing.B) {
			w, eds, rds := setup(b, wc)
			b.ReportAllocs()
			var n, size int
			for b.Loop() {
				cache := encode.NewCache()
				cache.SetVerify(false)
				e := engine.New(w, engine.Options{Cache: cache, Mesh: mesh})
				c, err := e.Connect(context.Background(), node("10.0.0.1", "pod-0"), "")
				if err != nil {
					b.Fatal(err)
				}
				n, size = fullConfig(b, c, eds, rds)
			}
			b.ReportMetric(float64(n), "resources/proxy")
			b.ReportMetric(float64(size), "bytes/proxy")
		})
		b.Run(fmt.Sprintf("warm/%s/services=%d", wc.name, wc.services), func(b *testing.B) {
			w, eds, rds := setup(b, wc)
			cache := encode.NewCache()
			cache.SetVerify(false)
			e := engine.New(w, engine.Options{Cache: cache, Mesh: mesh})
			first, err := e.Connect(context.Background(), node("10.0.0.1", "pod-0"), "")
			if err != nil {
				b.Fatal(err)
			}
			fullConfig(b, first, eds, rds)
			second, err := e.Connect(context.Background(), node("10.0.0.2", "pod-1"), "")
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			var n, size int
			for b.Loop() {
				n, size = fullConfig(b, second, eds, rds)
			}
			b.ReportMetric(float64(n), "resources/proxy")
			b.ReportMetric(float64(size), "bytes/proxy")
		})
	}
}

package bench

import (
	"context"
	"fmt"
	"testing"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/engine"
)

// BenchmarkProxyConfigStats: BenchmarkProxyConfigCold and Warm with the
// mesh of istiod's chart (defaultProviders.metrics: [prometheus]), whose
// proxies carry istio.stats on every HCM and TCP chain. Compare with
// ProxyConfig(Cold|Warm) (the default mesh, no stats).
func BenchmarkProxyConfigStats(b *testing.B) {
	mesh := encode.DefaultMesh()
	mesh.Stats = true
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

package bench

import (
	"context"
	"fmt"
	"testing"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/engine"
	"github.com/pilotfish-mesh/pilotfish/inject"
)

// meshTelemetry is a mesh-wide Telemetry (root namespace): the built-in
// envoy file access log and a tag removed from REQUEST_COUNT.
const meshTelemetry = `apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {name: mesh-default, namespace: istio-system}
spec:
  accessLogging: [{providers: [{name: envoy}]}]
  metrics:
  - overrides:
    - match: {metric: REQUEST_COUNT}
      tagOverrides: {request_protocol: {operation: REMOVE}}
`

// BenchmarkProxyConfigTelemetry: BenchmarkProxyConfigStats's mesh (the
// chart's defaultProviders.metrics) with a mesh-wide Telemetry resource:
// every HCM and tcp_proxy gets an access log and the stats filters an
// override. Compare with ProxyConfigStats.
func BenchmarkProxyConfigTelemetry(b *testing.B) {
	cfg, err := inject.ParseMesh([]byte("defaultProviders: {metrics: [prometheus]}\n"))
	if err != nil {
		b.Fatal(err)
	}
	mesh, err := engine.MeshSettings{Config: cfg}.Mesh()
	if err != nil {
		b.Fatal(err)
	}
	for _, wc := range []workloadCase{{"http", 100}, {"http", 1000}} {
		b.Run(fmt.Sprintf("cold/%s/services=%d", wc.name, wc.services), func(b *testing.B) {
			w, eds, rds := setup(b, wc)
			if err := Load(w, []byte(meshTelemetry)); err != nil {
				b.Fatal(err)
			}
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
			if err := Load(w, []byte(meshTelemetry)); err != nil {
				b.Fatal(err)
			}
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

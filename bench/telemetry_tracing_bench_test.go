package bench

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/engine"
	"github.com/pilotfish-mesh/pilotfish/inject"
)

// meshTracingTelemetry is a mesh-wide Telemetry (root namespace) tracing
// to zipkin at 10% with a custom tag, and zipkin's Service.
const meshTracingTelemetry = `apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {name: mesh-tracing, namespace: istio-system}
spec:
  tracing:
  - providers: [{name: zipkin}]
    randomSamplingPercentage: 10
    customTags: {team: {literal: {value: bench}}}
---
apiVersion: v1
kind: Service
metadata: {name: zipkin, namespace: istio-system}
spec:
  clusterIP: 10.255.0.41
  ports: [{name: http, port: 9411, targetPort: 9411, protocol: TCP}]
`

// BenchmarkProxyConfigTelemetryTracing: BenchmarkProxyConfigTracing's
// chart mesh with a zipkin extension provider and a mesh-wide Telemetry
// naming it: every HCM gets the zipkin tracer instead of the
// provider-less default. Compare with ProxyConfigTracing.
func BenchmarkProxyConfigTelemetryTracing(b *testing.B) {
	cfg, err := inject.ParseMesh([]byte(chartMeshYAML + "extensionProviders:\n- {name: zipkin, zipkin: {service: zipkin.istio-system.svc.cluster.local, port: 9411}}\n"))
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
			if err := Load(w, []byte(meshTracingTelemetry)); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			var n, size int
			var c *engine.Conn
			for b.Loop() {
				cache := encode.NewCache()
				cache.SetVerify(false)
				e := engine.New(w, engine.Options{Cache: cache, Mesh: mesh})
				c, err = e.Connect(context.Background(), node("10.0.0.1", "pod-0"), "")
				if err != nil {
					b.Fatal(err)
				}
				n, size = fullConfig(b, c, eds, rds)
			}
			b.StopTimer()
			rs, err := c.Generate(encode.ListenerType, nil, true, nil)
			if err != nil {
				b.Fatal(err)
			}
			traced := 0
			for _, r := range rs {
				if bytes.Contains(r.Any, []byte("envoy.tracers.zipkin")) {
					traced++
				}
			}
			if traced == 0 {
				b.Fatal("no listener has the Telemetry's zipkin tracer")
			}
			b.ReportMetric(float64(n), "resources/proxy")
			b.ReportMetric(float64(size), "bytes/proxy")
		})
		b.Run(fmt.Sprintf("warm/%s/services=%d", wc.name, wc.services), func(b *testing.B) {
			w, eds, rds := setup(b, wc)
			if err := Load(w, []byte(meshTracingTelemetry)); err != nil {
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

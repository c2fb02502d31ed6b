package bench

import (
	"bytes"
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
			c := benchCold(b, w, mesh, eds, rds)
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
		})
		b.Run(fmt.Sprintf("warm/%s/services=%d", wc.name, wc.services), func(b *testing.B) {
			w, eds, rds := setup(b, wc)
			if err := Load(w, []byte(meshTracingTelemetry)); err != nil {
				b.Fatal(err)
			}
			benchWarm(b, w, mesh, eds, rds)
		})
	}
}

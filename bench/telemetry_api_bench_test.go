package bench

import (
	"fmt"
	"testing"

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
			benchCold(b, w, mesh, eds, rds)
		})
		b.Run(fmt.Sprintf("warm/%s/services=%d", wc.name, wc.services), func(b *testing.B) {
			w, eds, rds := setup(b, wc)
			if err := Load(w, []byte(meshTelemetry)); err != nil {
				b.Fatal(err)
			}
			benchWarm(b, w, mesh, eds, rds)
		})
	}
}

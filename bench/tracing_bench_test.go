package bench

import (
	"fmt"
	"testing"

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
			benchCold(b, w, mesh, eds, rds)
		})
		b.Run(fmt.Sprintf("warm/%s/services=%d", wc.name, wc.services), func(b *testing.B) {
			w, eds, rds := setup(b, wc)
			benchWarm(b, w, mesh, eds, rds)
		})
	}
}

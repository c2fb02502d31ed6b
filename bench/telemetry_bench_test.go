package bench

import (
	"fmt"
	"testing"

	"github.com/pilotfish-mesh/pilotfish/encode"
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
			benchCold(b, w, mesh, eds, rds)
		})
		b.Run(fmt.Sprintf("warm/%s/services=%d", wc.name, wc.services), func(b *testing.B) {
			w, eds, rds := setup(b, wc)
			benchWarm(b, w, mesh, eds, rds)
		})
	}
}

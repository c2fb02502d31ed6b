package rules

import (
	"testing"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/internal/istiobench"
)

// TestGatewayRouterColdAllocs gates the allocations of a router's cold
// build (an empty bytes cache, the scope computed) on istio-bench's
// gateways workload at 100 Gateways: per Gateway, its two virtual hosts,
// their routes translated once, and two route configurations for RDS; its
// HTTPS chain written into the 443 listener for LDS. The budgets are the
// measured counts plus a margin; a change that builds messages again where
// bytes are composed (or stops sharing routes between ports) exceeds them.
// BenchmarkGatewayRouter measures the time at 1,000.
func TestGatewayRouterColdAllocs(t *testing.T) {
	const n = 100
	y, err := istiobench.Render("gateways", istiobench.Params{Services: n})
	if err != nil {
		t.Fatal(err)
	}
	snap := lrLoad(t, map[string][]byte{"gateways.yaml": y})
	class := &encode.ProxyClass{Type: encode.ProxyRouter, Namespace: "istio-system", ClusterID: "Kubernetes"}
	class.Gateways = SelectGateways(snap, benchLabels)
	sc := NewScope(snap, class)
	mesh := encode.DefaultMesh()
	names := gatewayRouteNames(sc, encode.DefaultMesh())
	if len(names) != n+1 {
		t.Fatalf("%d route names, want %d", len(names), n+1)
	}
	for _, c := range []struct {
		name      string
		build     builder
		names     []string
		want      int // resources
		perServer float64
	}{
		{"rds", buildRoutes, names, n + 1, 30},
		{"lds", buildGatewayListeners, nil, 2, 6},
		// Clusters are encoded directly (encode/cluster_direct.go): the
		// buffer, the name, and the cache's entry, version and map node.
		{"cds", buildClusters, nil, n + 3, 7}, // and BlackHole, example.com:80 and :443
	} {
		t.Run(c.name, func(t *testing.T) {
			var dst []Resource
			got := 0
			allocs := testing.AllocsPerRun(10, func() {
				cache := encode.NewCache()
				cache.SetVerify(false) // verify mode regenerates every part
				dst, err = c.build(sc, mesh, cache, c.names, c.names == nil, dst[:0])
				if err != nil {
					t.Fatal(err)
				}
				got = len(dst)
			})
			if got != c.want {
				t.Fatalf("%d resources, want %d", got, c.want)
			}
			if per := allocs / n; per > c.perServer {
				t.Errorf("cold %s: %.1f allocations per Gateway (%.0f in all), budget %.0f", c.name, per, allocs, c.perServer)
			} else {
				t.Logf("cold %s: %.1f allocations per Gateway (%.0f in all)", c.name, per, allocs)
			}
		})
	}
}

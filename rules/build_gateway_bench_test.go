package rules

import (
	"fmt"
	"testing"
	"time"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/index"
	"github.com/pilotfish-mesh/pilotfish/internal/istiobench"
)

// gatewaysBench loads istio-bench's gateways workload with n services (n
// Gateways, n VirtualServices: at 1,000, 1,001 route configurations).
func gatewaysBench(b *testing.B, workload string, n int) *index.Snapshot {
	y, err := istiobench.Render(workload, istiobench.Params{Services: n})
	if err != nil {
		b.Fatal(err)
	}
	return lrLoad(b, map[string][]byte{workload + ".yaml": y})
}

// BenchmarkGatewayRouter generates one router's RDS (every route
// configuration its listeners name), CDS and LDS on istio-bench's gateways
// workloads, against istiod's uncached numbers (ANCHOR.md: gateways@1000
// RDS 71 ms, CDS 22.5 ms, LDS 20.6 ms; gateways-shared@1000 RDS 152 ms).
//
//   - cold: an empty bytes cache, the router's scope (its merged Gateways)
//     already computed, as istiod's benchmark has its push context;
//   - cold+scope: the scope computed inside the loop too;
//   - warm+scope: every part cached, the scope computed again: a push
//     after a config change that touched nothing the router sees;
//   - warm: every part cached, same scope: what a second class with the
//     same Gateways costs (proxies of one class copy the per-class memo).
func BenchmarkGatewayRouter(b *testing.B) {
	for _, w := range []string{"gateways", "gateways-shared"} {
		snap := gatewaysBench(b, w, 1000)
		class := &encode.ProxyClass{Type: encode.ProxyRouter, Namespace: "istio-system", ClusterID: "Kubernetes"}
		class.Gateways = SelectGateways(snap, benchLabels)
		mesh := encode.DefaultMesh()
		// Scopes share their config version's view, as an engine's do: a
		// scope computed again reuses the merged gateway (view.go).
		var vs Views
		newScope := func() *Scope { return NewScopeIn(vs.Of(snap), snap, class) }
		sc := newScope()
		names := gatewayRouteNames(sc, encode.DefaultMesh())
		types := []struct {
			name  string
			build builder
			names []string
		}{
			{"rds", buildRoutes, names},
			{"cds", buildClusters, nil},
			{"lds", buildGatewayListeners, nil},
		}
		for _, typ := range types {
			run := func(b *testing.B, sc *Scope, cache *encode.Cache) int {
				rs, err := typ.build(sc, mesh, cache, typ.names, typ.names == nil, nil)
				if err != nil {
					b.Fatal(err)
				}
				size := 0
				for _, r := range rs {
					size += len(r.Any)
				}
				return size
			}
			b.Run(fmt.Sprintf("%s/%s/cold", w, typ.name), func(b *testing.B) {
				gatewayOf(sc, encode.DefaultMesh()) // computed with the scope, outside the loop
				b.ReportAllocs()
				size := 0
				cpu := processCPU()
				for b.Loop() {
					size = run(b, sc, encode.NewCache())
				}
				reportCPU(b, cpu)
				b.ReportMetric(float64(size), "bytes")
			})
			b.Run(fmt.Sprintf("%s/%s/cold+scope", w, typ.name), func(b *testing.B) {
				b.ReportAllocs()
				cpu := processCPU()
				for b.Loop() {
					run(b, newScope(), encode.NewCache())
				}
				reportCPU(b, cpu)
			})
			b.Run(fmt.Sprintf("%s/%s/warm+scope", w, typ.name), func(b *testing.B) {
				cache := encode.NewCache()
				run(b, sc, cache)
				b.ReportAllocs()
				cpu := processCPU()
				for b.Loop() {
					run(b, newScope(), cache)
				}
				reportCPU(b, cpu)
			})
			b.Run(fmt.Sprintf("%s/%s/warm", w, typ.name), func(b *testing.B) {
				cache := encode.NewCache()
				run(b, sc, cache)
				b.ReportAllocs()
				cpu := processCPU()
				for b.Loop() {
					run(b, sc, cache)
				}
				reportCPU(b, cpu)
			})
		}
	}
}

// reportCPU reports the process CPU time per operation since start: on a
// shared machine wall time includes waiting for a core, CPU time much less.
func reportCPU(b *testing.B, start time.Duration) {
	if b.N > 0 {
		b.ReportMetric(float64(processCPU()-start)/float64(b.N)/1e6, "cpu-ms/op")
	}
}

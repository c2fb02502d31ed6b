package engine

import (
	"fmt"
	"testing"

	"github.com/pilotfish-mesh/pilotfish/encode"
)

// Benchmarks of CDS for one sidecar at 1.1.1.1 on istio-bench's http
// workload, the proxy and workload of istiod's published CDS number
// (ANCHOR.md: 2.33 ms, 10.9k allocs, 105 clusters at Services=100, with
// istiod's cache off).
//
// Cold: every cluster generated and marshaled (a new cache per iteration),
// istiod's setting. Warm: every cluster cached, the steady state of a push
// to a proxy whose class another proxy already got.

func benchClusters(b *testing.B, services int, warm bool) {
	f := newXDSFixture(b)
	f.httpWorkload(services)
	snap := f.apply()
	sc := sidecarScope(snap, "default", "1.1.1.1")
	mesh := encode.DefaultMesh()
	cache := encode.NewCache()
	dst, err := buildClusters(sc, mesh, cache, nil, true, nil)
	if err != nil {
		b.Fatal(err)
	}
	bytes := 0
	for _, r := range dst {
		bytes += len(r.Any)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if !warm {
			cache = encode.NewCache()
		}
		dst, _ = buildClusters(sc, mesh, cache, nil, true, dst[:0])
	}
	b.ReportMetric(float64(len(dst)), "clusters")
	b.ReportMetric(float64(bytes), "bytes/push")
}

func BenchmarkBuildClustersCold(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) { benchClusters(b, n, false) })
	}
}

func BenchmarkBuildClustersWarm(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) { benchClusters(b, n, true) })
	}
}

// TestBuildClustersBenchSmall runs the benchmark body at a small size in
// plain `go test`.
func TestBuildClustersBenchSmall(t *testing.T) {
	for _, warm := range []bool{false, true} {
		r := testing.Benchmark(func(b *testing.B) { benchClusters(b, 10, warm) })
		if r.N == 0 {
			t.Fatal("benchmark did not run")
		}
	}
}

package rules

import (
	"fmt"
	"testing"

	networking "istio.io/api/networking/v1alpha3"

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

func benchClusters(b *testing.B, services int, warm bool, mesh ...*encode.Mesh) {
	step, n, bytes := clustersBench(b, services, warm, mesh...)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		step()
	}
	b.ReportMetric(float64(n), "clusters")
	b.ReportMetric(float64(bytes), "bytes/push")
}

// clustersBench prepares a CDS build and returns one iteration of it, the
// number of clusters and their size.
func clustersBench(tb testing.TB, services int, warm bool, meshes ...*encode.Mesh) (func(), int, int) {
	f := newXDSFixture(tb)
	f.httpWorkload(services)
	snap := f.apply()
	sc := sidecarScope(snap, "default", "1.1.1.1")
	mesh := encode.DefaultMesh()
	if len(meshes) > 0 {
		mesh = meshes[0]
	}
	cache := benchCache()
	dst, err := buildClusters(sc, mesh, cache, nil, true, nil)
	if err != nil {
		tb.Fatal(err)
	}
	bytes := 0
	for _, r := range dst {
		bytes += len(r.Any)
	}
	return func() {
		if !warm {
			cache = benchCache()
		}
		dst, _ = buildClusters(sc, mesh, cache, nil, true, dst[:0])
	}, len(dst), bytes
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

// BenchmarkBuildClustersColdMesh: cold CDS at 1,000 services under mesh
// configs that change every cluster: h2UpgradePolicy and tcpKeepalive
// (clusters still encoded directly), and defaultTrafficPolicy (every
// cluster built as a message, as with a DestinationRule).
func BenchmarkBuildClustersColdMesh(b *testing.B) {
	keepalive := encode.DefaultMesh()
	keepalive.H2Upgrade = true
	keepalive.TCPKeepalive = &encode.TCPKeepalive{Probes: 4, Time: 600, HasTime: true}
	policy := encode.DefaultMesh()
	var err error
	policy.DefaultTrafficPolicy, err = encode.EncodeDefaultTrafficPolicy(
		&networking.ConnectionPoolSettings{Tcp: &networking.ConnectionPoolSettings_TCPSettings{MaxConnections: 100}}, nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, m := range []struct {
		name string
		mesh *encode.Mesh
	}{{"default", encode.DefaultMesh()}, {"h2-keepalive", keepalive}, {"default-traffic-policy", policy}} {
		b.Run(m.name, func(b *testing.B) { benchClusters(b, 1000, false, m.mesh) })
	}
}

// TestBuildClustersBenchSmall runs the benchmark body at a small size in
// plain `go test`.
func TestBuildClustersBenchSmall(t *testing.T) {
	for _, warm := range []bool{false, true} {
		step, n, _ := clustersBench(t, 10, warm)
		step()
		step()
		if n != 16 { // http at 10 services, sidecar at 1.1.1.1
			t.Fatalf("%d clusters", n)
		}
	}
}

// TestBuildClustersColdAllocs gates the cold CDS of a sidecar on http at
// 100 services (auto mTLS on every in-mesh cluster): outbound clusters are
// encoded directly, TLS context included, at about six allocations each
// (50 before the direct encoder).
func TestBuildClustersColdAllocs(t *testing.T) {
	step, n, _ := clustersBench(t, 100, false)
	allocs := testing.AllocsPerRun(10, step)
	const budget = 8.0
	if per := allocs / float64(n); per > budget {
		t.Errorf("cold CDS: %.1f allocations per cluster (%.0f for %d), budget %.0f", per, allocs, n, budget)
	} else {
		t.Logf("cold CDS: %.1f allocations per cluster (%.0f for %d)", per, allocs, n)
	}
}

// benchCache is a cache without verify mode (PILOTFISH_VERIFY_CACHE would
// regenerate on every hit and measure that instead).
func benchCache() *encode.Cache {
	c := encode.NewCache()
	c.SetVerify(false)
	return c
}

package rules

import (
	"testing"

	"github.com/pilotfish-mesh/pilotfish/encode"
)

// BenchmarkSidecarIngress: a warm LDS+CDS build of a proxy whose inbound
// side comes from a Sidecar's ingress listeners (ratings in ingressMesh)
// against one whose inbound side comes from its service port and an
// inboundConnectionPool (db). Every resource is a cache hit.
func BenchmarkSidecarIngress(b *testing.B) {
	sw := newScopedWriter(b, ingressMesh)
	e := newTestEngine(sw.w, testOptions{})
	snap := sw.w.Snapshot()
	mesh := encode.DefaultMesh()
	for _, tc := range []struct{ name, ns, ip string }{{"ingress", "a", "10.244.1.5"}, {"pool", "b", "10.244.2.5"}} {
		b.Run(tc.name, func(b *testing.B) {
			sc := ingressScope(b, e, snap, tc.ns, tc.ip)
			cache := encode.NewCache()
			var dst []Resource
			build := func() {
				var err error
				if dst, err = buildListeners(sc, mesh, cache, nil, true, dst[:0]); err != nil {
					b.Fatal(err)
				}
				if dst, err = buildClusters(sc, mesh, cache, nil, true, dst[:0]); err != nil {
					b.Fatal(err)
				}
			}
			build()
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				build()
			}
		})
	}
}

// TestSidecarIngressWarmAllocs gates the allocations of a warm inbound
// build under a Sidecar (BenchmarkSidecarIngress measures them: 15 with
// ingress listeners, 9 with only an inboundConnectionPool).
func TestSidecarIngressWarmAllocs(t *testing.T) {
	sw := newScopedWriter(t, ingressMesh)
	e := newTestEngine(sw.w, testOptions{})
	snap := sw.w.Snapshot()
	mesh := encode.DefaultMesh()
	for _, tc := range []struct {
		name, ns, ip string
		budget       float64
	}{{"ingress", "a", "10.244.1.5", 20}, {"pool", "b", "10.244.2.5", 12}} {
		t.Run(tc.name, func(t *testing.T) {
			sc := ingressScope(t, e, snap, tc.ns, tc.ip)
			cache := encode.NewCache()
			cache.SetVerify(false) // verify mode regenerates on every hit
			var dst []Resource
			build := func() {
				var err error
				if dst, err = buildListeners(sc, mesh, cache, nil, true, dst[:0]); err != nil {
					t.Fatal(err)
				}
				if dst, err = buildClusters(sc, mesh, cache, nil, true, dst[:0]); err != nil {
					t.Fatal(err)
				}
			}
			build()
			if got := testing.AllocsPerRun(20, build); got > tc.budget {
				t.Errorf("warm LDS+CDS: %.0f allocations, budget %.0f", got, tc.budget)
			}
		})
	}
}

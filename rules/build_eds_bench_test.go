package rules

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/index"
)

// Benchmarks of EDS, in the shapes of istiod's EDS table in ANCHOR.md
// (endpoints × services; full uncached, one service changed, full cache
// hit), plus the http workload at 100 and 1,000 services.

// edsWorkload puts services Kubernetes services in namespace default with
// per endpoints each (pods of a Deployment, sidecar-injected, spread over
// three zones).
func edsWorkload(f *xdsFixture, services, per int) []string {
	var names []string
	labels := f.labels("app", "svc", "version", "v1", "security.istio.io/tlsMode", "istio")
	for s := 0; s < services; s++ {
		name := fmt.Sprintf("svc-%d", s)
		key := index.ServiceKey{Host: f.sym(name + ".default.svc.cluster.local"), Namespace: f.sym("default")}
		f.b.PutService(index.Service{Key: key, Name: f.sym(name), Origin: index.OriginKubernetes,
			Addresses: []netip.Prefix{netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 96, byte(s >> 8), byte(s)}), 32)},
			Ports:     []index.Port{f.port("http", 80, index.ProtocolHTTP)}, HasSelector: true, Selector: f.labels("app", name)})
		f.b.PutEndpoints(key, edsGroup(f, s, per, 0, labels))
		names = append(names, encode.ClusterName(80, "", name+".default.svc.cluster.local"))
	}
	return names
}

func edsGroup(f *xdsFixture, s, per, gen int, labels index.LabelSetID) index.EndpointGroup {
	zones := []index.Sym{f.sym("us-west1/us-west1-a"), f.sym("us-west1/us-west1-b"), f.sym("us-west1/us-west1-c")}
	sa := f.sym("default")
	g := index.EndpointGroup{Source: f.sym(fmt.Sprintf("svc-%d-abcde", s)), Ports: []index.EndpointPort{{Name: f.sym("http"), Port: 8080}}}
	for e := 0; e < per; e++ {
		g.Endpoints = append(g.Endpoints, index.Endpoint{
			Addr:     netip.AddrFrom4([4]byte{10, byte(s >> 8), byte(s), byte(e + gen)}),
			Workload: f.sym(fmt.Sprintf("svc-%d-v1-5d4f8b7c9-%05d", s, e)), Labels: labels,
			ServiceAccount: sa, Locality: zones[e%3], TLSMode: index.TLSModeIstio,
		})
	}
	return g
}

type edsShape struct{ endpoints, services int }

var edsShapes = []edsShape{{1, 100}, {100, 10}, {1000, 1}, {100, 100}}

func benchEndpoints(b *testing.B, shape edsShape, warm bool) {
	step := endpointsBench(b, shape, warm)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		step()
	}
	b.ReportMetric(float64(shape.endpoints*shape.services), "endpoints")
}

// endpointsBench prepares an EDS build of every cluster of shape and
// returns one iteration of it.
func endpointsBench(tb testing.TB, shape edsShape, warm bool) func() {
	f := newXDSFixture(tb)
	names := edsWorkload(f, shape.services, shape.endpoints)
	snap := f.apply()
	sc := sidecarScope(snap, "default", "10.0.0.1")
	mesh := encode.DefaultMesh()
	cache := benchCache()
	dst, err := buildEndpoints(sc, mesh, cache, names, false, nil)
	if err != nil {
		tb.Fatal(err)
	}
	decodeResources(tb, dst, newCLA)
	return func() {
		if !warm {
			cache = benchCache()
		}
		dst, _ = buildEndpoints(sc, mesh, cache, names, false, dst[:0])
	}
}

func BenchmarkBuildEndpointsCold(b *testing.B) {
	for _, s := range edsShapes {
		b.Run(fmt.Sprintf("%dx%d", s.endpoints, s.services), func(b *testing.B) { benchEndpoints(b, s, false) })
	}
}

func BenchmarkBuildEndpointsWarm(b *testing.B) {
	for _, s := range edsShapes {
		b.Run(fmt.Sprintf("%dx%d", s.endpoints, s.services), func(b *testing.B) { benchEndpoints(b, s, true) })
	}
}

// BenchmarkBuildEndpointsIncremental: the endpoint fast path. One service's
// endpoints change (a new snapshot, its shard replaced) and that service's
// assignment is rebuilt: one generation, a cache miss in a long-lived
// cache that holds the other services' assignments. 256 snapshots with
// distinct shards are built up front; every 256 calls, the changed
// service's entries are swept under a stopped timer, so every timed call
// misses. Only buildEndpoints is timed: stopping the timer around every
// call (a stop-the-world each) weighed more than the 1x100 shape itself.
func BenchmarkBuildEndpointsIncremental(b *testing.B) {
	for _, s := range edsShapes {
		b.Run(fmt.Sprintf("%dx%d", s.endpoints, s.services), func(b *testing.B) {
			f := newXDSFixture(b)
			names := edsWorkload(f, s.services, s.endpoints)
			snap := f.apply()
			mesh := encode.DefaultMesh()
			sc := sidecarScope(snap, "default", "10.0.0.1")
			cache := benchCache()
			labels := f.labels("app", "svc", "version", "v1", "security.istio.io/tlsMode", "istio")
			key := index.ServiceKey{Host: f.sym("svc-0.default.svc.cluster.local"), Namespace: f.sym("default")}
			snaps := make([]*index.Snapshot, 256)
			for gen := range snaps {
				f.b.PutEndpoints(key, edsGroup(f, 0, s.endpoints, gen, labels))
				snaps[gen] = f.apply()
			}
			// Warm: every other service's assignment is cached and stays so.
			sc.Snapshot = snaps[0]
			if _, err := buildEndpoints(sc, mesh, cache, names, false, nil); err != nil {
				b.Fatal(err)
			}
			changed, others := names[:1], names[1:]
			var dst []Resource
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if i%len(snaps) == 0 {
					b.StopTimer()
					epoch := cache.NextEpoch()
					dst, _ = buildEndpoints(sc, mesh, cache, others, false, dst[:0]) // keep the others
					cache.Sweep(epoch)
					b.StartTimer()
				}
				sc.Snapshot = snaps[i%len(snaps)]
				dst, _ = buildEndpoints(sc, mesh, cache, changed, false, dst[:0])
			}
		})
	}
}

// BenchmarkBuildEndpointsHTTP: EDS of every cluster of the http workload
// (one endpoint per service), cold and warm.
func BenchmarkBuildEndpointsHTTP(b *testing.B) {
	for _, n := range []int{100, 1000} {
		for _, warm := range []bool{false, true} {
			mode := "cold"
			if warm {
				mode = "warm"
			}
			b.Run(fmt.Sprintf("services=%d/%s", n, mode), func(b *testing.B) {
				f := newXDSFixture(b)
				f.httpWorkload(n)
				snap := f.apply()
				sc := sidecarScope(snap, "default", "10.0.0.1")
				mesh := encode.DefaultMesh()
				names := clusterNamesForEDS(sc, mesh, nil)
				cache := benchCache()
				dst, _ := buildEndpoints(sc, mesh, cache, names, false, nil)
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					if !warm {
						cache = benchCache()
					}
					dst, _ = buildEndpoints(sc, mesh, cache, names, false, dst[:0])
				}
				b.ReportMetric(float64(len(dst)), "clas")
			})
		}
	}
}

// TestBuildEndpointsBenchSmall runs the benchmark bodies at a small size in
// plain `go test`.
func TestBuildEndpointsBenchSmall(t *testing.T) {
	for _, warm := range []bool{false, true} {
		step := endpointsBench(t, edsShape{3, 4}, warm)
		step()
		step()
	}
}

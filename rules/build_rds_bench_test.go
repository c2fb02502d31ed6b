package rules

import (
	"fmt"
	"testing"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/index"
)

var benchSizes = []int{100, 1000}

// BenchmarkBuildRoutesCold generates every virtual host and the route
// configuration from an empty cache: istiod's uncached RDS (ANCHOR.md:
// http@100 864 µs, virtualservice@100 2.48 ms).
func BenchmarkBuildRoutesCold(b *testing.B) {
	for _, w := range []struct {
		name string
		snap func(testing.TB, int) *index.Snapshot
	}{{"http", httpBench}, {"virtualservice", vsBench}} {
		for _, n := range benchSizes {
			b.Run(fmt.Sprintf("%s/services=%d", w.name, n), func(b *testing.B) {
				snap := w.snap(b, n)
				sc := NewScope(snap, sidecarClass("default"))
				mesh := encode.DefaultMesh()
				names := []string{"80"}
				b.ReportAllocs()
				var size int
				for b.Loop() {
					rs, err := buildRoutes(sc, mesh, encode.NewCache(), names, false, nil)
					if err != nil {
						b.Fatal(err)
					}
					size = len(rs[0].Any)
				}
				b.ReportMetric(float64(size), "bytes/route")
			})
		}
	}
}

// BenchmarkBuildRoutesWarm rebuilds with every part cached: the cost of a
// push that changed nothing RDS depends on.
func BenchmarkBuildRoutesWarm(b *testing.B) {
	for _, w := range []struct {
		name string
		snap func(testing.TB, int) *index.Snapshot
	}{{"http", httpBench}, {"virtualservice", vsBench}} {
		for _, n := range benchSizes {
			b.Run(fmt.Sprintf("%s/services=%d", w.name, n), func(b *testing.B) {
				snap := w.snap(b, n)
				sc := NewScope(snap, sidecarClass("default"))
				mesh := encode.DefaultMesh()
				cache := encode.NewCache()
				names := []string{"80"}
				dst := make([]Resource, 0, 4)
				if _, err := buildRoutes(sc, mesh, cache, names, false, dst); err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				for b.Loop() {
					if _, err := buildRoutes(sc, mesh, cache, names, false, dst[:0]); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkBuildRoutesOneChanged: one service changed since the last
// build, so one virtual host is generated and the configuration
// reassembled from cached bytes.
func BenchmarkBuildRoutesOneChanged(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("http/services=%d", n), func(b *testing.B) {
			f := newMeshFixture(b)
			keys := make([]index.ServiceKey, n)
			for i := range n {
				keys[i] = f.serviceEntry(fmt.Sprint("service-", i), "default", []string{fmt.Sprintf("random-%d.host.example", i)},
					[]string{fmt.Sprintf("240.240.%d.%d", i/255, i%255)}, index.ResolutionClientSideLB, httpPort(80))[0]
			}
			f.apply()
			mesh := encode.DefaultMesh()
			cache := encode.NewCache()
			names := []string{"80"}
			if _, err := buildRoutes(NewScope(f.w.Snapshot(), sidecarClass("default")), mesh, cache, names, false, nil); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				b.StopTimer()
				// Change one service's address.
				f.serviceEntry(fmt.Sprint("service-", 0), "default", []string{"random-0.host.example"},
					[]string{fmt.Sprintf("240.250.%d.%d", (i/255)%255, i%255)}, index.ResolutionClientSideLB, httpPort(80))
				sc := NewScope(f.apply(), sidecarClass("default"))
				i++
				b.StartTimer()
				if _, err := buildRoutes(sc, mesh, cache, names, false, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkBuildListeners: all of a sidecar's listeners, cold and warm
// (ANCHOR.md: istiod http@100 LDS 192 µs, tcp@100 948 µs, uncached).
func BenchmarkBuildListeners(b *testing.B) {
	for _, w := range []struct {
		name string
		snap func(testing.TB, int) *index.Snapshot
	}{{"http", httpBench}, {"tcp", tcpBench(index.ProtocolTCP)}} {
		for _, n := range benchSizes {
			snap := w.snap(b, n)
			mesh := encode.DefaultMesh()
			b.Run(fmt.Sprintf("cold/%s/services=%d", w.name, n), func(b *testing.B) {
				sc := scopeFor(snap, sidecarClass("default"), "1.1.1.1")
				b.ReportAllocs()
				for b.Loop() {
					if _, err := buildListeners(sc, mesh, encode.NewCache(), nil, true, nil); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run(fmt.Sprintf("warm/%s/services=%d", w.name, n), func(b *testing.B) {
				sc := scopeFor(snap, sidecarClass("default"), "1.1.1.1")
				cache := encode.NewCache()
				dst, err := buildListeners(sc, mesh, cache, nil, true, nil)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				for b.Loop() {
					if _, err := buildListeners(sc, mesh, cache, nil, true, dst[:0]); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

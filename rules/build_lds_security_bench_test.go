package rules

import (
	"fmt"
	"testing"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/index"
	"github.com/pilotfish-mesh/pilotfish/internal/istiobench"
)

// Benchmarks of a sidecar's listeners under security policy: the proxy at
// 1.1.1.1 on istio-bench's authorizationpolicy (Services=N DENY policies)
// and strict (PeerAuthentication STRICT) workloads, istiod's LDS benchmark
// setting (ANCHOR.md, cache off: authorizationpolicy 1.73 ms · 11k allocs,
// strict 234 µs). "inbound" builds virtualInbound alone, "all" every
// listener. Cold: a new cache per iteration; warm: every listener cached
// (the security policy is still selected and the key hashed).

func securityBenchSnap(tb testing.TB, workload string, services int) *index.Snapshot {
	tb.Helper()
	y, err := istiobench.Render(workload, istiobench.Params{Services: services})
	if err != nil {
		tb.Fatal(err)
	}
	return lrLoad(tb, map[string][]byte{workload + ".yaml": y})
}

func BenchmarkBuildListenersSecurity(b *testing.B) {
	for _, w := range []string{"authorizationpolicy", "strict"} {
		snap := securityBenchSnap(b, w, 100)
		mesh := encode.DefaultMesh()
		sc := scopeFor(snap, sidecarClass("default"), "1.1.1.1")
		for _, scope := range []struct {
			name  string
			names []string
		}{{"inbound", []string{encode.VirtualInboundListenerName}}, {"all", nil}} {
			wildcard := scope.names == nil
			b.Run(fmt.Sprintf("cold/%s/%s", w, scope.name), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := buildListeners(sc, mesh, benchCache(), scope.names, wildcard, nil); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run(fmt.Sprintf("warm/%s/%s", w, scope.name), func(b *testing.B) {
				cache := benchCache()
				dst, err := buildListeners(sc, mesh, cache, scope.names, wildcard, nil)
				if err != nil {
					b.Fatal(err)
				}
				bytes := 0
				for _, r := range dst {
					bytes += len(r.Any)
				}
				b.ReportAllocs()
				for b.Loop() {
					if dst, err = buildListeners(sc, mesh, cache, scope.names, wildcard, dst[:0]); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(bytes), "bytes/push")
			})
		}
	}
}

// TestBuildListenersSecurityBenchSmall runs the benchmark's builds at a
// small size in plain go test: the inbound listener of the 1.1.1.1 proxy
// carries one RBAC policy per DENY AuthorizationPolicy on each chain.
func TestBuildListenersSecurityBenchSmall(t *testing.T) {
	snap := securityBenchSnap(t, "authorizationpolicy", 3)
	sc := scopeFor(snap, sidecarClass("default"), "1.1.1.1")
	rs, err := buildListeners(sc, encode.DefaultMesh(), verifyCache(), []string{encode.VirtualInboundListenerName}, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	ls := decodeListeners(t, rs)
	if len(ls) != 1 || ls[0].Name != encode.VirtualInboundListenerName {
		t.Fatalf("listeners %v", ls)
	}
	n := 0
	for _, fc := range ls[0].FilterChains {
		for _, f := range fc.Filters {
			if f.Name == "envoy.filters.network.rbac" {
				n++
			}
		}
	}
	if n == 0 {
		t.Fatal("no network RBAC filter on the inbound TCP chains")
	}
}

// TestBuildListenersSecurityWarmAllocs: a warm virtualInbound build (a
// new class whose listener is cached) selects the workload's policies and
// hashes the key in a few allocations, which grow only with the logarithm
// of the number of policies (slice growth): 15 for 3 DENY policies, 30 for
// 100.
func TestBuildListenersSecurityWarmAllocs(t *testing.T) {
	for _, n := range []int{3, 100} {
		snap := securityBenchSnap(t, "authorizationpolicy", n)
		sc := scopeFor(snap, sidecarClass("default"), "1.1.1.1")
		mesh := encode.DefaultMesh()
		cache := benchCache()
		names := []string{encode.VirtualInboundListenerName}
		dst, err := buildListeners(sc, mesh, cache, names, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		allocs := testing.AllocsPerRun(50, func() {
			dst, _ = buildListeners(sc, mesh, cache, names, false, dst[:0])
		})
		t.Logf("%d policies: %.0f allocations", n, allocs)
		if allocs > 40 {
			t.Errorf("%d policies: %.0f allocations per warm build, budget 40", n, allocs)
		}
	}
}

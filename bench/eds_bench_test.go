package bench

import (
	"context"
	"fmt"
	"net/netip"
	"testing"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/engine"
	"github.com/pilotfish-mesh/pilotfish/index"
	"github.com/pilotfish-mesh/pilotfish/internal/meshgen"
)

// edsCase is istiod's BenchmarkEndpointGeneration grid: endpoints per
// service × services.
type edsCase struct{ endpoints, services int }

var edsCases = []edsCase{{1, 100}, {100, 10}, {1000, 1}, {100, 100}}

// edsSetup loads a Kubernetes mesh (with Pods, so endpoints carry labels and
// service accounts) and returns a warm connection and the cluster names of
// service 0's EDS clusters.
func edsSetup(tb testing.TB, c edsCase) (*index.Writer, *engine.Conn, []string, []string) {
	w := index.NewWriter()
	y := meshgen.Kubernetes(meshgen.Params{Services: c.services, EndpointsPerService: c.endpoints, Pods: true})
	if err := Load(w, y); err != nil {
		tb.Fatal(err)
	}
	cache := encode.NewCache()
	cache.SetVerify(false)
	e := engine.New(w, engine.Options{Cache: cache})
	conn, err := e.Connect(context.Background(), node("10.0.0.1", "pod-0"), "")
	if err != nil {
		tb.Fatal(err)
	}
	all, _ := subscriptions(tb, conn)
	var svc0 []string
	for _, n := range all {
		if n == "outbound|80||svc-0.ns-0.svc.cluster.local" || n == "outbound|9090||svc-0.ns-0.svc.cluster.local" {
			svc0 = append(svc0, n)
		}
	}
	if len(svc0) != 2 {
		tb.Fatalf("service 0 clusters: %v", svc0)
	}
	if _, err := conn.Generate(engine.TypeEndpoint, all, false, nil); err != nil {
		tb.Fatal(err)
	}
	return w, conn, all, svc0
}

// BenchmarkEndpointFastPath: one service's endpoints change (one pod is
// replaced in its first EndpointSlice); the index applies the slice and
// the proxy's EDS for that service is regenerated. Compare with istiod's
// "one service changed (incremental)" column in ANCHOR.md.
func BenchmarkEndpointFastPath(b *testing.B) {
	for _, c := range edsCases {
		b.Run(fmt.Sprintf("endpoints=%d/services=%d", c.endpoints, c.services), func(b *testing.B) {
			w, conn, _, svc0 := edsSetup(b, c)
			sy := w.Symbols()
			key := index.ServiceKey{Host: sy.Intern("svc-0.ns-0.svc.cluster.local"), Namespace: sy.Intern("ns-0")}
			g := w.Snapshot().Endpoints(key).Groups[0]
			var buf []engine.Resource
			i := 0
			b.ReportAllocs()
			for b.Loop() {
				i++
				next := g
				next.Endpoints = append([]index.Endpoint(nil), g.Endpoints...)
				next.Endpoints[0].Addr = netip.AddrFrom4([4]byte{10, 250, byte(i >> 8), byte(i)})
				var batch index.Batch
				batch.PutEndpoints(key, next)
				w.Apply(&batch)
				var err error
				if buf, err = conn.Generate(engine.TypeEndpoint, svc0, false, buf[:0]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkEndpointsFullCold: every ClusterLoadAssignment of the mesh for
// one proxy with an empty cache (istiod's "full, uncached").
func BenchmarkEndpointsFullCold(b *testing.B) {
	for _, c := range edsCases {
		b.Run(fmt.Sprintf("endpoints=%d/services=%d", c.endpoints, c.services), func(b *testing.B) {
			w, _, all, _ := edsSetup(b, c)
			b.ReportAllocs()
			for b.Loop() {
				cache := encode.NewCache()
				cache.SetVerify(false)
				e := engine.New(w, engine.Options{Cache: cache})
				conn, err := e.Connect(context.Background(), node("10.0.0.1", "pod-0"), "")
				if err != nil {
					b.Fatal(err)
				}
				if _, err := conn.Generate(engine.TypeEndpoint, all, false, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func TestEndpointBenchSetupSmall(t *testing.T) {
	_, conn, all, svc0 := edsSetup(t, edsCase{endpoints: 3, services: 4})
	res, err := conn.Generate(engine.TypeEndpoint, svc0, false, nil)
	if err != nil || len(res) != 2 {
		t.Fatalf("service 0 EDS: %d resources, %v", len(res), err)
	}
	if len(all) != 8 {
		t.Fatalf("%d EDS clusters, want 8", len(all))
	}
}

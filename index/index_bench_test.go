package index

import (
	"fmt"
	"net/netip"
	"runtime"
	"testing"
)

// meshBatch builds a batch shaped like a Kubernetes mesh: services with one
// HTTP port, each with endpointsPer endpoints in one EndpointSlice whose pods
// share a label set (one Deployment per service).
func meshBatch(w *Writer, services, endpointsPer int) *Batch {
	sy, ls := w.Symbols(), w.Labels()
	var b Batch
	ns := sy.Intern("default")
	http, app := sy.Intern("http"), sy.Intern("app")
	for i := 0; i < services; i++ {
		name := fmt.Sprintf("svc-%d", i)
		key := ServiceKey{Host: sy.Intern(name + ".default.svc.cluster.local"), Namespace: ns}
		labels := ls.Intern([]Label{{Key: app, Value: sy.Intern(name)}})
		b.PutService(Service{
			Key: key, Name: sy.Intern(name), Origin: OriginKubernetes,
			Addresses: []netip.Prefix{netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)}), 32)},
			Ports:     []Port{{Name: http, Number: 80, TargetPort: 8080, Protocol: ProtocolHTTP}},
			Selector:  labels, HasSelector: true,
		})
		if endpointsPer == 0 {
			continue
		}
		g := EndpointGroup{Source: sy.Intern(name + "-abcde"), Ports: []EndpointPort{{Name: http, Port: 8080}}}
		g.Endpoints = make([]Endpoint, endpointsPer)
		for j := range g.Endpoints {
			n := i*endpointsPer + j
			g.Endpoints[j] = Endpoint{Addr: netip.AddrFrom4([4]byte{10, byte(n >> 16), byte(n >> 8), byte(n)}), Labels: labels, TLSMode: TLSModeIstio}
		}
		b.PutEndpoints(key, g)
	}
	return &b
}

func BenchmarkApply(b *testing.B) {
	for _, tc := range []struct{ services, endpoints int }{{100, 1}, {1000, 1}, {10000, 0}, {10000, 10}} {
		b.Run(fmt.Sprintf("services=%d/endpoints=%d", tc.services, tc.services*tc.endpoints), func(b *testing.B) {
			// One batch applied to a fresh writer (sharing the symbol
			// tables) per iteration: the timed loop is Apply alone.
			proto := NewWriter()
			batch := meshBatch(proto, tc.services, tc.endpoints)
			b.ReportAllocs()
			for b.Loop() {
				w := &Writer{syms: proto.syms, labels: proto.labels}
				w.cur.Store(&Snapshot{Symbols: w.syms, Labels: w.labels})
				w.Apply(batch)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(tc.services), "ns/service")
		})
	}
}

// BenchmarkEndpointUpdate is the index's half of the endpoint fast path: one
// EndpointSlice of one service changes in a mesh of 10,000 services.
func BenchmarkEndpointUpdate(b *testing.B) {
	w := NewWriter()
	w.Apply(meshBatch(w, 10000, 10))
	sy := w.Symbols()
	key := ServiceKey{Host: sy.Intern("svc-42.default.svc.cluster.local"), Namespace: sy.Intern("default")}
	g := w.Snapshot().Endpoints(key).Groups[0]
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		next := g
		next.Endpoints = append([]Endpoint(nil), g.Endpoints...)
		next.Endpoints[0].Weight = uint16(i%100 + 1)
		var batch Batch
		batch.PutEndpoints(key, next)
		w.Apply(&batch)
	}
}

// TestHeapPerRow measures the live heap of a published index per service and
// per endpoint (symbols and label sets included) and holds it to the budget:
// under 100 bytes per endpoint.
func TestHeapPerRow(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates ~100 MB")
	}
	measure := func(services, per int) (uint64, *Writer) {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		w := NewWriter()
		batch := meshBatch(w, services, per)
		w.Apply(batch)
		batch = nil
		runtime.GC()
		runtime.ReadMemStats(&after)
		return after.HeapAlloc - before.HeapAlloc, w
	}
	svcOnly, w1 := measure(10000, 0)
	withEP, w2 := measure(10000, 10)
	perService := float64(svcOnly) / 10000
	perEndpoint := float64(withEP-svcOnly) / 100000
	t.Logf("heap: %.0f B per service (10,000 services), %.1f B per endpoint (100,000 endpoints)", perService, perEndpoint)
	if perEndpoint >= 100 {
		t.Errorf("%.1f bytes per endpoint, budget < 100", perEndpoint)
	}
	runtime.KeepAlive(w1)
	runtime.KeepAlive(w2)
}

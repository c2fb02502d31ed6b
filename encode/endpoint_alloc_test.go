package encode_test

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/index"
)

// TestClusterLoadAssignmentAllocs: the direct EDS encoder sizes the
// assignment first and writes it into one buffer, so generating an
// assignment allocates one buffer whatever its endpoint count — the
// endpoint fast path's cost must not grow in allocations with a service's
// size.
func TestClusterLoadAssignmentAllocs(t *testing.T) {
	for _, n := range []int{1, 100, 1000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			f := newFixture(t)
			svc := f.kubeService("reviews", "bookinfo", f.port("http", 9080, index.ProtocolHTTP))
			zones := []string{"us-west1/us-west1-a", "us-west1/us-west1-b", "us-east1/us-east1-c"}
			eps := make([]index.Endpoint, n)
			for i := range eps {
				eps[i] = index.Endpoint{
					Addr:     netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}),
					Workload: f.sym(fmt.Sprintf("reviews-v1-5d4f8b7c9-%05d", i)),
					Labels:   f.labels("app", "reviews", "version", "v1", "pod-template-hash", "5d4f8b7c9"),
					Locality: f.sym(zones[i%len(zones)]), TLSMode: index.TLSModeIstio,
				}
			}
			f.endpoints(svc, "reviews-abc", []index.EndpointPort{f.epPort("http", 8080)}, eps...)
			f.apply()
			k := f.endpointsKey(svc)
			if got := len(flatten(genCLA(t, f.names(), k))); got != n {
				t.Fatalf("%d endpoints encoded, want %d", got, n)
			}
			prefix := []byte{0x0a, 0x01, 'x', 0x12}
			allocs := testing.AllocsPerRun(50, func() { encode.AppendClusterLoadAssignment(prefix, f.names(), k) })
			if allocs > 1 {
				t.Errorf("AppendClusterLoadAssignment of %d endpoints: %.1f allocations, want 1", n, allocs)
			}
		})
	}
}

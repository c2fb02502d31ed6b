package rules

import (
	"testing"

	"github.com/pilotfish-mesh/pilotfish/encode"
)

// BenchmarkNameTable builds a sidecar's DNS name table on istio-bench's tcp
// workload at 1,000 services (ANCHOR.md: istiod 1.28 ms). cold: empty
// bytes cache; warm: the table cached (a push that changed nothing it
// depends on).
func BenchmarkNameTable(b *testing.B) {
	snap := gatewaysBench(b, "tcp", 1000)
	sc := NewScope(snap, sidecarClass("default"))
	mesh := encode.DefaultMesh()
	b.Run("cold", func(b *testing.B) {
		b.ReportAllocs()
		size := 0
		cpu := processCPU()
		defer reportCPU(b, cpu)
		for b.Loop() {
			rs, err := buildNameTable(sc, mesh, encode.NewCache(), nil, true, nil)
			if err != nil || len(rs) != 1 {
				b.Fatal(err)
			}
			size = len(rs[0].Any)
		}
		b.ReportMetric(float64(size), "bytes")
	})
	b.Run("warm", func(b *testing.B) {
		cache := encode.NewCache()
		if _, err := buildNameTable(sc, mesh, cache, nil, true, nil); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		cpu := processCPU()
		defer reportCPU(b, cpu)
		for b.Loop() {
			if _, err := buildNameTable(sc, mesh, cache, nil, true, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestNameTableTCPWorkload pairs BenchmarkNameTable in go test: the tcp
// workload's every service with an address is in the table.
func TestNameTableTCPWorkload(t *testing.T) {
	snap := lrWorkload(t, "tcp")
	sc := NewScope(snap, sidecarClass("default"))
	rs, err := buildNameTable(sc, encode.DefaultMesh(), verifyCache(), nil, true, nil)
	if err != nil || len(rs) != 1 {
		t.Fatal(err)
	}
	table := nameTableHosts(t, rs[0])
	withVIP := 0
	for _, id := range sc.Services {
		svc := snap.ServiceByID(id)
		for _, a := range svc.Addresses {
			if a.IsSingleIP() {
				withVIP++
				break
			}
		}
		if encode.IsHeadless(svc) {
			t.Fatalf("unexpected headless service %s", snap.String(svc.Key.Host))
		}
	}
	if len(table) != withVIP || withVIP == 0 {
		t.Errorf("table has %d hosts, the scope %d services with an address", len(table), withVIP)
	}
}

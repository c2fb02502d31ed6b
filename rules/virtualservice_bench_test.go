package rules

import (
	"fmt"
	"testing"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/index"
)

// BenchmarkRouteView: the per-scope VirtualService, alias and
// DestinationRule view RDS and LDS share, computed once per (class,
// snapshot).
func BenchmarkRouteView(b *testing.B) {
	for _, w := range []struct {
		name string
		snap func(testing.TB, int) *index.Snapshot
	}{{"http", httpBench}, {"virtualservice", vsBench}} {
		for _, n := range benchSizes {
			b.Run(fmt.Sprintf("%s/services=%d", w.name, n), func(b *testing.B) {
				snap := w.snap(b, n)
				sc := NewScope(snap, sidecarClass("default"))
				mesh := encode.DefaultMesh()
				b.ReportAllocs()
				for b.Loop() {
					_ = newRouteView(sc, mesh)
				}
			})
		}
	}
}

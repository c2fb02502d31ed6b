package ingest

import (
	"testing"

	"github.com/pilotfish-mesh/pilotfish/index"
)

// TestConvertSubsetLabels: a DestinationRule row carries its subsets'
// labels interned, in spec order (0 for a subset without labels), so that
// the engine never interns.
func TestConvertSubsetLabels(t *testing.T) {
	w := index.NewWriter()
	c := NewConverter(w, "cluster.local")
	apply(t, w, c, `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: reviews, namespace: shop}
spec:
  host: reviews
  subsets: [{name: v1, labels: {version: v1, track: stable}}, {name: all}, {name: v2, labels: {version: v2}}]
`)
	snap := w.Snapshot()
	sy := w.Symbols()
	dr, ok := snap.Config(index.ConfigDestinationRule, index.ConfigKey{Namespace: sy.Intern("shop"), Name: sy.Intern("reviews")})
	if !ok || len(dr.SubsetLabels) != 3 {
		t.Fatalf("row %+v", dr)
	}
	names := snap.Names()
	want := []map[string]string{{"version": "v1", "track": "stable"}, nil, {"version": "v2"}}
	for i, ls := range dr.SubsetLabels {
		got := map[string]string{}
		for _, l := range names.Labels(ls) {
			got[names.String(l.Key)] = names.String(l.Value)
		}
		if len(got) != len(want[i]) {
			t.Errorf("subset %d: labels %v, want %v", i, got, want[i])
		}
		for k, v := range want[i] {
			if got[k] != v {
				t.Errorf("subset %d: labels %v, want %v", i, got, want[i])
			}
		}
	}
}

package engine

import (
	"slices"
	"testing"

	"github.com/pilotfish-mesh/pilotfish/index"
	"github.com/pilotfish-mesh/pilotfish/ingest"
)

// lrLoad decodes and converts manifests into a snapshot through ingest.
func lrLoad(t testing.TB, files map[string][]byte) *index.Snapshot {
	t.Helper()
	w := index.NewWriter()
	conv := ingest.NewConverter(w, "cluster.local")
	var b index.Batch
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		objs, errs := ingest.Decode(n, files[n])
		if len(errs) > 0 {
			t.Fatalf("%s: %v", n, errs)
		}
		for i := range objs {
			conv.Put(&b, &objs[i])
		}
	}
	w.Apply(&b)
	return w.Snapshot()
}

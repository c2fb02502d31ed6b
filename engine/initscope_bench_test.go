package engine

import (
	"fmt"
	"testing"

	"github.com/pilotfish-mesh/pilotfish/index"
	"github.com/pilotfish-mesh/pilotfish/ingest"
	"github.com/pilotfish-mesh/pilotfish/internal/istiobench"
)

// BenchmarkInitScope is the like-for-like counterpart of istiod's
// BenchmarkInitPushContext: from config already converted (istiod's
// ServiceEntry controller converts on config events, outside its timed
// figure), build and publish the index (tables, secondary indexes, endpoint
// shards, row hashes, change set) with warm symbols, then compute one
// sidecar's scope and instances (istiod's SetSidecarScope and
// SetServiceTargets for its proxy at 1.1.1.1 in default).
// ingest's BenchmarkBuildIndex adds conversion and cold interning on top.
func BenchmarkInitScope(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("http/services=%d", n), func(b *testing.B) {
			y, err := istiobench.Render("http", istiobench.Params{Services: n})
			if err != nil {
				b.Fatal(err)
			}
			objs, errs := ingest.Decode("http.yaml", y)
			if len(errs) > 0 {
				b.Fatal(errs[0])
			}
			first := index.NewWriter()
			conv := ingest.NewConverter(first, "cluster.local")
			var batch index.Batch
			for i := range objs {
				conv.Put(&batch, &objs[i])
			}
			build := func() *Scope {
				w := index.NewWriterSharing(first)
				w.Apply(&batch)
				return sidecarScope(w.Snapshot(), "default", "1.1.1.1")
			}
			if sc := build(); len(sc.Services) != n+1 || len(sc.Instances) != 1 {
				b.Fatalf("scope sees %d services and %d instances, want %d and 1", len(sc.Services), len(sc.Instances), n+1)
			}
			b.ReportAllocs()
			for b.Loop() {
				build()
			}
		})
	}
}

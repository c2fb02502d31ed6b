package rules

import (
	"fmt"
	"testing"
	"time"

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
			first, batch := httpBatch(b, n)
			build := func() *Scope {
				w := index.NewWriterSharing(first)
				w.Apply(batch)
				return sidecarScope(w.Snapshot(), "default", "1.1.1.1")
			}
			if sc := build(); len(sc.Services) != n+1 || len(sc.Instances) != 1 {
				b.Fatalf("scope sees %d services and %d instances, want %d and 1", len(sc.Services), len(sc.Instances), n+1)
			}
			b.ReportAllocs()
			start := processCPU()
			for b.Loop() {
				build()
			}
			reportCPUMicros(b, start)
		})
	}
}

// BenchmarkSidecarScope is the scope part of BenchmarkInitScope alone: one
// sidecar's scope and instances (sidecarScope) on the published snapshot of
// the same workload, without the index build.
func BenchmarkSidecarScope(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("http/services=%d", n), func(b *testing.B) {
			snap := httpSnapshot(b, n)
			if sc := sidecarScope(snap, "default", "1.1.1.1"); len(sc.Services) != n+1 || len(sc.Instances) != 1 {
				b.Fatalf("scope sees %d services and %d instances, want %d and 1", len(sc.Services), len(sc.Instances), n+1)
			}
			b.ReportAllocs()
			start := processCPU()
			for b.Loop() {
				sidecarScope(snap, "default", "1.1.1.1")
			}
			reportCPUMicros(b, start)
		})
	}
}

// httpBatch converts istio-bench's http workload at n services into a batch
// for writers sharing first's symbols (interned once, as a warm index is).
func httpBatch(tb testing.TB, n int) (*index.Writer, *index.Batch) {
	tb.Helper()
	y, err := istiobench.Render("http", istiobench.Params{Services: n})
	if err != nil {
		tb.Fatal(err)
	}
	objs, errs := ingest.Decode("http.yaml", y)
	if len(errs) > 0 {
		tb.Fatal(errs[0])
	}
	first := index.NewWriter()
	conv := ingest.NewConverter(first, "cluster.local")
	batch := &index.Batch{}
	for i := range objs {
		conv.Put(batch, &objs[i])
	}
	return first, batch
}

// httpSnapshot publishes the http workload at n services.
func httpSnapshot(tb testing.TB, n int) *index.Snapshot {
	first, batch := httpBatch(tb, n)
	w := index.NewWriterSharing(first)
	w.Apply(batch)
	return w.Snapshot()
}

// reportCPUMicros is reportCPU (build_gateway_bench_test.go) in µs, the
// unit of a scope.
func reportCPUMicros(b *testing.B, start time.Duration) {
	if b.N > 0 {
		b.ReportMetric(float64(processCPU()-start)/float64(b.N)/1e3, "cpu-µs/op")
	}
}

package ingest

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/pilotfish-mesh/pilotfish/index"
	"github.com/pilotfish-mesh/pilotfish/internal/istiobench"
	"github.com/pilotfish-mesh/pilotfish/internal/meshgen"
)

type workload struct {
	name      string
	yaml      []byte
	services  int
	endpoints int
}

func benchWorkloads(tb testing.TB, sizes ...int) []workload {
	var out []workload
	for _, n := range sizes {
		y, err := istiobench.Render("http", istiobench.Params{Services: n})
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, workload{name: fmt.Sprintf("http/services=%d", n), yaml: y, services: n + 1, endpoints: n + 1})
	}
	return out
}

func kubeWorkload(services, per int) workload {
	return workload{
		name:     fmt.Sprintf("kubernetes/services=%d/endpoints=%d", services, services*per),
		yaml:     meshgen.Kubernetes(meshgen.Params{Services: services, EndpointsPerService: per, Namespaces: 10}),
		services: services, endpoints: services * per,
	}
}

// decodeValid decodes and validates a workload, failing on any error.
func decodeValid(tb testing.TB, y []byte) []Object {
	objs, errs := Decode("bench.yaml", y)
	if len(errs) > 0 {
		tb.Fatalf("decode: %v", errs[0])
	}
	for i := range objs {
		if verrs := Validate(&objs[i]); len(verrs) > 0 {
			tb.Fatalf("validate: %v", verrs[0])
		}
	}
	return objs
}

// buildIndex converts objs and applies them to w as one batch.
func buildIndex(w *index.Writer, objs []Object) *Converter {
	c := NewConverter(w, "cluster.local")
	var batch index.Batch
	for i := range objs {
		c.Put(&batch, &objs[i])
	}
	w.Apply(&batch)
	return c
}

// BenchmarkIngest measures the whole path from YAML bytes to a published
// snapshot: decode, validate, convert, apply.
func BenchmarkIngest(b *testing.B) {
	for _, wl := range append(benchWorkloads(b, 100, 1000, 10000), kubeWorkload(10000, 10)) {
		b.Run(wl.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(wl.yaml)))
			for b.Loop() {
				objs := decodeValid(b, wl.yaml)
				buildIndex(index.NewWriter(), objs)
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/float64(wl.services), "µs/service")
		})
	}
}

// BenchmarkBuildIndex measures building the index from decoded objects:
// convert and apply. It is the counterpart of istiod's InitPushContext,
// which also starts from objects already decoded into its config store.
func BenchmarkBuildIndex(b *testing.B) {
	for _, wl := range append(benchWorkloads(b, 100, 1000, 10000), kubeWorkload(10000, 10)) {
		b.Run(wl.name, func(b *testing.B) {
			// Decoded here, not before the loop over workloads: the live
			// heap of the other workloads' objects would make every
			// iteration's GC pay for them.
			objs := decodeValid(b, wl.yaml)
			b.ReportAllocs()
			for b.Loop() {
				buildIndex(index.NewWriter(), objs)
			}
		})
	}
}

// BenchmarkBuildIndexWarmSymbols is BenchmarkBuildIndex with the workload's
// strings already interned (a writer sharing the symbol table of an earlier
// build): the cost of rebuilding every table, which is what istiod's
// InitPushContext does on each full push (its strings exist already, in its
// config store). pilotfish never rebuilds in steady state; this is the
// like-for-like figure.
func BenchmarkBuildIndexWarmSymbols(b *testing.B) {
	for _, wl := range append(benchWorkloads(b, 100, 1000), kubeWorkload(10000, 10)) {
		b.Run(wl.name, func(b *testing.B) {
			objs := decodeValid(b, wl.yaml)
			first := index.NewWriter()
			buildIndex(first, objs)
			b.ReportAllocs()
			for b.Loop() {
				buildIndex(index.NewWriterSharing(first), objs)
			}
		})
	}
}

// BenchmarkPublish measures the index build alone: applying the batch of
// an already converted workload to an empty writer whose symbols are warm,
// and publishing the snapshot (tables, secondary indexes, endpoint shards,
// row hashes, change set). It is the like-for-like counterpart of istiod's
// InitPushContext, which starts from services its ServiceEntry controller
// converted on config events, outside the timed figure; BenchmarkBuildIndex
// adds the conversion and cold interning on top.
func BenchmarkPublish(b *testing.B) {
	for _, wl := range append(benchWorkloads(b, 100, 1000), kubeWorkload(10000, 10)) {
		b.Run(wl.name, func(b *testing.B) {
			objs := decodeValid(b, wl.yaml)
			first := index.NewWriter()
			c := NewConverter(first, "cluster.local")
			var batch index.Batch
			for i := range objs {
				c.Put(&batch, &objs[i])
			}
			if cs := index.NewWriterSharing(first).Apply(&batch); len(cs.Services) != wl.services {
				b.Fatalf("published %d services, want %d", len(cs.Services), wl.services)
			}
			b.ReportAllocs()
			for b.Loop() {
				index.NewWriterSharing(first).Apply(&batch)
			}
		})
	}
}

// TestIngestHeap reports the live heap of the index built by ingest, per
// service and per endpoint, for the 10,000-service Kubernetes mesh with
// 100,000 endpoints, and holds it to < 100 bytes per endpoint.
func TestIngestHeap(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a 100,000-endpoint mesh")
	}
	measure := func(wl workload) uint64 {
		objs := decodeValid(t, wl.yaml)
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		w := index.NewWriter()
		c := buildIndex(w, objs)
		runtime.GC()
		runtime.ReadMemStats(&after)
		// The decoded objects were live in both readings: the difference is
		// the index and the converter's bookkeeping.
		runtime.KeepAlive(objs)
		runtime.KeepAlive(w)
		runtime.KeepAlive(c)
		return after.HeapAlloc - before.HeapAlloc
	}
	services := measure(kubeWorkload(10000, 0))
	full := measure(kubeWorkload(10000, 10))
	perService := float64(services) / 10000
	perEndpoint := float64(full-services) / 100000
	t.Logf("index heap after ingest: %.0f B per service (incl. converter bookkeeping), %.1f B per endpoint", perService, perEndpoint)
	if perEndpoint >= 100 {
		t.Errorf("%.1f B per endpoint, budget < 100", perEndpoint)
	}
}

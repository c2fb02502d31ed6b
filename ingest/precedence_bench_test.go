package ingest

import (
	"fmt"
	"testing"

	"github.com/pilotfish-mesh/pilotfish/index"
)

// precBatch is a Precedence whose directory defines dirObjects
// VirtualServices (and as many EndpointSlices with slices), and a
// KubeSource batch of endpoint events (EndpointSlices the directory does
// not define).
func precBatch(dirObjects, events int, slices bool) (*Precedence, map[ObjectKey]any) {
	p := NewPrecedence()
	p.file = NewFileSource(index.NewWriter(), FileSourceOptions{Dir: "unused"})
	for i := range dirObjects {
		p.claimLocked(ObjectKey{Kind: KindVirtualService, Namespace: "shop", Name: fmt.Sprintf("vs-%d", i)})
		if slices {
			p.claimLocked(ObjectKey{Kind: KindEndpointSlice, Namespace: "shop", Name: fmt.Sprintf("file-%d", i)})
		}
	}
	pending := make(map[ObjectKey]any, events)
	for i := range events {
		pending[ObjectKey{Kind: KindEndpointSlice, Namespace: "shop", Name: fmt.Sprintf("reviews-%d", i)}] = struct{}{}
	}
	return p, pending
}

// TestPrecedenceKubeBatchLock: a batch of endpoint events takes only the
// Precedence's own lock, allocating nothing; a batch with an object the
// directory defines takes the file source's lock instead.
func TestPrecedenceKubeBatchLock(t *testing.T) {
	p, pending := precBatch(1000, 100, true)
	allocs := testing.AllocsPerRun(100, func() {
		shared := p.lockForKube(pending, false)
		if shared {
			t.Fatal("a batch of endpoint events waits for the file source")
		}
		p.unlockKube(shared)
	})
	if allocs != 0 {
		t.Errorf("lockForKube allocates %.0f times per batch, want 0", allocs)
	}
	pending[ObjectKey{Kind: KindVirtualService, Namespace: "shop", Name: "vs-7"}] = struct{}{}
	shared := p.lockForKube(pending, false)
	if !shared || p.file.syncMu.TryLock() {
		t.Error("a batch with an object the directory defines does not hold the file source's lock")
	}
	p.unlockKube(shared)
	if !p.file.syncMu.TryLock() || !p.mu.TryLock() {
		t.Error("unlock left a lock held")
	}
}

// BenchmarkPrecedenceKubeBatch is what a KubeSource batch of 100 endpoint
// events pays for the Precedence when the directory defines 1,000
// VirtualServices, and when it defines 1,000 EndpointSlices too.
func BenchmarkPrecedenceKubeBatch(b *testing.B) {
	const events = 100
	for _, slices := range []bool{false, true} {
		b.Run(fmt.Sprintf("dirSlices=%v", slices), func(b *testing.B) {
			p, pending := precBatch(1000, events, slices)
			b.ReportAllocs()
			for b.Loop() {
				p.unlockKube(p.lockForKube(pending, false))
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/events, "ns/event")
		})
	}
}

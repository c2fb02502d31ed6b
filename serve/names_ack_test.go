package serve

import (
	"fmt"
	"slices"
	"testing"

	"github.com/pilotfish-mesh/pilotfish/engine"
)

func ackNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		// Envoy's order, not sorted.
		names[i] = fmt.Sprintf("outbound|80||svc-%d.ns-%d.svc.cluster.local", (i*7919)%n, i%10)
	}
	return names
}

// TestSetNamesRepeatedACK: an ACK repeating the subscription, in the same
// or another order, changes nothing; a changed list is seen.
func TestSetNamesRepeatedACK(t *testing.T) {
	tt := &sotwType{typeURL: engine.TypeEndpoint}
	if !tt.setNames(ackNames(100)) {
		t.Fatal("first subscription not seen")
	}
	if tt.setNames(ackNames(100)) {
		t.Error("the same list again counted as a change")
	}
	rev := ackNames(100)
	slices.Reverse(rev)
	if tt.setNames(rev) {
		t.Error("the same names in another order counted as a change")
	}
	if !tt.setNames(ackNames(101)) || len(tt.names) != 101 {
		t.Errorf("an added name was not seen (%d names)", len(tt.names))
	}
	if !tt.setNames(nil) || len(tt.names) != 0 || tt.wildcard {
		t.Errorf("unsubscribing all: names %d, wildcard %v", len(tt.names), tt.wildcard)
	}
}

// BenchmarkSetNamesRepeatedACK: what a SotW ACK repeating a 1,000-cluster
// EDS subscription costs the stream (Envoy sends the whole list each time).
func BenchmarkSetNamesRepeatedACK(b *testing.B) {
	tt := &sotwType{typeURL: engine.TypeEndpoint}
	tt.setNames(ackNames(1000))
	reqs := make([][]string, 64)
	for i := range reqs {
		reqs[i] = ackNames(1000)
	}
	b.ReportAllocs()
	req := make([]string, 1000)
	i := 0
	for b.Loop() {
		copy(req, reqs[i%len(reqs)]) // setNames may sort the request in place
		tt.setNames(req)
		i++
	}
}

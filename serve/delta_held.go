package serve

import (
	"maps"
	"math/bits"

	"github.com/cespare/xxhash/v2"
)

// heldSet is what a Delta proxy holds of one type: name → versionHash, 0
// meaning "told absent". A set is immutable once built and shared: every
// stream whose proxy received the same responses points at one canonical
// set (canonicalHeld), so 10,000 sidecars holding a thousand clusters each
// keep one map between them, not 10,000, and a push to them is one
// transition computed once (see deltaTransitions).
type heldSet struct {
	m      map[string]uint64
	digest uint64 // heldDigest of m
}

// emptyHeld is the set of a type the proxy has received nothing of.
var emptyHeld = &heldSet{m: map[string]uint64{}, digest: heldDigestOf(nil)}

// heldEntryHash mixes one entry into an order-independent sum.
func heldEntryHash(name string, v uint64) uint64 {
	return bits.RotateLeft64(xxhash.Sum64String(name), 23) ^ (v * 0x9e3779b97f4a7c15)
}

// finishHeld turns a sum of entry hashes and the count into a digest.
func finishHeld(sum uint64, n int) uint64 { return (sum ^ uint64(n)) * 0xbf58476d1ce4e5b9 }

func heldDigestOf(m map[string]uint64) uint64 {
	var sum uint64
	for n, v := range m {
		sum += heldEntryHash(n, v)
	}
	return finishHeld(sum, len(m))
}

// canonicalHeld returns the shared set equal to m, registering m (which the
// caller must not modify afterwards) when there is none. The table is weak
// (weak_table.go): a set no stream holds is collected and its entry
// deleted.
func canonicalHeld(m map[string]uint64) *heldSet {
	if len(m) == 0 {
		return emptyHeld
	}
	d := heldDigestOf(m)
	h, _, loaded := heldSets.get(d, func() (*heldSet, int) {
		return &heldSet{m: m, digest: d}, 0
	})
	if loaded && !maps.Equal(h.m, m) {
		return &heldSet{m: m, digest: d} // a digest collision: not shared
	}
	return h
}

var heldSets = newWeakTable[uint64, heldSet](maxHeldSets)

const maxHeldSets = 16384

// without returns h less names (a proxy unsubscribed from them).
func (h *heldSet) without(names []string) *heldSet {
	drop := false
	for _, n := range names {
		if _, ok := h.m[n]; ok {
			drop = true
			break
		}
	}
	if !drop {
		return h
	}
	m := maps.Clone(h.m)
	for _, n := range names {
		delete(m, n)
	}
	return canonicalHeld(m)
}

// filter returns h with only the entries keep accepts.
func (h *heldSet) filter(keep func(string) bool) *heldSet {
	var m map[string]uint64
	for n := range h.m {
		if keep(n) {
			continue
		}
		if m == nil {
			m = maps.Clone(h.m)
		}
		delete(m, n)
	}
	if m == nil {
		return h
	}
	return canonicalHeld(m)
}

package serve

import (
	"runtime"
	"weak"

	"github.com/puzpuzpuz/xsync/v4"
)

// weakTable shares values among streams without keeping them alive: it maps
// a key to a weak reference, so a value lives exactly as long as something
// else holds it. Streams hold what they last used per type (the body they
// sent, the transition they took, the list they subscribe to), and gRPC
// holds a body while writing it; so during a push to 10,000 sidecars of a
// class the value each of them needs stays shared, and once every stream
// has moved on to a newer version the superseded one is collected and its
// entry deleted (runtime.AddCleanup). The table itself holds no bytes of
// what it shares, and what a stream alone made (an invented subscription,
// say) goes when that stream does.
//
// Entries are bounded by max: a table that reaches it is dropped (values
// stay with their holders; only later lookups of them miss and compute
// again), which costs CPU, never memory.
//
// A value is referenced through a pointer to E and a length: an element of
// a slice's backing array (a body's first byte, a name list's first name)
// keeps the whole array alive for whoever holds any slice of it, including
// gRPC's write queue; a struct is referenced by its pointer with n 0.
type weakTable[K comparable, E any] struct {
	m   *xsync.Map[K, weakRef[E]]
	max int
}

type weakRef[E any] struct {
	p weak.Pointer[E]
	n int
}

// weakEntry is what a value's cleanup needs to delete its own entry (and
// not a newer value stored under the same key since).
type weakEntry[K comparable, E any] struct {
	k K
	p weak.Pointer[E]
}

func newWeakTable[K comparable, E any](max int) *weakTable[K, E] {
	return &weakTable[K, E]{m: xsync.NewMap[K, weakRef[E]](), max: max}
}

// load returns the live value under k, or nil.
func (t *weakTable[K, E]) load(k K) (*E, int) {
	if r, ok := t.m.Load(k); ok {
		if p := r.p.Value(); p != nil {
			return p, r.n
		}
	}
	return nil, 0
}

// get returns the live value under k, or computes it with compute and
// stores it; compute runs once per key even when many streams ask at once
// (it runs with a bucket of the table locked: it must not use the table).
// loaded reports a value found rather than computed: the caller verifies
// it (keys are digests) and computes an unshared value on a mismatch.
// compute must return a non-nil pointer to a heap object that is not tiny
// (pointer-free and under 16 bytes), or the value is not shared.
func (t *weakTable[K, E]) get(k K, compute func() (*E, int)) (p *E, n int, loaded bool) {
	if p, n := t.load(k); p != nil {
		return p, n, true
	}
	if t.m.Size() >= t.max {
		t.m.Clear()
	}
	stored := false
	t.m.Compute(k, func(old weakRef[E], found bool) (weakRef[E], xsync.ComputeOp) {
		if found {
			if p, n = old.p.Value(), old.n; p != nil {
				loaded, stored = true, false
				return old, xsync.CancelOp
			}
		}
		p, n = compute()
		loaded, stored = false, true
		return weakRef[E]{p: weak.Make(p), n: n}, xsync.UpdateOp
	})
	if stored {
		runtime.AddCleanup(p, t.remove, weakEntry[K, E]{k: k, p: weak.Make(p)})
	}
	return p, n, loaded
}

// remove deletes k's entry if it still refers to the value just collected.
func (t *weakTable[K, E]) remove(e weakEntry[K, E]) {
	t.m.Compute(e.k, func(old weakRef[E], found bool) (weakRef[E], xsync.ComputeOp) {
		if found && old.p == e.p {
			return old, xsync.DeleteOp
		}
		return old, xsync.CancelOp
	})
}

// size is the number of entries, dead ones not yet cleaned up included.
func (t *weakTable[K, E]) size() int { return t.m.Size() }

// live counts the values still alive and sums size(p, n) over them
// (tests).
func (t *weakTable[K, E]) live(size func(p *E, n int) int) (entries, bytes int) {
	t.m.Range(func(_ K, r weakRef[E]) bool {
		if p := r.p.Value(); p != nil {
			entries++
			bytes += size(p, r.n)
		}
		return true
	})
	return entries, bytes
}

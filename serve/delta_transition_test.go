package serve

import (
	"fmt"
	"slices"
	"testing"

	"github.com/pilotfish-mesh/pilotfish/engine"
)

func testResources(n int, version string) []engine.Resource {
	res := make([]engine.Resource, n)
	for i := range res {
		name := fmt.Sprintf("outbound|80||svc-%d.example.com", i)
		res[i] = engine.Resource{Name: name, Version: version, Any: []byte(name + version)}
	}
	return res
}

// TestDeltaTransitionsShared: streams in the same state making the same
// change share one computed transition, and the state it leaves them in is
// one canonical set.
func TestDeltaTransitionsShared(t *testing.T) {
	d := newDeltaTransitions()
	res := testResources(100, "v1")
	computed := 0
	key := respondKey{typeURL: engine.TypeCluster, held: emptyHeld, subs: hashNames(nil), res: setDigest(res), nres: len(res), wildcard: true, always: true}
	var first *respondResult
	for range 50 {
		r := d.get(key, nil, nil, func() *respondResult {
			computed++
			return computeRespond(engine.TypeCluster, emptyHeld, nil, nil, res, true)
		})
		if first == nil {
			first = r
		}
		if r != first {
			t.Fatal("a stream in the same state got its own transition")
		}
	}
	if computed != 1 {
		t.Fatalf("computed %d times, want 1", computed)
	}
	if first.changed != 100 || first.removed != 0 || len(first.held.m) != 100 {
		t.Fatalf("first response: %d changed, %d removed, holds %d", first.changed, first.removed, len(first.held.m))
	}

	// Equal holdings reached separately are one canonical set.
	again := computeRespond(engine.TypeCluster, emptyHeld, nil, nil, slices.Clone(res), true)
	if again.held != first.held {
		t.Fatal("equal holdings are not canonicalized to one set")
	}

	// One resource changes and one disappears: the next transition sends
	// exactly those.
	next := slices.Clone(res[:99])
	next[5].Version, next[5].Any = "v2", []byte("changed")
	r := computeRespond(engine.TypeCluster, first.held, nil, nil, next, false)
	if r.changed != 1 || !slices.Equal(r.removedNames, []string{res[99].Name}) {
		t.Fatalf("got %d changed, removed %v", r.changed, r.removedNames)
	}
	if r.held.m[next[5].Name] != versionHash("v2") || len(r.held.m) != 99 {
		t.Fatal("the held set after the transition is wrong")
	}
	// Nothing differs: nothing to send, the state is unchanged.
	if r2 := computeRespond(engine.TypeCluster, r.held, nil, nil, next, false); r2.body != nil || r2.held != r.held {
		t.Fatal("a push without difference sent something or changed state")
	}
}

// TestDeltaTransitionVerified: a cached transition is never handed to a
// stream whose subscriptions or partial list differ, even under the same
// key (a digest collision).
func TestDeltaTransitionVerified(t *testing.T) {
	d := newDeltaTransitions()
	res := testResources(3, "v1")
	key := respondKey{typeURL: engine.TypeEndpoint, held: emptyHeld, res: setDigest(res), nres: 3}
	subsA := []string{res[0].Name, res[1].Name, res[2].Name}
	subsB := []string{"other", res[0].Name, res[1].Name} // sorted, as streams keep them
	a := d.get(key, subsA, nil, func() *respondResult {
		return computeRespond(engine.TypeEndpoint, emptyHeld, subsA, nil, res, false)
	})
	computed := false
	b := d.get(key, subsB, nil, func() *respondResult {
		computed = true
		return computeRespond(engine.TypeEndpoint, emptyHeld, subsB, nil, res[:2], false)
	})
	if !computed || a == b {
		t.Fatal("a transition computed for other subscriptions was reused")
	}
	if !slices.Equal(b.removedNames, []string{"other"}) {
		t.Fatalf("a subscribed name that does not exist is not reported removed: %v", b.removedNames)
	}
	if b.held.m["other"] != 0 {
		t.Fatal("a name reported absent is not remembered")
	}
	if _, ok := b.held.m["other"]; !ok {
		t.Fatal("a name reported absent is not remembered")
	}
}

// TestSubscribeTransitions: the same subscription change from the same
// list is computed once, and its result is the shared sorted list.
func TestSubscribeTransitions(t *testing.T) {
	d := newDeltaTransitions()
	from := sharedNames([]string{"a", "b", "c", "d", "e", "f", "g", "h", "i"})
	sub, unsub := []string{"z", "a"}, []string{"c"}
	k := subscribeKey{typeURL: engine.TypeEndpoint, subs: hashNames(from), nsubs: len(from),
		sub: hashNames(sub), nsub: len(sub), unsub: hashNames(unsub), nunsub: len(unsub)}
	computed := 0
	var first *subscribeResult
	for range 10 {
		r := d.subscription(k, from, slices.Clone(sub), slices.Clone(unsub), func() *subscribeResult {
			computed++
			return computeSubscribe(from, false, sub, unsub)
		})
		if first == nil {
			first = r
		}
	}
	if computed != 1 {
		t.Fatalf("computed %d times, want 1", computed)
	}
	want := []string{"a", "b", "d", "e", "f", "g", "h", "i", "z"}
	if !slices.Equal(first.subs, want) || !slices.Equal(first.added, []string{"z"}) || !slices.Equal(first.dropped, []string{"c"}) {
		t.Fatalf("subs %v added %v dropped %v", first.subs, first.added, first.dropped)
	}
	// A different request under the same key is computed, not reused.
	other := d.subscription(k, from, []string{"y", "a"}, unsub, func() *subscribeResult {
		return computeSubscribe(from, false, []string{"y", "a"}, unsub)
	})
	if !slices.Equal(other.added, []string{"y"}) {
		t.Fatalf("a colliding request reused another's result: added %v", other.added)
	}
}

// TestHeldSetWithout: forgetting names makes a new canonical set and
// leaves the shared one untouched.
func TestHeldSetWithout(t *testing.T) {
	h := canonicalHeld(map[string]uint64{"a": 3, "b": 5})
	w := h.without([]string{"a", "x"})
	if len(h.m) != 2 || len(w.m) != 1 || w.m["b"] != 5 {
		t.Fatal("without changed the shared set or dropped the wrong names")
	}
	if h.without([]string{"x"}) != h {
		t.Fatal("dropping nothing made a new set")
	}
	if w2 := canonicalHeld(map[string]uint64{"b": 5}); w2 != w {
		t.Fatal("equal sets are not one canonical set")
	}
}

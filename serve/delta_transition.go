package serve

import (
	"slices"
	"unsafe"

	"github.com/pilotfish-mesh/pilotfish/engine"
)

// A Delta response is a pure function of what the proxy holds, what it
// subscribes to and what the engine generated for it. Every sidecar of a
// class is in the same state and gets the same resources, so the response —
// which resources changed, which were removed, the encoded body and the
// state it leaves the proxy in — is computed once per transition and
// shared: the first stream computes it, the other 9,999 look it up and only
// append their nonce. Without this each stream diffed a thousand names
// against its own map and sorted its subscription on every push, the
// dominant cost of a config change at 10,000 proxies.

// respondKey identifies a transition. Sets are identified by their canonical
// pointers (held) or digests (subscriptions, generated resources, only);
// digests are verified against the copies kept in the result.
type respondKey struct {
	typeURL  string
	held     *heldSet
	subs     uint64 // hashNames of the explicit subscriptions
	nsubs    int
	res      uint64 // setDigest of the generated resources
	nres     int
	only     uint64 // hashNames of only (0 without only)
	nonly    int
	partial  bool // only != nil
	wildcard bool
	always   bool
}

// respondResult is a computed transition.
type respondResult struct {
	subs         []string // the subscriptions it was computed with (verification)
	only         []string // and the only list (verification)
	held         *heldSet // what the proxy holds after it
	body         []byte   // appendDeltaBody's part of the response; nil: send nothing
	removedNames []string // removed_resources (in each stream's tail)
	version      uint64   // system_version_info of body
	changed      int      // resources in body
	removed      int      // removed_resources in body
}

// deltaTransitions caches transitions per XDSServer. Both tables are weak
// (weak_table.go): a stream holds the last transition it took and the last
// subscription change it made per type (deltaType.tr, deltaType.sub), so a
// transition stays shared while the streams of a class take it, and
// superseded ones are collected once every stream has moved on.
type deltaTransitions struct {
	m    *weakTable[respondKey, respondResult]
	subs *weakTable[subscribeKey, subscribeResult]
}

const maxTransitions = 16384

func newDeltaTransitions() *deltaTransitions {
	return &deltaTransitions{
		m:    newWeakTable[respondKey, respondResult](maxTransitions),
		subs: newWeakTable[subscribeKey, subscribeResult](maxTransitions),
	}
}

// get returns the transition for k, computing it with compute on a miss
// (one computation per key even when many streams ask at once).
func (d *deltaTransitions) get(k respondKey, subs, only []string, compute func() *respondResult) *respondResult {
	r, _, loaded := d.m.get(k, func() (*respondResult, int) { return compute(), 0 })
	if loaded && (!sameNames(r.subs, subs) || !slices.Equal(r.only, only)) {
		return compute() // a digest collision: never shared
	}
	return r
}

// sameNames compares two name lists, in O(1) when both are the same shared
// list.
func sameNames(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	if len(a) == 0 || unsafe.SliceData(a) == unsafe.SliceData(b) {
		return true
	}
	return slices.Equal(a, b)
}

// computeRespond diffs res (the generated resources for subs, or for only
// when only is set) against held: resources whose version differs are sent,
// held resources that are gone are removed, and subscribed names that do
// not exist are reported removed once.
func computeRespond(typeURL string, held *heldSet, subs, only []string, res []engine.Resource, always bool) *respondResult {
	out := &respondResult{subs: subs, only: slices.Clone(only), held: held}
	names := only
	if only == nil {
		names = subs
	}
	seen := make(map[string]struct{}, len(res))
	var changed []engine.Resource
	for i := range res {
		r := &res[i]
		seen[r.Name] = struct{}{}
		if held.m[r.Name] != versionHash(r.Version) {
			changed = append(changed, *r)
		}
	}
	var removed []string
	if only == nil {
		for n, h := range held.m {
			if _, ok := seen[n]; !ok && h != 0 {
				removed = append(removed, n)
			}
		}
	}
	for _, n := range names {
		if _, ok := seen[n]; ok {
			continue
		}
		if h, ok := held.m[n]; !ok || (only != nil && h != 0) {
			removed = append(removed, n)
		}
	}
	slices.Sort(removed)
	removed = slices.Compact(removed)
	if len(changed) == 0 && len(removed) == 0 && !always {
		return out
	}

	out.version = setDigest(changed)
	for _, n := range removed {
		out.version += resourceHash(n, "")
	}
	h := wireHeader{version: out.version, typeURL: typeURL}
	out.body = appendDeltaBody(make([]byte, 0, sizeDeltaBody(&h, changed)), &h, changed)
	out.removedNames = removed
	out.changed, out.removed = len(changed), len(removed)

	if len(changed) > 0 || len(removed) > 0 {
		m := make(map[string]uint64, len(held.m)+len(changed))
		for n, v := range held.m {
			m[n] = v
		}
		for i := range changed {
			m[changed[i].Name] = versionHash(changed[i].Version)
		}
		for _, n := range removed {
			if _, sub := slices.BinarySearch(subs, n); sub {
				m[n] = 0 // remember it was reported absent
			} else {
				delete(m, n)
			}
		}
		out.held = canonicalHeld(m)
	}
	return out
}

// subscribeKey identifies a subscription change: the list before, the
// wildcard, and the request's lists (verified against the result's copies).
type subscribeKey struct {
	typeURL  string
	subs     uint64
	nsubs    int
	wildcard bool
	sub      uint64
	nsub     int
	unsub    uint64
	nunsub   int
}

// subscribeResult is a computed subscription change.
type subscribeResult struct {
	from, sub, unsub []string // what it was computed from (verification)
	subs             []string // the new subscriptions; nil: unchanged
	subsHash         uint64
	subsBytes        int // namesBytes(subs)
	wildcard         bool
	wildcardAdded    bool
	wildcardDropped  bool
	added            []string // names newly subscribed, in request order
	dropped          []string // names to forget from what the proxy holds
}

// subscription returns the subscription change for k, computing it on a
// miss.
func (d *deltaTransitions) subscription(k subscribeKey, from, sub, unsub []string, compute func() *subscribeResult) *subscribeResult {
	r, _, loaded := d.subs.get(k, func() (*subscribeResult, int) { return compute(), 0 })
	if loaded && (!sameNames(r.from, from) || !slices.Equal(r.sub, sub) || !slices.Equal(r.unsub, unsub)) {
		return compute()
	}
	return r
}

// computeSubscribe applies sub and unsub to the sorted list from.
func computeSubscribe(from []string, wildcard bool, sub, unsub []string) *subscribeResult {
	r := &subscribeResult{from: from, sub: slices.Clone(sub), unsub: slices.Clone(unsub), wildcard: wildcard}
	set := make(map[string]struct{}, len(from)+len(sub))
	for _, n := range from {
		set[n] = struct{}{}
	}
	changed := false
	for _, n := range sub {
		if n == "*" {
			r.wildcardAdded = r.wildcardAdded || !r.wildcard
			r.wildcard = true
		} else if _, ok := set[n]; !ok {
			set[n] = struct{}{}
			r.added = append(r.added, n)
			changed = true
		}
	}
	for _, n := range unsub {
		if n == "*" {
			r.wildcard, r.wildcardDropped = false, true
			continue
		}
		if _, ok := set[n]; ok {
			delete(set, n)
			changed = true
		}
		if !r.wildcard {
			r.dropped = append(r.dropped, n)
		}
	}
	if changed {
		names := make([]string, 0, len(set))
		for n := range set {
			names = append(names, n)
		}
		slices.Sort(names)
		r.subs = sharedNames(names)
		r.subsHash = hashNames(r.subs)
		r.subsBytes = namesBytes(r.subs)
	}
	return r
}

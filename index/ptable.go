package index

import "slices"

// ptable is one shard of a pmap: a hash table with open addressing and
// linear probing, at most 3/4 full, that deletes by backward shift (no
// tombstones). It replaces a Go map because a pmap shard is written by
// copying it: a ptable is copied with one memmove where a map re-inserts
// every entry; the hash that picked the shard picks the slot (a Go map
// hashes the key again); a ptable is two allocations where a map is three
// or four; and a bulk insert of a new key probes once.
//
// Its size is any number of 8-slot groups (the hash is mapped onto the
// slots by a multiply, not a mask), so a table sized for a known count is
// about 3/4 full, not 3/8 to 3/4 as a power of two would leave it.
type ptable[K keyer, V any] struct {
	groups []pgroup[K, V]
	n      int
}

// pgroup is eight slots with their used flags up front: a flag costs one
// byte, not the padding it would add to each slot.
type pgroup[K comparable, V any] struct {
	used    [ptableGroupLen]bool
	entries [ptableGroupLen]pentry[K, V]
}

type pentry[K comparable, V any] struct {
	key K
	val V
}

const ptableGroupLen = 8

// groupsFor returns the number of groups a table of n entries needs.
func groupsFor(n int) int {
	return max(1, (4*n+3*ptableGroupLen-1)/(3*ptableGroupLen))
}

func newPtable[K keyer, V any](n int) *ptable[K, V] {
	return &ptable[K, V]{groups: make([]pgroup[K, V], groupsFor(n))}
}

func (t *ptable[K, V]) slots() uint64 { return uint64(len(t.groups) * ptableGroupLen) }

// home returns the slot where a key of hash h is probed first: the low 32
// bits of h scaled to the table (the top bits pick the pmap's shard).
func (t *ptable[K, V]) home(h uint64) uint64 { return (h & (1<<32 - 1)) * t.slots() >> 32 }

// next returns the slot after i, wrapping around.
func (t *ptable[K, V]) next(i uint64) uint64 {
	if i++; i == t.slots() {
		return 0
	}
	return i
}

func (t *ptable[K, V]) used(i uint64) *bool {
	return &t.groups[i/ptableGroupLen].used[i%ptableGroupLen]
}

func (t *ptable[K, V]) entry(i uint64) *pentry[K, V] {
	return &t.groups[i/ptableGroupLen].entries[i%ptableGroupLen]
}

// find returns the slot of k (hash h) and true, or the empty slot where k
// would go and false.
func (t *ptable[K, V]) find(k K, h uint64) (uint64, bool) {
	for i := t.home(h); ; i = t.next(i) {
		if !*t.used(i) {
			return i, false
		}
		if t.entry(i).key == k {
			return i, true
		}
	}
}

// get returns the value of k (hash h).
func (t *ptable[K, V]) get(k K, h uint64) (V, bool) {
	if t == nil || t.n == 0 {
		var zero V
		return zero, false
	}
	i, ok := t.find(k, h)
	if !ok {
		var zero V
		return zero, false
	}
	return t.entry(i).val, true
}

// set maps k to v in a table of the caller's own, reporting whether k is new.
func (t *ptable[K, V]) set(k K, h uint64, v V) bool {
	i, ok := t.find(k, h)
	if ok {
		t.entry(i).val = v
		return false
	}
	if 4*(t.n+1) > 3*int(t.slots()) {
		t.rehash(groupsFor(t.n + 1 + t.n/4))
		i, _ = t.find(k, h)
	}
	*t.used(i) = true
	*t.entry(i) = pentry[K, V]{key: k, val: v}
	t.n++
	return true
}

// rehash moves the entries into a new array of that many groups.
func (t *ptable[K, V]) rehash(groups int) {
	old := t.groups
	*t = ptable[K, V]{groups: make([]pgroup[K, V], groups)}
	for gi := range old {
		g := &old[gi]
		for j := range g.used {
			if g.used[j] {
				e := &g.entries[j]
				i, _ := t.find(e.key, e.key.shard())
				*t.used(i) = true
				*t.entry(i) = *e
				t.n++
			}
		}
	}
}

// del removes k (hash h) from a table of the caller's own, shifting back
// the entries of its probe run that may fill the hole (Knuth's algorithm R).
func (t *ptable[K, V]) del(k K, h uint64) bool {
	if t.n == 0 {
		return false
	}
	i, ok := t.find(k, h)
	if !ok {
		return false
	}
	for j := t.next(i); *t.used(j); j = t.next(j) {
		// The entry at j may move to i unless its home slot lies
		// cyclically in (i, j].
		home := t.home(t.entry(j).key.shard())
		if (i < j && (home <= i || home > j)) || (i > j && home <= i && home > j) {
			*t.entry(i) = *t.entry(j)
			i = j
		}
	}
	*t.used(i) = false
	*t.entry(i) = pentry[K, V]{}
	t.n--
	return true
}

// clone returns a copy of t (nil: empty) of the caller's own, with room for
// one more entry: a shard is copied to be written. A table that would grow
// past 3/4 full is laid out anew with room for a quarter more entries (so
// that a shard growing a row per batch is not re-laid out every batch), one
// whose entries need under a quarter of it at their size.
func (t *ptable[K, V]) clone() *ptable[K, V] {
	if t == nil {
		return newPtable[K, V](1)
	}
	if need := groupsFor(t.n + 1); need > len(t.groups) || 4*need <= len(t.groups) {
		want := need
		if need > len(t.groups) {
			want = groupsFor(t.n + 1 + t.n/4)
		}
		c := &ptable[K, V]{groups: t.groups} // rehash reads the old groups, never writes them
		c.rehash(want)
		return c
	}
	return &ptable[K, V]{groups: slices.Clone(t.groups), n: t.n}
}

// all calls fn for every entry until fn returns false, and reports whether
// it never did.
func (t *ptable[K, V]) all(fn func(K, V) bool) bool {
	if t == nil {
		return true
	}
	for gi := range t.groups {
		g := &t.groups[gi]
		for j := range g.used {
			if g.used[j] && !fn(g.entries[j].key, g.entries[j].val) {
				return false
			}
		}
	}
	return true
}

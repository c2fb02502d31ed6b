package index

import (
	"math"
	"math/bits"
	"slices"
)

// keyer is a comparable key that spreads itself over the shards of a pmap:
// shard returns a well-mixed 64-bit hash of the key.
type keyer interface {
	comparable
	shard() uint64
}

const (
	// pmapTargetShardLen is the shard size the map aims for: a change copies
	// one shard, so this bounds the cost of a one-row change.
	pmapTargetShardLen = 64
	pmapMaxShardBits   = 8 // at most 256 shards
)

// pmap is a persistent hash map: a power-of-two array of shards, each a
// small hash table (ptable) that is never mutated once published. A
// transaction copies a shard the first time it writes to it, so one change
// costs one shard copy (about 64 entries) and unchanged shards are shared
// between snapshots. The shard count follows the map's size: a small table
// pays for few shards, a large one keeps single-row changes cheap.
//
// The top bits of the key's hash pick the shard, the low bits its slot.
type pmap[K keyer, V any] struct {
	shards []*ptable[K, V] // len is 1<<bits, or 0 for an empty map; nil: an empty shard
	n      int
}

// shardOf returns the shard of hash h among n (a power of two) shards.
func shardOf(h uint64, n int) int {
	return int(h >> (64 - bits.TrailingZeros(uint(n)))) // h>>64 is 0: one shard
}

func (m pmap[K, V]) Get(k K) (V, bool) {
	if len(m.shards) == 0 {
		var zero V
		return zero, false
	}
	h := k.shard()
	return m.shards[shardOf(h, len(m.shards))].get(k, h)
}

func (m pmap[K, V]) Len() int { return m.n }

// All calls fn for every entry in unspecified order until fn returns false.
func (m pmap[K, V]) All(fn func(K, V) bool) {
	for _, t := range m.shards {
		if !t.all(fn) {
			return
		}
	}
}

// pmapTxn is a writer's view of a pmap being modified. It is not safe for
// concurrent use, and the pmap it returns from commit must not be written to
// again except through a new transaction.
type pmapTxn[K keyer, V any] struct {
	m     pmap[K, V]
	dirOK bool                               // m.shards is this transaction's own copy
	owned [1 << pmapMaxShardBits / 64]uint64 // bit i: shard i is this transaction's own copy
}

func (m pmap[K, V]) txn() *pmapTxn[K, V] { return &pmapTxn[K, V]{m: m} }

func (t *pmapTxn[K, V]) Get(k K) (V, bool) { return t.m.Get(k) }

// shardForWrite returns the shard of hash h, copied if it is not this
// transaction's own yet.
func (t *pmapTxn[K, V]) shardForWrite(h uint64) *ptable[K, V] {
	if len(t.m.shards) == 0 {
		t.m.shards = []*ptable[K, V]{newPtable[K, V](1)}
		t.dirOK = true
		t.owned[0] |= 1
		return t.m.shards[0]
	}
	if !t.dirOK {
		t.m.shards = slices.Clone(t.m.shards)
		t.dirOK = true
	}
	i := shardOf(h, len(t.m.shards))
	if t.owned[i/64]&(1<<(i%64)) == 0 {
		t.m.shards[i] = t.m.shards[i].clone()
		t.owned[i/64] |= 1 << (i % 64)
	}
	return t.m.shards[i]
}

// reserve prepares for about n insertions. A map that is empty, or that n
// would more than double, is laid out for its final size now, in shards of
// this transaction's own, so a bulk build neither grows tables step by step
// nor copies shards on write.
func (t *pmapTxn[K, V]) reserve(n int) {
	if n <= 0 || n < t.m.n {
		return
	}
	b := shardBitsFor(t.m.n + n)
	if b == 1 {
		// Up to twice the target size, one shard, as a map grown row by
		// row keeps (commit re-shards at a factor of four): a small build
		// makes half the tables.
		b = 0
	}
	out := pmap[K, V]{shards: make([]*ptable[K, V], 1<<b), n: t.m.n}
	per := (t.m.n + n) >> b
	if b > 0 {
		// Keys spread over shards unevenly (about Poisson): room for a
		// standard deviation more, so that few shards (under one in six)
		// re-lay themselves out while the batch fills them.
		per += int(math.Sqrt(float64(per))) + 1
	}
	groups := groupsFor(per)
	tables := make([]ptable[K, V], len(out.shards))
	for i := range out.shards {
		tables[i].groups = make([]pgroup[K, V], groups)
		out.shards[i] = &tables[i]
	}
	t.m.All(func(k K, v V) bool {
		h := k.shard()
		out.shards[shardOf(h, len(out.shards))].set(k, h, v)
		return true
	})
	t.m = out
	t.dirOK = true
	for i := range t.owned {
		t.owned[i] = ^uint64(0)
	}
}

// Set maps k to v and reports whether k is new.
func (t *pmapTxn[K, V]) Set(k K, v V) bool {
	h := k.shard()
	s := t.shardForWrite(h)
	if !s.set(k, h, v) {
		return false
	}
	t.m.n++
	// A large batch grows the map within one transaction: re-shard as it
	// goes, so no shard grows far past its target (amortized O(1) per Set).
	if s.n > 4*pmapTargetShardLen && len(t.m.shards) < 1<<pmapMaxShardBits {
		t.m = t.m.reshard(shardBitsFor(t.m.n))
		t.dirOK = true
		for i := range t.owned {
			t.owned[i] = ^uint64(0)
		}
	}
	return true
}

func (t *pmapTxn[K, V]) Delete(k K) {
	if _, ok := t.m.Get(k); !ok {
		return
	}
	h := k.shard()
	t.shardForWrite(h).del(k, h)
	t.m.n--
}

// commit returns the modified map, re-sharded when its size has moved a
// factor of four away from its shard count (amortized: a map is re-sharded
// once per quadrupling). The transaction must not be used after.
func (t *pmapTxn[K, V]) commit() pmap[K, V] {
	m := t.m
	*t = pmapTxn[K, V]{}
	want := shardBitsFor(m.n)
	have := 0
	if len(m.shards) > 0 {
		have = bits.TrailingZeros(uint(len(m.shards)))
	}
	if m.n == 0 {
		return pmap[K, V]{}
	}
	if want > have+1 || want+1 < have {
		return m.reshard(want)
	}
	return m
}

func shardBitsFor(n int) int {
	b := 0
	for b < pmapMaxShardBits && n > pmapTargetShardLen<<b {
		b++
	}
	return b
}

// reshard returns a copy of m in 1<<b shards, each sized for its entries.
func (m pmap[K, V]) reshard(b int) pmap[K, V] {
	out := pmap[K, V]{shards: make([]*ptable[K, V], 1<<b), n: m.n}
	var counts [1 << pmapMaxShardBits]int
	m.All(func(k K, _ V) bool {
		counts[shardOf(k.shard(), len(out.shards))]++
		return true
	})
	tables := make([]ptable[K, V], len(out.shards))
	for i := range out.shards {
		if counts[i] > 0 {
			tables[i].groups = make([]pgroup[K, V], groupsFor(counts[i]))
			out.shards[i] = &tables[i]
		}
	}
	m.All(func(k K, v V) bool {
		h := k.shard()
		out.shards[shardOf(h, len(out.shards))].set(k, h, v)
		return true
	})
	return out
}

package index

import "math/bits"

// keyer is a comparable key that spreads itself over the shards of a pmap.
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

// pmap is a persistent hash map: a power-of-two array of shards, each an
// ordinary Go map that is never mutated once published. A transaction
// copies a shard the first time it writes to it, so one change costs one
// shard copy (about 64 entries) and unchanged shards are shared between
// snapshots. The shard count follows the map's size: a small table pays for
// few maps, a large one keeps single-row changes cheap.
type pmap[K keyer, V any] struct {
	shards []map[K]V // len is 1<<bits, or 0 for an empty map
	n      int
}

func (m pmap[K, V]) shardIndex(k K) int {
	if len(m.shards) <= 1 {
		return 0
	}
	return int(k.shard() >> (64 - bits.TrailingZeros(uint(len(m.shards)))))
}

func (m pmap[K, V]) Get(k K) (V, bool) {
	if len(m.shards) == 0 {
		var zero V
		return zero, false
	}
	v, ok := m.shards[m.shardIndex(k)][k]
	return v, ok
}

func (m pmap[K, V]) Len() int { return m.n }

// All calls fn for every entry in unspecified order until fn returns false.
func (m pmap[K, V]) All(fn func(K, V) bool) {
	for _, s := range m.shards {
		for k, v := range s {
			if !fn(k, v) {
				return
			}
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

func (t *pmapTxn[K, V]) shardForWrite(k K) map[K]V {
	if len(t.m.shards) == 0 {
		t.m.shards = []map[K]V{{}}
		t.dirOK = true
		t.owned[0] |= 1
		return t.m.shards[0]
	}
	if !t.dirOK {
		t.m.shards = append([]map[K]V(nil), t.m.shards...)
		t.dirOK = true
	}
	i := t.m.shardIndex(k)
	if t.owned[i/64]&(1<<(i%64)) == 0 {
		old := t.m.shards[i]
		cp := make(map[K]V, len(old)+1)
		for kk, vv := range old {
			cp[kk] = vv
		}
		t.m.shards[i] = cp
		t.owned[i/64] |= 1 << (i % 64)
	}
	return t.m.shards[i]
}

// reserve prepares for about n insertions. A map that is empty, or that n
// would more than double, is laid out for its final size now, in shards of
// this transaction's own, so a bulk build neither grows Go maps step by step
// nor copies shards on write.
func (t *pmapTxn[K, V]) reserve(n int) {
	if n <= 0 || n < t.m.n {
		return
	}
	b := shardBitsFor(t.m.n + n)
	out := pmap[K, V]{shards: make([]map[K]V, 1<<b), n: t.m.n}
	per := (t.m.n+n)>>b + 1
	for i := range out.shards {
		out.shards[i] = make(map[K]V, per)
	}
	for _, s := range t.m.shards {
		for k, v := range s {
			out.shards[out.shardIndex(k)][k] = v
		}
	}
	t.m = out
	t.dirOK = true
	for i := range t.owned {
		t.owned[i] = ^uint64(0)
	}
}

func (t *pmapTxn[K, V]) Set(k K, v V) {
	s := t.shardForWrite(k)
	if _, ok := s[k]; !ok {
		t.m.n++
	}
	s[k] = v
	// A large batch grows the map within one transaction: re-shard as it
	// goes, so no shard grows far past its target (amortized O(1) per Set).
	if len(s) > 4*pmapTargetShardLen && len(t.m.shards) < 1<<pmapMaxShardBits {
		t.m = t.m.reshard(shardBitsFor(t.m.n))
		t.dirOK = true
		for i := range t.owned {
			t.owned[i] = ^uint64(0)
		}
	}
}

func (t *pmapTxn[K, V]) Delete(k K) {
	if _, ok := t.m.Get(k); !ok {
		return
	}
	delete(t.shardForWrite(k), k)
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

func (m pmap[K, V]) reshard(b int) pmap[K, V] {
	out := pmap[K, V]{shards: make([]map[K]V, 1<<b), n: m.n}
	per := m.n>>b + 1
	for i := range out.shards {
		out.shards[i] = make(map[K]V, per)
	}
	for _, s := range m.shards {
		for k, v := range s {
			out.shards[out.shardIndex(k)][k] = v
		}
	}
	return out
}

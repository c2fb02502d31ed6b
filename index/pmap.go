package index

// keyer is a comparable key that spreads itself over the shards of a pmap.
type keyer interface {
	comparable
	shard() uint64
}

const (
	pmapShardBits = 6
	pmapShards    = 1 << pmapShardBits
)

// pmap is a persistent hash map: a fixed array of shards, each an ordinary Go
// map that is never mutated once published. A transaction copies a shard the
// first time it writes to it, so one change costs one shard copy (1/64 of the
// map) and unchanged shards are shared between snapshots.
type pmap[K keyer, V any] struct {
	shards *[pmapShards]map[K]V
	n      int
}

func (m pmap[K, V]) Get(k K) (V, bool) {
	var zero V
	if m.shards == nil {
		return zero, false
	}
	v, ok := m.shards[k.shard()&(pmapShards-1)][k]
	if !ok {
		return zero, false
	}
	return v, true
}

func (m pmap[K, V]) Len() int { return m.n }

// All calls fn for every entry in unspecified order until fn returns false.
func (m pmap[K, V]) All(fn func(K, V) bool) {
	if m.shards == nil {
		return
	}
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
	dirOK bool   // m.shards is this transaction's own copy
	owned uint64 // bit i: shard i is this transaction's own copy
}

func (m pmap[K, V]) txn() *pmapTxn[K, V] { return &pmapTxn[K, V]{m: m} }

func (t *pmapTxn[K, V]) Get(k K) (V, bool) { return t.m.Get(k) }

func (t *pmapTxn[K, V]) shardForWrite(k K) map[K]V {
	if !t.dirOK {
		dir := new([pmapShards]map[K]V)
		if t.m.shards != nil {
			*dir = *t.m.shards
		}
		t.m.shards = dir
		t.dirOK = true
	}
	i := k.shard() & (pmapShards - 1)
	if t.owned&(1<<i) == 0 {
		old := t.m.shards[i]
		cp := make(map[K]V, len(old)+1)
		for kk, vv := range old {
			cp[kk] = vv
		}
		t.m.shards[i] = cp
		t.owned |= 1 << i
	}
	return t.m.shards[i]
}

func (t *pmapTxn[K, V]) Set(k K, v V) {
	s := t.shardForWrite(k)
	if _, ok := s[k]; !ok {
		t.m.n++
	}
	s[k] = v
}

func (t *pmapTxn[K, V]) Delete(k K) {
	if _, ok := t.m.Get(k); !ok {
		return
	}
	delete(t.shardForWrite(k), k)
	t.m.n--
}

// commit returns the modified map; the transaction must not be used after.
func (t *pmapTxn[K, V]) commit() pmap[K, V] {
	m := t.m
	*t = pmapTxn[K, V]{}
	return m
}

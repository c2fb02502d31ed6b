package index

import "slices"

// Index declares a secondary index over rows of type R, as a value next to
// the row type. Keys returns the index keys of a row (appending to dst); a
// row may have several (a config with several hosts) or none. Keys are
// interned IDs widened to uint64, or hashes where noted: a lookup by a hashed
// key must check the rows it gets.
type Index[R any] struct {
	Name string
	Keys func(r *R, dst []uint64) []uint64
}

// indexKey is a secondary-index key.
type indexKey uint64

func (k indexKey) shard() uint64 { return mix64(uint64(k)) }

// symKey is the primary key of tables keyed by one symbol (namespaces).
type symKey Sym

func (k symKey) shard() uint64 { return mix64(uint64(k)) }

// tableSpec describes one table: its name, how to get a row's primary key,
// how to hash it (nil: the row's Hash is supplied by the caller), and its
// secondary indexes.
type tableSpec[K keyer, R any] struct {
	name    string
	key     func(*R) K
	hash    func(*R) uint64
	getHash func(*R) *uint64
	indexes []*Index[R]
}

type slot[R any] struct {
	row  R
	live bool
}

// table is a persistent table of rows with dense IDs, a primary key and
// declared secondary indexes. Its zero value is an empty table.
type table[K keyer, R any] struct {
	rows pvec[slot[R]]
	pk   pmap[K, uint32]
	idx  []pmap[indexKey, []uint32] // parallel to spec.indexes; nil until first write
	// next is the high-water mark of IDs; free lists IDs below it that are
	// not live (immutable once published).
	next uint32
	free []uint32
}

// get returns the row with primary key k.
func (t *table[K, R]) get(k K) (*R, uint32, bool) {
	id, ok := t.pk.Get(k)
	if !ok {
		return nil, 0, false
	}
	return &t.rows.At(id).row, id, true
}

// at returns the live row with that ID, or nil.
func (t *table[K, R]) at(id uint32) *R {
	if id >= t.next {
		return nil
	}
	s := t.rows.At(id)
	if !s.live {
		return nil
	}
	return &s.row
}

func (t *table[K, R]) len() int { return t.pk.Len() }

// byIndex returns the IDs of rows with index key k, sorted. The slice is
// shared: never modify it.
func (t *table[K, R]) byIndex(i int, k uint64) []uint32 {
	if i >= len(t.idx) {
		return nil
	}
	ids, _ := t.idx[i].Get(indexKey(k))
	return ids
}

// all calls fn for every live row in ID order until fn returns false.
func (t *table[K, R]) all(fn func(id uint32, r *R) bool) {
	for id := uint32(0); id < t.next; id++ {
		s := t.rows.At(id)
		if s.live && !fn(id, &s.row) {
			return
		}
	}
}

// tableTxn modifies a table for one batch.
type tableTxn[K keyer, R any] struct {
	spec *tableSpec[K, R]
	base *table[K, R]
	rows *pvecTxn[slot[R]]
	pk   *pmapTxn[K, uint32]
	next uint32
	free []uint32
	// per index: key → IDs added / removed in this batch
	adds    []map[uint64][]uint32
	removes []map[uint64]map[uint32]struct{}
	keyBuf  []uint64
	// changed lists IDs put or deleted in this batch, in order, possibly
	// with repeats.
	changed []uint32
}

func (t *table[K, R]) txn(spec *tableSpec[K, R]) *tableTxn[K, R] {
	return &tableTxn[K, R]{
		spec:    spec,
		base:    t,
		rows:    t.rows.txn(),
		pk:      t.pk.txn(),
		next:    t.next,
		free:    slices.Clone(t.free),
		adds:    make([]map[uint64][]uint32, len(spec.indexes)),
		removes: make([]map[uint64]map[uint32]struct{}, len(spec.indexes)),
	}
}

// get reads through the transaction (rows put earlier in the batch are seen).
func (x *tableTxn[K, R]) get(k K) (*R, uint32, bool) {
	id, ok := x.pk.Get(k)
	if !ok {
		return nil, 0, false
	}
	return &x.rows.v.At(id).row, id, true
}

// lookupIDs calls fn with the IDs of live rows that have index key k as of
// this transaction: the published list less this batch's removals, plus its
// additions.
func (x *tableTxn[K, R]) lookupIDs(i int, k uint64, fn func(id uint32) bool) {
	rm := x.removes[i][k]
	for _, id := range x.base.byIndex(i, k) {
		if _, gone := rm[id]; gone {
			continue
		}
		if !fn(id) {
			return
		}
	}
	for _, id := range x.adds[i][k] {
		if !fn(id) {
			return
		}
	}
}

// lookup is lookupIDs with the rows.
func (x *tableTxn[K, R]) lookup(i int, k uint64, fn func(*R) bool) {
	x.lookupIDs(i, k, func(id uint32) bool { return fn(&x.rows.v.At(id).row) })
}

// put inserts or replaces the row with r's primary key, hashing it first.
// It reports the row's ID and whether anything changed (an identical row,
// by hash, is a no-op).
func (x *tableTxn[K, R]) put(r R) (uint32, bool) {
	if x.spec.hash != nil {
		*x.spec.getHash(&r) = x.spec.hash(&r)
	}
	k := x.spec.key(&r)
	if old, id, ok := x.get(k); ok {
		if *x.spec.getHash(old) == *x.spec.getHash(&r) {
			return id, false
		}
		x.unindex(id, old)
		x.rows.Set(id, slot[R]{row: r, live: true})
		x.index(id, &x.rows.v.At(id).row)
		x.changed = append(x.changed, id)
		return id, true
	}
	var id uint32
	if n := len(x.free); n > 0 {
		id = x.free[n-1]
		x.free = x.free[:n-1]
	} else {
		id = x.next
		x.next++
	}
	x.rows.Set(id, slot[R]{row: r, live: true})
	x.pk.Set(k, id)
	x.index(id, &x.rows.v.At(id).row)
	x.changed = append(x.changed, id)
	return id, true
}

// delete removes the row with primary key k, reporting its ID.
func (x *tableTxn[K, R]) delete(k K) (uint32, bool) {
	old, id, ok := x.get(k)
	if !ok {
		return 0, false
	}
	x.unindex(id, old)
	x.rows.Set(id, slot[R]{})
	x.pk.Delete(k)
	x.free = append(x.free, id)
	x.changed = append(x.changed, id)
	return id, true
}

func (x *tableTxn[K, R]) index(id uint32, r *R) {
	for i, ix := range x.spec.indexes {
		x.keyBuf = ix.Keys(r, x.keyBuf[:0])
		for _, k := range x.keyBuf {
			if rm := x.removes[i][k]; rm != nil {
				if _, ok := rm[id]; ok {
					delete(rm, id)
					continue // it was in the base list; still is
				}
			}
			if x.adds[i] == nil {
				x.adds[i] = map[uint64][]uint32{}
			}
			x.adds[i][k] = append(x.adds[i][k], id)
		}
	}
}

func (x *tableTxn[K, R]) unindex(id uint32, r *R) {
	for i, ix := range x.spec.indexes {
		x.keyBuf = ix.Keys(r, x.keyBuf[:0])
		for _, k := range x.keyBuf {
			if a := x.adds[i][k]; len(a) > 0 {
				if j := slices.Index(a, id); j >= 0 {
					x.adds[i][k] = slices.Delete(a, j, j+1)
					continue // added in this batch, never in the base list
				}
			}
			if x.removes[i] == nil {
				x.removes[i] = map[uint64]map[uint32]struct{}{}
			}
			if x.removes[i][k] == nil {
				x.removes[i][k] = map[uint32]struct{}{}
			}
			x.removes[i][k][id] = struct{}{}
		}
	}
}

// commit builds the next table. Each touched index list is rebuilt once per
// batch (old list minus removals plus additions, sorted), so a batch of n
// changes to one key costs O(list + n), not O(list × n).
func (x *tableTxn[K, R]) commit() table[K, R] {
	t := table[K, R]{rows: x.rows.commit(), pk: x.pk.commit(), next: x.next, free: x.free}
	// Trim the high-water mark so a table emptied from the top scans less.
	t.idx = make([]pmap[indexKey, []uint32], len(x.spec.indexes))
	copy(t.idx, x.base.idx)
	for i := range x.spec.indexes {
		if len(x.adds[i]) == 0 && len(x.removes[i]) == 0 {
			continue
		}
		itx := t.idx[i].txn()
		touched := map[uint64]struct{}{}
		for k := range x.adds[i] {
			touched[k] = struct{}{}
		}
		for k := range x.removes[i] {
			touched[k] = struct{}{}
		}
		for k := range touched {
			old, _ := itx.Get(indexKey(k))
			rm := x.removes[i][k]
			add := x.adds[i][k]
			if len(old) == 0 && len(add) > 0 {
				// A new key: the batch's own list becomes the index list.
				slices.Sort(add)
				itx.Set(indexKey(k), slices.Clip(add))
				continue
			}
			next := make([]uint32, 0, len(old)+len(add))
			for _, id := range old {
				if _, gone := rm[id]; !gone {
					next = append(next, id)
				}
			}
			next = append(next, add...)
			if len(next) == 0 {
				itx.Delete(indexKey(k))
				continue
			}
			slices.Sort(next)
			itx.Set(indexKey(k), next)
		}
		t.idx[i] = itx.commit()
	}
	return t
}

package index

import (
	"cmp"
	"slices"
)

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
	idx  []pmap[indexKey, idList] // parallel to spec.indexes; nil until first write
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
	return ids.ids()
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
	rows pvecTxn[slot[R]]
	pk   pmapTxn[K, uint32]
	next uint32
	free []uint32
	// ops lists, per index, the entries this batch adds and removes, in
	// order until sorted (see idxOp); sorted says ops[i] is in net form.
	ops    [maxIndexes][]idxOp
	sorted [maxIndexes]bool
	seq    uint32
	hint   int
	keyBuf []uint64
	// changed lists IDs put or deleted in this batch, in order, possibly
	// with repeats.
	changed []uint32
	// noBulk: put may not take the bulk path (a key was put twice on it,
	// or the writer is a test's incremental reference).
	noBulk bool
}

// idxOp is one change to a secondary index within a batch: row id gains
// (add) or loses key. A row's entries under one key alternate between add
// and remove, so a run of them nets out to its first op when the run's
// length is odd, and to nothing when it is even. Flat, sortable ops instead
// of per-key maps: a bulk build of n rows costs one slice and one sort per
// index, and commit writes every new list into one array.
type idxOp struct {
	key uint64
	id  uint32
	seq uint32 // order in the batch << 1 | 1 for an add
}

func (o idxOp) add() bool { return o.seq&1 == 1 }

func compareIdxOps(a, b idxOp) int {
	switch {
	case a.key != b.key:
		return cmp.Compare(a.key, b.key)
	case a.id != b.id:
		return cmp.Compare(a.id, b.id)
	}
	return cmp.Compare(a.seq, b.seq)
}

// maxIndexes is the most secondary indexes a table declares.
const maxIndexes = 4

func (t *table[K, R]) txn(spec *tableSpec[K, R]) *tableTxn[K, R] {
	if len(spec.indexes) > maxIndexes {
		panic("index: table " + spec.name + " declares more than maxIndexes indexes")
	}
	return &tableTxn[K, R]{
		spec: spec,
		base: t,
		rows: pvecTxn[slot[R]]{v: t.rows, base: uint32(len(t.rows.chunks))},
		pk:   pmapTxn[K, uint32]{m: t.pk},
		next: t.next,
		free: slices.Clone(t.free),
	}
}

// reserve prepares for n puts: a bulk build sizes its maps, row chunks and
// index lists once instead of growing them.
func (x *tableTxn[K, R]) reserve(n int) {
	x.hint = n
	x.pk.reserve(n)
	x.rows.reserve(x.next, n)
	x.changed = slices.Grow(x.changed, n)
}

// net returns index i's ops in net form: sorted by key and ID, at most one
// per (key, ID), each a real change to the published list.
func (x *tableTxn[K, R]) net(i int) []idxOp {
	ops := x.ops[i]
	if x.sorted[i] {
		return ops
	}
	slices.SortFunc(ops, compareIdxOps)
	out := ops[:0]
	for j := 0; j < len(ops); {
		k := j + 1
		for k < len(ops) && ops[k].key == ops[j].key && ops[k].id == ops[j].id {
			k++
		}
		if (k-j)%2 == 1 {
			out = append(out, ops[j])
		}
		j = k
	}
	x.ops[i], x.sorted[i] = out, true
	return out
}

// keyRun returns the ops of key k in a net list.
func keyRun(net []idxOp, k uint64) []idxOp {
	lo, _ := slices.BinarySearchFunc(net, k, func(o idxOp, k uint64) int { return cmp.Compare(o.key, k) })
	hi := lo
	for hi < len(net) && net[hi].key == k {
		hi++
	}
	return net[lo:hi]
}

// runAt returns the run of net's ops that starts at j (commit walks the
// runs in order: no search needed).
func runAt(net []idxOp, j int) []idxOp {
	k := j + 1
	for k < len(net) && net[k].key == net[j].key {
		k++
	}
	return net[j:k]
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
	run := keyRun(x.net(i), k)
	for _, id := range x.base.byIndex(i, k) {
		if j, ok := slices.BinarySearchFunc(run, id, func(o idxOp, id uint32) int { return cmp.Compare(o.id, id) }); ok && !run[j].add() {
			continue
		}
		if !fn(id) {
			return
		}
	}
	for _, o := range run {
		if o.add() && !fn(o.id) {
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
// by hash, is a no-op). r is copied, not kept (nor written: the hash goes
// into the table's copy), so a batch's row is never moved to the heap.
func (x *tableTxn[K, R]) put(r *R) (uint32, bool) {
	h := *x.spec.getHash(r)
	if x.spec.hash != nil {
		h = x.spec.hash(r)
	}
	k := x.spec.key(r)
	if x.bulk() {
		// Built from empty: assume k is new and insert it first, without
		// the probe a put otherwise pays to find out (most keys of a bulk
		// build are new). A key put twice finds its first ID by a scan,
		// once: the transaction then leaves the bulk path.
		id := x.next
		if x.pk.Set(k, id) {
			x.next++
			x.store(id, r, h)
			x.changed = append(x.changed, id)
			return id, true
		}
		x.pk.Set(k, x.scanID(k))
		x.noBulk = true
	}
	if old, id, ok := x.get(k); ok {
		if *x.spec.getHash(old) == h {
			return id, false
		}
		x.unindex(id, old)
		x.store(id, r, h)
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
	x.store(id, r, h)
	x.pk.Set(k, id)
	x.changed = append(x.changed, id)
	return id, true
}

// bulk reports whether put may take the bulk path: the table was empty when
// the transaction began, no ID has been freed since (a new row takes the next
// ID) and no key has been put twice.
func (x *tableTxn[K, R]) bulk() bool {
	return x.base.next == 0 && len(x.free) == 0 && !x.noBulk
}

// scanID returns the ID of the live row with key k, searching every row: on
// the bulk path all rows are this transaction's.
func (x *tableTxn[K, R]) scanID(k K) uint32 {
	for id := uint32(0); id < x.next; id++ {
		if sl := x.rows.v.At(id); sl.live && x.spec.key(&sl.row) == k {
			return id
		}
	}
	panic("index: table " + x.spec.name + ": key in the primary map without a row")
}

// store copies r into slot id with content hash h and indexes it.
func (x *tableTxn[K, R]) store(id uint32, r *R, h uint64) {
	x.rows.Set(id, slot[R]{row: *r, live: true})
	row := &x.rows.v.At(id).row
	*x.spec.getHash(row) = h
	x.index(id, row)
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

func (x *tableTxn[K, R]) index(id uint32, r *R) { x.indexOps(id, r, 1) }

func (x *tableTxn[K, R]) unindex(id uint32, r *R) { x.indexOps(id, r, 0) }

func (x *tableTxn[K, R]) indexOps(id uint32, r *R, add uint32) {
	for i, ix := range x.spec.indexes {
		x.keyBuf = ix.Keys(r, x.keyBuf[:0])
		if len(x.keyBuf) == 0 {
			continue
		}
		if x.ops[i] == nil {
			x.ops[i] = make([]idxOp, 0, max(x.hint, len(x.keyBuf)))
		}
		for _, k := range x.keyBuf {
			x.ops[i] = append(x.ops[i], idxOp{key: k, id: id, seq: x.seq<<1 | add})
			x.seq++
		}
		x.sorted[i] = false
	}
}

// commit builds the next table. Each touched index list is rebuilt once per
// batch (old list minus removals merged with additions, both sorted), so a
// batch of n changes to one key costs O(list + n), not O(list × n); the new
// lists of one commit share one array.
func (x *tableTxn[K, R]) commit() table[K, R] {
	t := table[K, R]{rows: x.rows.commit(), pk: x.pk.commit(), next: x.next, free: x.free}
	t.idx = make([]pmap[indexKey, idList], len(x.spec.indexes))
	copy(t.idx, x.base.idx)
	for i := range x.spec.indexes {
		net := x.net(i)
		if len(net) == 0 {
			continue
		}
		// Each key's old list comes from the published index: the
		// transaction writes every key once, so it would read the same, at
		// the cost of probing the maps it is filling.
		base := t.idx[i]
		itx := base.txn()
		keys, total := 0, 0
		for j := 0; j < len(net); {
			run := runAt(net, j)
			old, _ := base.Get(indexKey(net[j].key))
			total += int(old.n)
			for _, o := range run {
				if o.add() {
					total++
				} else {
					total--
				}
			}
			keys++
			j += len(run)
		}
		itx.reserve(keys)
		lists := make([]uint32, 0, total)
		for j := 0; j < len(net); {
			k := net[j].key
			run := runAt(net, j)
			j += len(run)
			old, _ := base.Get(indexKey(k))
			start := len(lists)
			lists = mergeIDs(lists, old.ids(), run)
			if len(lists) == start {
				itx.Delete(indexKey(k))
				continue
			}
			itx.Set(indexKey(k), newIDList(lists[start:]))
		}
		t.idx[i] = itx.commit()
	}
	return t
}

// mergeIDs appends to dst the sorted list old less run's removals plus its
// additions (run is sorted by ID; an added ID is never in old).
func mergeIDs(dst, old []uint32, run []idxOp) []uint32 {
	r := 0
	for _, id := range old {
		for r < len(run) && run[r].id < id {
			if run[r].add() {
				dst = append(dst, run[r].id)
			}
			r++
		}
		if r < len(run) && run[r].id == id {
			r++ // removed
			continue
		}
		dst = append(dst, id)
	}
	for ; r < len(run); r++ {
		if run[r].add() {
			dst = append(dst, run[r].id)
		}
	}
	return dst
}

package index

const (
	pvecChunkBits = 6
	pvecChunkSize = 1 << pvecChunkBits
	// pvecSlabChunks bounds how many new chunks one allocation holds. A
	// bulk build allocates its chunks in slabs (one allocation per 16
	// chunks instead of 16); a slab stays live while any of its chunks is
	// published, so this also bounds what a later copy-on-write of one
	// chunk can leave pinned.
	pvecSlabChunks = 16
)

// pvec is a persistent vector addressed by dense IDs: a directory of
// fixed-size chunks. Published chunks are never mutated; a transaction copies
// a chunk (64 rows) the first time it writes to it, and the directory once.
type pvec[T any] struct {
	chunks []*[pvecChunkSize]T
}

// At returns a pointer to element i, which must be below Cap. The pointee
// belongs to a published snapshot: never write through it.
func (v pvec[T]) At(i uint32) *T {
	return &v.chunks[i>>pvecChunkBits][i&(pvecChunkSize-1)]
}

// Cap is the number of addressable elements.
func (v pvec[T]) Cap() uint32 { return uint32(len(v.chunks)) << pvecChunkBits }

type pvecTxn[T any] struct {
	v     pvec[T]
	dirOK bool
	// base is the number of chunks the vector had when the transaction
	// began: chunks from base on were created by it and are its own.
	// owned marks the older chunks it has copied (bit i: chunk i).
	base  uint32
	owned []uint64
	// slab holds chunks allocated ahead and not used yet; pending is how
	// many more reserve asked for.
	slab    [][pvecChunkSize]T
	pending int
}

func (v pvec[T]) txn() *pvecTxn[T] { return &pvecTxn[T]{v: v, base: uint32(len(v.chunks))} }

func (t *pvecTxn[T]) ownDir() {
	if !t.dirOK {
		t.v.chunks = append([]*[pvecChunkSize]T(nil), t.v.chunks...)
		t.dirOK = true
	}
}

// reserve prepares for n more elements past the current end, so that a bulk
// build allocates its chunks in slabs rather than one by one.
func (t *pvecTxn[T]) reserve(next uint32, n int) {
	need := int((next+uint32(n)+pvecChunkSize-1)>>pvecChunkBits) - len(t.v.chunks) - len(t.slab) - t.pending
	if need <= 0 {
		return
	}
	t.pending += need
	if !t.dirOK {
		t.v.chunks = append(make([]*[pvecChunkSize]T, 0, len(t.v.chunks)+len(t.slab)+t.pending), t.v.chunks...)
		t.dirOK = true
	}
}

// newChunk returns a zeroed chunk of the transaction's own.
func (t *pvecTxn[T]) newChunk() *[pvecChunkSize]T {
	if len(t.slab) == 0 {
		if t.pending == 0 {
			return new([pvecChunkSize]T)
		}
		k := min(t.pending, pvecSlabChunks)
		t.slab = make([][pvecChunkSize]T, k)
		t.pending -= k
	}
	c := &t.slab[0]
	t.slab = t.slab[1:]
	return c
}

// Set stores x at i, growing the vector as needed.
func (t *pvecTxn[T]) Set(i uint32, x T) {
	c := i >> pvecChunkBits
	t.ownDir()
	for uint32(len(t.v.chunks)) <= c {
		t.v.chunks = append(t.v.chunks, t.newChunk())
	}
	if c < t.base {
		if t.owned == nil {
			t.owned = make([]uint64, (t.base+63)/64)
		}
		if t.owned[c/64]&(1<<(c%64)) == 0 {
			cp := *t.v.chunks[c]
			t.v.chunks[c] = &cp
			t.owned[c/64] |= 1 << (c % 64)
		}
	}
	t.v.chunks[c][i&(pvecChunkSize-1)] = x
}

func (t *pvecTxn[T]) commit() pvec[T] {
	v := t.v
	*t = pvecTxn[T]{}
	return v
}

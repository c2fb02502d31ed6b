package index

const (
	pvecChunkBits = 6
	pvecChunkSize = 1 << pvecChunkBits
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
	owned map[uint32]bool // chunk index → this transaction's own copy
}

func (v pvec[T]) txn() *pvecTxn[T] { return &pvecTxn[T]{v: v} }

func (t *pvecTxn[T]) ownDir() {
	if !t.dirOK {
		t.v.chunks = append([]*[pvecChunkSize]T(nil), t.v.chunks...)
		t.dirOK = true
	}
}

// Set stores x at i, growing the vector as needed.
func (t *pvecTxn[T]) Set(i uint32, x T) {
	c := i >> pvecChunkBits
	t.ownDir()
	for uint32(len(t.v.chunks)) <= c {
		t.v.chunks = append(t.v.chunks, new([pvecChunkSize]T))
		if t.owned == nil {
			t.owned = map[uint32]bool{}
		}
		t.owned[uint32(len(t.v.chunks)-1)] = true
	}
	if !t.owned[c] {
		cp := *t.v.chunks[c]
		t.v.chunks[c] = &cp
		if t.owned == nil {
			t.owned = map[uint32]bool{}
		}
		t.owned[c] = true
	}
	t.v.chunks[c][i&(pvecChunkSize-1)] = x
}

func (t *pvecTxn[T]) commit() pvec[T] {
	v := t.v
	*t = pvecTxn[T]{}
	return v
}

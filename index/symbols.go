package index

import (
	"hash/maphash"
	"math/bits"
	"sync"
	"sync/atomic"
	"unsafe"
)

// Sym is an interned string. The zero Sym is the empty string. Syms are
// process-local and never reused; compare them with ==.
type Sym uint32

// Sym → string is an array of chunks of doubling size (64, 128, 256, ...
// strings): a chunk, once allocated, is never moved, so a reader that
// obtained a Sym (from a published row) can always resolve it, and a new
// table costs a 1 KiB chunk rather than a large fixed one.
const (
	symFirstChunkBits = 6
	symMaxChunks      = 32 - symFirstChunkBits
)

// symArenaLen is the size of the byte slabs interned strings are copied
// into (one allocation per 4 KiB of strings rather than one per string);
// symbols are never freed, so a slab wastes nothing. Longer strings get an
// allocation of their own.
const (
	symArenaLen  = 4 << 10
	symArenaMax  = 256
	symTableInit = 256 // slots of a new table (a power of two)
)

// Symbols interns strings to [Sym]s. Intern is serialized internally;
// Lookup and String are lock-free and allocation-free, and safe to call
// concurrently with Intern.
//
// string → Sym is an open-addressing hash table of atomic slots, each the
// Sym plus one (0: empty) and the top 32 bits of the string's hash, so a
// probe compares strings only on a likely match. The writer publishes a
// string in its chunk before the slot that names it, and grows the table by
// building a larger one and swapping the pointer: a reader sees either
// table, both consistent.
type Symbols struct {
	mu     sync.Mutex // serializes Intern; guards arena
	seed   maphash.Seed
	table  atomic.Pointer[symTable]
	chunks [symMaxChunks]atomic.Pointer[[]string]
	n      atomic.Uint32 // number of symbols, including the empty one
	arena  []byte        // free tail of the current string slab; guarded by mu
	id     uint64        // process-unique, for Names.ID
}

type symTable struct {
	slots []atomic.Uint64 // len is a power of two
	used  int             // written only by the writer, under mu
}

// NewSymbols returns a table holding only the empty string (Sym 0).
func NewSymbols() *Symbols {
	s := &Symbols{seed: maphash.MakeSeed(), id: symbolTables.Add(1)}
	s.table.Store(&symTable{slots: make([]atomic.Uint64, symTableInit)})
	first := make([]string, 1<<symFirstChunkBits)
	s.chunks[0].Store(&first)
	s.n.Store(1)
	s.insert(s.table.Load(), s.hash(""), 0)
	return s
}

// symPos returns the chunk and offset of id.
func symPos(id uint32) (chunk, off int) {
	x := id + 1<<symFirstChunkBits
	chunk = bits.Len32(x) - 1 - symFirstChunkBits
	return chunk, int(x - 1<<(chunk+symFirstChunkBits))
}

func (s *Symbols) hash(str string) uint64 { return maphash.String(s.seed, str) }

// find returns the Sym of str in t.
func (s *Symbols) find(t *symTable, h uint64, str string) (Sym, bool) {
	mask := uint64(len(t.slots) - 1)
	tag := h >> 32
	for i := h & mask; ; i = (i + 1) & mask {
		v := t.slots[i].Load()
		if v == 0 {
			return 0, false
		}
		if v>>32 == tag {
			id := uint32(v) - 1
			c, off := symPos(id)
			if (*s.chunks[c].Load())[off] == str {
				return Sym(id), true
			}
		}
	}
}

// insert puts id, whose string hashes to h, in t. The caller holds mu (or
// owns t).
func (s *Symbols) insert(t *symTable, h uint64, id uint32) {
	mask := uint64(len(t.slots) - 1)
	i := h & mask
	for t.slots[i].Load() != 0 {
		i = (i + 1) & mask
	}
	t.slots[i].Store(h>>32<<32 | uint64(id+1))
	t.used++
}

// Intern returns the Sym of str, adding it if new.
func (s *Symbols) Intern(str string) Sym {
	if str == "" {
		return 0 // optional fields are mostly empty: skip the hash
	}
	h := s.hash(str)
	if id, ok := s.find(s.table.Load(), h, str); ok {
		return id
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.table.Load()
	if id, ok := s.find(t, h, str); ok {
		return id
	}
	id := s.n.Load()
	c, off := symPos(id)
	p := s.chunks[c].Load()
	if p == nil {
		chunk := make([]string, 1<<(c+symFirstChunkBits))
		p = &chunk
		s.chunks[c].Store(p)
	}
	// Copied so that the table never pins a caller's larger buffer (a YAML
	// document, say) through a substring.
	(*p)[off] = s.clone(str)
	s.n.Store(id + 1)
	if 2*(t.used+1) > len(t.slots) {
		t = s.grow(t)
	}
	s.insert(t, h, id)
	return Sym(id)
}

// grow returns a table of twice t's size holding t's symbols, published.
func (s *Symbols) grow(t *symTable) *symTable {
	next := &symTable{slots: make([]atomic.Uint64, 2*len(t.slots))}
	for i := range t.slots {
		if v := t.slots[i].Load(); v != 0 {
			id := uint32(v) - 1
			c, off := symPos(id)
			s.insert(next, s.hash((*s.chunks[c].Load())[off]), id)
		}
	}
	s.table.Store(next)
	return next
}

// clone copies str into the string slab. The caller holds mu.
func (s *Symbols) clone(str string) string {
	if str == "" {
		return ""
	}
	if len(str) > symArenaMax {
		b := make([]byte, len(str))
		copy(b, str)
		return unsafe.String(&b[0], len(b))
	}
	if len(s.arena) < len(str) {
		s.arena = make([]byte, symArenaLen)
	}
	b := s.arena[:len(str):len(str)]
	copy(b, str)
	s.arena = s.arena[len(str):]
	return unsafe.String(&b[0], len(b))
}

// Lookup returns the Sym of str if it was interned. It never allocates.
func (s *Symbols) Lookup(str string) (Sym, bool) {
	return s.find(s.table.Load(), s.hash(str), str)
}

// String returns the string of id. It panics on a Sym this table never
// issued: that is a broken invariant (a Sym from another table).
func (s *Symbols) String(id Sym) string {
	if uint32(id) >= s.n.Load() {
		panic("index: Sym not issued by this symbol table")
	}
	c, off := symPos(uint32(id))
	return (*s.chunks[c].Load())[off]
}

// Len returns the number of interned strings, the empty one included.
func (s *Symbols) Len() int { return int(s.n.Load()) }

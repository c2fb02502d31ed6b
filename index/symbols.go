package index

import (
	"sync"
	"sync/atomic"

	"github.com/puzpuzpuz/xsync/v4"
)

// Sym is an interned string. The zero Sym is the empty string. Syms are
// process-local and never reused; compare them with ==.
type Sym uint32

const symChunkBits = 10
const symChunkSize = 1 << symChunkBits

type symChunk [symChunkSize]string

// Symbols interns strings to [Sym]s. Intern is serialized internally;
// Lookup and String are lock-free and allocation-free, and safe to call
// concurrently with Intern.
//
// Sym → string is a chunked append-only array: a chunk, once allocated, is
// never moved, so a reader that obtained a Sym (from a published row) can
// always resolve it. string → Sym is a concurrent hash map.
type Symbols struct {
	mu     sync.Mutex                  // serializes Intern
	ids    *xsync.Map[string, Sym]     // string → Sym
	chunks atomic.Pointer[[]*symChunk] // Sym → string; replaced (copied) only when a chunk is added
	n      atomic.Uint32               // number of symbols, including the empty one
}

// NewSymbols returns a table holding only the empty string (Sym 0).
func NewSymbols() *Symbols {
	s := &Symbols{ids: xsync.NewMap[string, Sym]()}
	dir := []*symChunk{new(symChunk)}
	s.chunks.Store(&dir)
	s.n.Store(1)
	s.ids.Store("", 0)
	return s
}

// Intern returns the Sym of str, adding it if new.
func (s *Symbols) Intern(str string) Sym {
	if id, ok := s.ids.Load(str); ok {
		return id
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if id, ok := s.ids.Load(str); ok {
		return id
	}
	id := s.n.Load()
	dir := *s.chunks.Load()
	if int(id>>symChunkBits) == len(dir) {
		next := make([]*symChunk, len(dir)+1)
		copy(next, dir)
		next[len(dir)] = new(symChunk)
		dir = next
		s.chunks.Store(&dir)
	}
	// Clone so that the table never pins a caller's larger buffer (a YAML
	// document, say) through a substring.
	dir[id>>symChunkBits][id&(symChunkSize-1)] = cloneString(str)
	s.n.Store(id + 1)
	s.ids.Store(dir[id>>symChunkBits][id&(symChunkSize-1)], Sym(id))
	return Sym(id)
}

// Lookup returns the Sym of str if it was interned. It never allocates.
func (s *Symbols) Lookup(str string) (Sym, bool) {
	return s.ids.Load(str)
}

// String returns the string of id. It panics on a Sym this table never
// issued: that is a broken invariant (a Sym from another table).
func (s *Symbols) String(id Sym) string {
	if uint32(id) >= s.n.Load() {
		panic("index: Sym not issued by this symbol table")
	}
	dir := *s.chunks.Load()
	return dir[id>>symChunkBits][id&(symChunkSize-1)]
}

// Len returns the number of interned strings, the empty one included.
func (s *Symbols) Len() int { return int(s.n.Load()) }

func cloneString(s string) string {
	if s == "" {
		return ""
	}
	b := make([]byte, len(s))
	copy(b, s)
	return string(b)
}

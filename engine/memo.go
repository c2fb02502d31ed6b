package engine

import (
	"slices"

	"github.com/cespare/xxhash/v2"
)

// memo remembers, per class and type, the last response generated: proxies
// of one class asking for the same names in the same snapshot get identical
// resources, so the second and later proxies of a class copy a slice of
// cached resource references instead of building keys again. This is what
// makes a warm push cost O(resources) memory copies and no generation.
type memo struct {
	version  uint64
	wildcard bool
	names    []string // the request's names (a private copy)
	hash     uint64   // of names, to reject most mismatches in O(1)
	res      []Resource
}

func namesHash(names []string) uint64 {
	var d xxhash.Digest
	d.Reset()
	for _, n := range names {
		_, _ = d.WriteString(n)
		_, _ = d.Write([]byte{0})
	}
	return d.Sum64()
}

// memoGet returns the memoized response for the request, if any. The slice
// is shared: callers copy it.
func (cl *class) memoGet(version uint64, typeURL string, names []string, wildcard bool) ([]Resource, bool) {
	cl.memoMu.Lock()
	m := cl.memos[typeURL]
	cl.memoMu.Unlock()
	if m == nil || m.version != version || m.wildcard != wildcard || len(m.names) != len(names) {
		return nil, false
	}
	if len(names) > 0 && (m.hash != namesHash(names) || !slices.Equal(m.names, names)) {
		return nil, false
	}
	return m.res, true
}

// memoPut records a response. Entries are replaced, never mutated, so a
// reader holding an older one is safe.
func (cl *class) memoPut(version uint64, typeURL string, names []string, wildcard bool, res []Resource) {
	m := &memo{version: version, wildcard: wildcard, names: slices.Clone(names), res: slices.Clone(res)}
	if len(names) > 0 {
		m.hash = namesHash(names)
	}
	cl.memoMu.Lock()
	if cl.memos == nil {
		cl.memos = map[string]*memo{}
	}
	cl.memos[typeURL] = m
	cl.memoMu.Unlock()
}

package engine

import (
	"hash/maphash"
	"slices"
)

// memo remembers, per class and type, the last few responses generated:
// proxies of one class asking for the same names in the same snapshot get
// identical resources, so the second and later proxies of a class copy a
// slice of cached resource references instead of building keys again. This
// is what makes a warm push cost O(resources) memory copies and no
// generation.
//
// A few responses, not one: after a config change that adds a cluster,
// the proxies of a class are for a while in two states — those still
// subscribed to the old cluster list (answered by the push) and those that
// have ACKed the new clusters and subscribe to one more name — and a
// single entry would thrash between them, rebuilding a thousand keys per
// proxy.
type memo struct {
	version  memoVersion
	wildcard bool
	names    []string // the request's names (a private copy)
	hash     uint64   // of names, to reject most mismatches in O(1)
	res      []Resource
}

// memoVersion is what a memoized response was built from: a snapshot
// and a mesh (SetMesh changes what the same snapshot builds).
type memoVersion struct{ snap, mesh uint64 }

// memoWays is how many responses a class keeps per type.
const memoWays = 4

// namesHash digests a name list (process-local: memo entries never leave
// the process).
func namesHash(names []string) uint64 {
	h := uint64(len(names)) + 1
	for _, n := range names {
		h = h*0x9E3779B97F4A7C15 ^ maphash.String(memoSeed, n)
	}
	return h
}

var memoSeed = maphash.MakeSeed()

func (m *memo) matches(version memoVersion, names []string, hash uint64, wildcard bool) bool {
	return m.version == version && m.wildcard == wildcard && len(m.names) == len(names) &&
		m.hash == hash && slices.Equal(m.names, names)
}

// memoGet returns the memoized response for the request, if any. The slice
// is shared: callers copy it.
func (cl *class) memoGet(version memoVersion, typeURL string, names []string, wildcard bool) ([]Resource, bool) {
	cl.memoMu.Lock()
	ms := cl.memos[typeURL]
	cl.memoMu.Unlock()
	if len(ms) == 0 || ms[0].version != version {
		return nil, false // every entry is older than the newest
	}
	h := namesHash(names)
	for _, m := range ms {
		if m.matches(version, names, h, wildcard) {
			return m.res, true
		}
	}
	return nil, false
}

// memoPut records a response, ahead of at most memoWays-1 others of the
// same snapshot. Entries and their lists are replaced, never mutated, so a
// reader holding older ones is safe.
func (cl *class) memoPut(version memoVersion, typeURL string, names []string, wildcard bool, res []Resource) {
	m := &memo{version: version, wildcard: wildcard, names: slices.Clone(names), hash: namesHash(names), res: slices.Clone(res)}
	cl.memoMu.Lock()
	defer cl.memoMu.Unlock()
	if cl.memos == nil {
		cl.memos = map[string][]*memo{}
	}
	next := make([]*memo, 1, memoWays)
	next[0] = m
	for _, old := range cl.memos[typeURL] {
		if len(next) == memoWays {
			break
		}
		if old.version == version && !old.matches(version, names, m.hash, wildcard) {
			next = append(next, old)
		}
	}
	cl.memos[typeURL] = next
}

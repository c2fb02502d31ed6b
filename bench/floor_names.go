package bench

import (
	"hash/maphash"
	"slices"
	"sync"
)

// Every simulated proxy subscribes to the same EDS and RDS names, so the
// floor keeps one immutable copy of each subscription and each stream
// points at it: a stream's state is a pointer per type, and the responses
// a subscription is owed are assembled once per (subscription, version)
// for all the streams that share it.

// nameSet is a subscription to named resources: sorted, unique, immutable.
// A nil *nameSet is the empty subscription.
type nameSet struct {
	names []string
	raw   []byte // SotW: the resource_names fields it was parsed from; nil otherwise
}

func (s *nameSet) has(name string) bool {
	if s == nil {
		return false
	}
	_, ok := slices.BinarySearch(s.names, name)
	return ok
}

func (s *nameSet) list() []string {
	if s == nil {
		return nil
	}
	return s.names
}

// transition is a Delta subscription change from one nameSet: the set after
// it and the names it subscribed to (sorted), which are sent if they exist.
type transition struct {
	to  *nameSet
	sub []string
}

// floorSets interns subscriptions and Delta transitions. Both tables are
// bounded: a few entries per change; a full table is dropped (streams keep
// theirs).
type floorSets struct {
	mu    sync.Mutex
	sotws map[uint64]*nameSet      // by maphash of raw; guarded by mu
	trans map[transKey]*transition // guarded by mu
}

type transKey struct {
	from       *nameSet
	hash       uint64 // of the subscribed and unsubscribed names
	sub, unsub int
}

const maxFloorSets = 1024

var floorSeed = maphash.MakeSeed()

func newFloorSets() *floorSets {
	return &floorSets{sotws: map[uint64]*nameSet{}, trans: map[transKey]*transition{}}
}

// sotw returns the subscription of a SotW request's resource_names region.
// A region interleaved with other fields (not pure) is parsed for its
// stream alone.
func (f *floorSets) sotw(region []byte, pure bool) (*nameSet, error) {
	if !pure {
		return parseNames(region, false)
	}
	h := maphash.Bytes(floorSeed, region)
	f.mu.Lock()
	s, ok := f.sotws[h]
	f.mu.Unlock()
	if ok && string(s.raw) == string(region) {
		return s, nil
	}
	s, err := parseNames(region, true)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	if len(f.sotws) >= maxFloorSets {
		clear(f.sotws)
	}
	f.sotws[h] = s
	f.mu.Unlock()
	return s, nil
}

// parseNames returns the resource_names (field 3) of region as a nameSet,
// keeping a copy of region when keep is set.
func parseNames(region []byte, keep bool) (*nameSet, error) {
	s := &nameSet{}
	for b := region; len(b) > 0; {
		num, _, v, rest, err := consumeField(b)
		if err != nil {
			return nil, err
		}
		b = rest
		if num == fSotWReqNames {
			s.names = append(s.names, string(v))
		}
	}
	slices.Sort(s.names)
	s.names = slices.Compact(s.names)
	if keep {
		s.raw = slices.Clone(region)
	}
	return s, nil
}

// transition returns the change from subscription from that a Delta request
// makes by subscribing to sub and unsubscribing from unsub.
func (f *floorSets) transition(from *nameSet, sub, unsub [][]byte) *transition {
	var h maphash.Hash
	h.SetSeed(floorSeed)
	for _, n := range sub {
		h.Write(n)
		h.WriteByte(0)
	}
	h.WriteByte(1)
	for _, n := range unsub {
		h.Write(n)
		h.WriteByte(0)
	}
	k := transKey{from: from, hash: h.Sum64(), sub: len(sub), unsub: len(unsub)}
	f.mu.Lock()
	tr, ok := f.trans[k]
	f.mu.Unlock()
	if ok {
		return tr
	}
	tr = &transition{sub: sortedStrings(sub)}
	gone := sortedStrings(unsub)
	names := slices.DeleteFunc(mergeSorted(from.list(), tr.sub), func(n string) bool {
		_, found := slices.BinarySearch(gone, n)
		return found
	})
	tr.to = &nameSet{names: names}
	f.mu.Lock()
	if len(f.trans) >= maxFloorSets {
		clear(f.trans)
	}
	f.trans[k] = tr
	f.mu.Unlock()
	return tr
}

func sortedStrings(bs [][]byte) []string {
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = string(b)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// mergeSorted returns the sorted union of sorted, unique a and b in a new
// slice.
func mergeSorted(a, b []string) []string {
	out := make([]string, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		switch {
		case a[i] < b[j]:
			out = append(out, a[i])
			i++
		case a[i] > b[j]:
			out = append(out, b[j])
			j++
		default:
			out = append(out, a[i])
			i++
			j++
		}
	}
	out = append(out, a[i:]...)
	return append(out, b[j:]...)
}

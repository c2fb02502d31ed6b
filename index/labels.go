package index

import (
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/puzpuzpuz/xsync/v4"
)

// Label is one interned key=value pair.
type Label struct {
	Key, Value Sym
}

// LabelSetID identifies an interned, sorted set of labels. The zero ID is the
// empty set. Pods of one Deployment share one ID, so a row pays 4 bytes for
// its labels however many there are.
type LabelSetID uint32

// LabelSets interns label sets. Like [Symbols] it is append-only: Intern is
// serialized, Get is lock-free and allocation-free.
type LabelSets struct {
	mu   sync.Mutex
	ids  *xsync.Map[string, LabelSetID] // canonical encoding → ID
	sets atomic.Pointer[[][]Label]      // ID → sorted labels; replaced on growth
}

// NewLabelSets returns a table holding only the empty set.
func NewLabelSets() *LabelSets {
	l := &LabelSets{ids: xsync.NewMap[string, LabelSetID]()}
	sets := make([][]Label, 1, 64)
	l.sets.Store(&sets)
	l.ids.Store("", 0)
	return l
}

// Intern returns the ID of the set of labels; order and duplicates in the
// input do not matter (a later duplicate key wins). Interning a known set
// allocates nothing.
func (l *LabelSets) Intern(labels []Label) LabelSetID {
	if len(labels) == 0 {
		return 0
	}
	var stack [8]Label
	sorted := append(stack[:0], labels...)
	slices.SortStableFunc(sorted, func(a, b Label) int { return int(a.Key) - int(b.Key) })
	// Keep the last value of a repeated key.
	out := sorted[:0]
	for i, lb := range sorted {
		if i+1 < len(sorted) && sorted[i+1].Key == lb.Key {
			continue
		}
		out = append(out, lb)
	}
	var kb [64]byte
	key := appendLabelKey(kb[:0], out)
	if id, ok := l.ids.Load(unsafe.String(unsafe.SliceData(key), len(key))); ok {
		return id // the map does not keep a key it only looks up
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if id, ok := l.ids.Load(string(key)); ok {
		return id
	}
	cur := *l.sets.Load()
	next := append(cur, slices.Clone(out)) // cur's readers see only their own length
	l.sets.Store(&next)
	id := LabelSetID(len(next) - 1)
	l.ids.Store(string(key), id)
	return id
}

// Get returns the sorted labels of id. The slice is shared: never modify it.
func (l *LabelSets) Get(id LabelSetID) []Label {
	return (*l.sets.Load())[id]
}

// Len returns the number of interned sets, the empty one included.
func (l *LabelSets) Len() int { return len(*l.sets.Load()) }

// Matches reports whether every label of selector is in labels. An empty
// selector matches everything (Kubernetes' semantics for a present but
// empty selector); callers that treat "no selector" differently check that
// first.
func (l *LabelSets) Matches(selector, labels LabelSetID) bool {
	if selector == 0 || selector == labels {
		return true
	}
	sets := *l.sets.Load()
	sel, have := sets[selector], sets[labels]
	j := 0
	for _, s := range sel {
		for j < len(have) && have[j].Key < s.Key {
			j++
		}
		if j == len(have) || have[j] != s {
			return false
		}
	}
	return true
}

func appendLabelKey(dst []byte, sorted []Label) []byte {
	for _, lb := range sorted {
		dst = append(dst, byte(lb.Key), byte(lb.Key>>8), byte(lb.Key>>16), byte(lb.Key>>24),
			byte(lb.Value), byte(lb.Value>>8), byte(lb.Value>>16), byte(lb.Value>>24))
	}
	return dst
}

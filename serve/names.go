package serve

import (
	"slices"
	"unsafe"
	"weak"

	"github.com/cespare/xxhash/v2"
	"github.com/puzpuzpuz/xsync/v4"
)

// sharedNames returns a canonical copy of a sorted subscription list, shared
// by every stream that subscribes to the same names. Sidecars of one class
// subscribe to identical EDS lists of thousands of cluster names; stored per
// stream they would dominate a connected proxy's memory. The list must not
// be modified after.
//
// The table holds weak pointers: a list no stream uses is collected, and its
// stale entry is dropped when the table is swept.
func sharedNames(names []string) []string {
	if len(names) < sharedNamesMin {
		return names
	}
	h := hashNames(names)
	if l, ok := nameLists.Load(h); ok {
		if p := l.first.Value(); p != nil {
			if shared := unsafe.Slice(p, l.n); slices.Equal(shared, names) {
				return shared
			}
		}
	}
	cp := slices.Clone(names)
	if nameLists.Size() >= nameListsSweepAt {
		nameLists.Range(func(k uint64, l nameList) bool {
			if l.first.Value() == nil {
				nameLists.Delete(k)
			}
			return true
		})
	}
	nameLists.Store(h, nameList{first: weak.Make(&cp[0]), n: len(cp)})
	return cp
}

// nameList is a weak reference to a shared list: to its first element,
// which keeps the whole backing array alive while any stream holds it.
type nameList struct {
	first weak.Pointer[string]
	n     int
}

const (
	sharedNamesMin   = 8 // short lists are not worth a lookup
	nameListsSweepAt = 4096
)

var nameLists = xsync.NewMap[uint64, nameList]()

func hashNames(names []string) uint64 {
	var d xxhash.Digest
	d.Reset()
	for _, n := range names {
		_, _ = d.WriteString(n)
		_, _ = d.Write([]byte{0})
	}
	return d.Sum64()
}

package serve

import (
	"slices"
	"unsafe"

	"github.com/cespare/xxhash/v2"
)

// sharedNames returns a canonical copy of a sorted subscription list, shared
// by every stream that subscribes to the same names. Sidecars of one class
// subscribe to identical EDS lists of thousands of cluster names; stored per
// stream they would dominate a connected proxy's memory. The list must not
// be modified after.
//
// The table is weak (weak_table.go): a list no stream uses is collected
// and its entry deleted. The canonical copy shares the strings of names,
// which must not pin a request: SotW names are detached first
// (detachNames), Delta names are allocated one by one by the decoder.
func sharedNames(names []string) []string {
	if len(names) < sharedNamesMin {
		return names
	}
	h := hashNames(names)
	p, n, loaded := nameLists.get(h, func() (*string, int) {
		cp := slices.Clone(names)
		return &cp[0], len(cp)
	})
	if shared := unsafe.Slice(p, n); !loaded || slices.Equal(shared, names) {
		return shared
	}
	return names // a digest collision: not shared
}

const (
	sharedNamesMin = 8 // short lists are not worth a lookup
	maxNameLists   = 16384
)

var nameLists = newWeakTable[uint64, string](maxNameLists)

// detachNames returns a copy of names whose strings share one new buffer.
// A list kept past its request must not pin the request: SotW names are
// substrings of the whole request message (request_decode.go), which may
// carry megabytes of other fields.
func detachNames(names []string) []string {
	if names == nil {
		return nil
	}
	n := 0
	for _, s := range names {
		n += len(s)
	}
	buf := make([]byte, 0, n)
	for _, s := range names {
		buf = append(buf, s...)
	}
	all := unsafe.String(unsafe.SliceData(buf), len(buf))
	out := make([]string, len(names))
	off := 0
	for i, s := range names {
		out[i] = all[off : off+len(s)]
		off += len(s)
	}
	return out
}

func hashNames(names []string) uint64 {
	var d xxhash.Digest
	d.Reset()
	for _, n := range names {
		_, _ = d.WriteString(n)
		_, _ = d.Write([]byte{0})
	}
	return d.Sum64()
}

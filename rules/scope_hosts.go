package rules

import (
	"math/bits"
	"slices"
	"strings"
	"sync"

	"github.com/pilotfish-mesh/pilotfish/index"
)

// scopeHosts orders a scope's candidate services by hostname. Comparing
// hostnames through the rows and the symbol table (two rows and two to four
// symbols read per comparison) was over half of a scope's cost; here each
// candidate gets
// one integer key, the 8 bytes of its hostname after the prefix all
// candidates share, read big-endian, with the candidate's position in the
// low bits, and the integers are sorted. Runs of equal bytes (istio-bench's
// "random-N.host.example" after an unrelated "example.com", a namespace's
// "NAME.NS.svc...") are ordered the same way past those bytes.
type scopeHosts struct {
	hs   []scopeHost
	keys []uint64
}

type scopeHost struct {
	host, ns index.Sym
	id       index.ServiceID
}

// scopeHostsPool recycles NewScope's scratch lists (no pointers: the GC
// never scans them).
var scopeHostsPool = sync.Pool{New: func() any { return new(scopeHosts) }}

func (o *scopeHosts) add(id index.ServiceID, svc *index.Service) {
	o.hs = append(o.hs, scopeHost{host: svc.Key.Host, ns: svc.Key.Namespace, id: id})
}

// sort orders the candidates by hostname string (o.keys, read with
// o.at); candidates of one host end up adjacent, in no particular order.
func (o *scopeHosts) sort(snap *index.Snapshot) {
	n := len(o.hs)
	o.keys = slices.Grow(o.keys[:0], n)[:n]
	for i := range o.keys {
		o.keys[i] = uint64(i)
	}
	if n == 0 {
		return
	}
	pos := uint(bits.Len(uint(n - 1)))
	o.order(snap, o.keys, 0, pos)
	for i := range o.keys {
		o.keys[i] &= 1<<pos - 1
	}
}

// order sorts keys, whose low pos bits are positions in o.hs, by hostname,
// knowing that their hostnames share at least their first from bytes. It
// keys them by the bytes after the prefix they all share, sorts the
// integers, and orders each run of equal bytes the same way past them.
func (o *scopeHosts) order(snap *index.Snapshot, keys []uint64, from int, pos uint) {
	mask := uint64(1)<<pos - 1
	h0 := o.hs[keys[0]&mask].host
	first := snap.String(h0)
	shared, same := len(first), true
	for _, k := range keys[1:] {
		if h := o.hs[k&mask].host; h != h0 {
			shared, same = commonPrefix(first[:shared], snap.String(h)), false
			if shared == 0 {
				break
			}
		}
	}
	switch {
	case same:
		return
	case shared < from:
		// Only a NUL byte can tie with zero padding: no progress, so
		// compare the strings.
		slices.SortFunc(keys, func(a, b uint64) int {
			return strings.Compare(snap.String(o.hs[a&mask].host), snap.String(o.hs[b&mask].host))
		})
		return
	}
	for i, k := range keys {
		keys[i] = bigEndian8(snap.String(o.hs[k&mask].host)[shared:])>>pos<<pos | k&mask
	}
	slices.Sort(keys)
	next := shared + int(64-pos)/8 // whole bytes a run of equal keys shares
	for i := 0; i < len(keys); {
		j := i + 1
		for j < len(keys) && keys[j]>>pos == keys[i]>>pos {
			j++
		}
		if j-i > 1 {
			o.order(snap, keys[i:j], next, pos)
		}
		i = j
	}
}

// at returns the i-th candidate in hostname order, after sort.
func (o *scopeHosts) at(i int) *scopeHost { return &o.hs[o.keys[i]] }

func (o *scopeHosts) reset() {
	o.hs, o.keys = o.hs[:0], o.keys[:0]
}

// bigEndian8 reads the first 8 bytes of s as a big-endian integer, padding
// a shorter s with zeros (a tie at worst, which order resolves).
func bigEndian8(s string) uint64 {
	if len(s) >= 8 {
		return uint64(s[0])<<56 | uint64(s[1])<<48 | uint64(s[2])<<40 | uint64(s[3])<<32 |
			uint64(s[4])<<24 | uint64(s[5])<<16 | uint64(s[6])<<8 | uint64(s[7])
	}
	var v uint64
	for i := range len(s) {
		v |= uint64(s[i]) << (56 - 8*i)
	}
	return v
}

// commonPrefix returns the length of the longest common prefix of a and b.
func commonPrefix(a, b string) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

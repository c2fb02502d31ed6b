package index

import (
	"encoding/binary"
	"math/bits"
	"net/netip"
)

// mix64 is a fast, well-distributed mix of one 64-bit value (the finalizer
// of SplitMix64), used to shard persistent maps by small integer keys.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// hasher accumulates a row's content hash. Rows are hashed field by field,
// never through reflection or encoding, one multiply-rotate step per 64-bit
// word (the row fields are small integers and addresses), so hashing is a
// few nanoseconds per field and allocation free. The hash detects changes
// between versions of one row; it is not meant to resist crafted inputs.
type hasher struct {
	h uint64
}

func newHasher() hasher { return hasher{h: 0x243f6a8885a308d3} }

func (h *hasher) u64(v uint64) {
	h.h = bits.RotateLeft64((h.h^v)*0x9e3779b97f4a7c15, 29) + 0x85ebca6b
}

func (h *hasher) u32(v uint32) { h.u64(uint64(v)) }

// pair hashes two 32-bit fields (symbols, IDs, small scalars) as one word:
// each step of the hash is a serial multiply, so rows hash their fields
// two by two.
func (h *hasher) pair(a, b uint32) { h.u64(uint64(a)<<32 | uint64(b)) }

// bit is a flag as a word's bit: flags share a word with other scalars.
func bit(v bool) uint64 {
	if v {
		return 1
	}
	return 0
}

func (h *hasher) addr(a netip.Addr) {
	b := a.As16()
	h.u64(binary.LittleEndian.Uint64(b[:8]))
	h.u64(binary.LittleEndian.Uint64(b[8:]) ^ uint64(a.BitLen())<<56)
}

func (h *hasher) sum() uint64 { return mix64(h.h) }

// combineHash folds b into a, order-sensitive.
func combineHash(a, b uint64) uint64 {
	return mix64(bits.RotateLeft64(a, 5) ^ b)
}

// addrKey hashes an address to a secondary-index key.
func addrKey(a netip.Addr) uint64 {
	b := a.As16()
	return mix64(binary.LittleEndian.Uint64(b[:8])) ^ binary.LittleEndian.Uint64(b[8:])
}

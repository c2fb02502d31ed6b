package index

import (
	"encoding/binary"
	"math/bits"
	"net/netip"

	"github.com/cespare/xxhash/v2"
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
// never through reflection or encoding, so hashing is cheap and allocation
// free on the writer's path.
type hasher struct {
	d   xxhash.Digest
	buf [8]byte
}

func newHasher() hasher {
	var h hasher
	h.d.Reset()
	return h
}

func (h *hasher) u64(v uint64) {
	binary.LittleEndian.PutUint64(h.buf[:], v)
	_, _ = h.d.Write(h.buf[:])
}

func (h *hasher) u32(v uint32) { h.u64(uint64(v)) }
func (h *hasher) sym(v Sym)    { h.u64(uint64(v)) }
func (h *hasher) boolean(v bool) {
	if v {
		h.u64(1)
	} else {
		h.u64(0)
	}
}

func (h *hasher) addr(a netip.Addr) {
	b := a.As16()
	_, _ = h.d.Write(b[:])
	h.u64(uint64(a.BitLen()))
}

func (h *hasher) sum() uint64 { return h.d.Sum64() }

// combineHash folds b into a, order-sensitive.
func combineHash(a, b uint64) uint64 {
	return mix64(bits.RotateLeft64(a, 5) ^ b)
}

// addrKey hashes an address to a secondary-index key.
func addrKey(a netip.Addr) uint64 {
	b := a.As16()
	return mix64(binary.LittleEndian.Uint64(b[:8])) ^ binary.LittleEndian.Uint64(b[8:])
}

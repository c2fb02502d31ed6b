package encode

import (
	"encoding/binary"
	"math"

	"github.com/cespare/xxhash/v2"
)

// Hasher builds a key's hash field by field. Every key's Hash method feeds
// every field it has; TestKeysHashEveryField checks that by reflection.
// A Hasher lives on the stack: Hash allocates nothing.
//
// Fields are gathered in buf and handed to xxhash a buffer at a time (or,
// for a key that fits, in one xxhash.Sum64): a Digest.Write per 8-byte
// field cost more than the hashing itself, and a warm push hashes one key
// per resource. The bytes hashed are the same either way: the field values
// in order, little-endian (8 bytes for U64, Int and F64, 4 for U32, 1 for
// Bool), strings preceded by their length.
type Hasher struct {
	d       xxhash.Digest
	flushed bool // d holds bytes: buf continues them
	n       int
	buf     [hasherBufLen]byte
}

const hasherBufLen = 256

// NewHasher returns a hasher seeded with a key type's tag, so that keys of
// different types with equal fields hash differently.
func NewHasher(tag string) Hasher {
	var h Hasher
	h.Str(tag)
	return h
}

// flush hands buf to the digest.
func (h *Hasher) flush() {
	if !h.flushed {
		h.d.Reset()
		h.flushed = true
	}
	_, _ = h.d.Write(h.buf[:h.n])
	h.n = 0
}

func (h *Hasher) U64(v uint64) {
	if h.n+8 > hasherBufLen {
		h.flush()
	}
	binary.LittleEndian.PutUint64(h.buf[h.n:], v)
	h.n += 8
}

// U32 feeds 4 bytes: most key fields are IDs, ports and enums, and a key
// whose fields fit the buffer is hashed in one call.
func (h *Hasher) U32(v uint32) {
	if h.n+4 > hasherBufLen {
		h.flush()
	}
	binary.LittleEndian.PutUint32(h.buf[h.n:], v)
	h.n += 4
}

func (h *Hasher) Int(v int)     { h.U64(uint64(v)) }
func (h *Hasher) F64(v float64) { h.U64(math.Float64bits(v)) }

// Bool feeds one byte.
func (h *Hasher) Bool(v bool) {
	if h.n+1 > hasherBufLen {
		h.flush()
	}
	h.buf[h.n] = 0
	if v {
		h.buf[h.n] = 1
	}
	h.n++
}

// Str hashes a string with its length, so that ("ab","c") ≠ ("a","bc").
func (h *Hasher) Str(s string) {
	h.U64(uint64(len(s)))
	if h.n+len(s) > hasherBufLen {
		h.flush()
		if len(s) > hasherBufLen {
			_, _ = h.d.WriteString(s)
			return
		}
	}
	h.n += copy(h.buf[h.n:], s)
}

// Strs hashes a list of strings with its length.
func (h *Hasher) Strs(ss []string) {
	h.U64(uint64(len(ss)))
	for _, s := range ss {
		h.Str(s)
	}
}

// Sum returns the hash of everything fed so far; feeding may go on.
func (h *Hasher) Sum() uint64 {
	if !h.flushed {
		return xxhash.Sum64(h.buf[:h.n])
	}
	d := h.d
	_, _ = d.Write(h.buf[:h.n])
	return d.Sum64()
}

package encode

import (
	"encoding/binary"
	"math"

	"github.com/cespare/xxhash/v2"
)

// Hasher builds a key's hash field by field. Every key's Hash method feeds
// every field it has; TestKeysHashEveryField checks that by reflection.
// A Hasher lives on the stack: Hash allocates nothing.
type Hasher struct {
	d   xxhash.Digest
	buf [8]byte
}

// NewHasher returns a hasher seeded with a key type's tag, so that keys of
// different types with equal fields hash differently.
func NewHasher(tag string) Hasher {
	var h Hasher
	h.d.Reset()
	h.Str(tag)
	return h
}

func (h *Hasher) U64(v uint64) {
	binary.LittleEndian.PutUint64(h.buf[:], v)
	_, _ = h.d.Write(h.buf[:])
}

func (h *Hasher) U32(v uint32)  { h.U64(uint64(v)) }
func (h *Hasher) Int(v int)     { h.U64(uint64(v)) }
func (h *Hasher) F64(v float64) { h.U64(math.Float64bits(v)) }

func (h *Hasher) Bool(v bool) {
	if v {
		h.U64(1)
	} else {
		h.U64(0)
	}
}

// Str hashes a string with its length, so that ("ab","c") ≠ ("a","bc").
func (h *Hasher) Str(s string) {
	h.U64(uint64(len(s)))
	_, _ = h.d.WriteString(s)
}

// Strs hashes a list of strings with its length.
func (h *Hasher) Strs(ss []string) {
	h.U64(uint64(len(ss)))
	for _, s := range ss {
		h.Str(s)
	}
}

func (h *Hasher) Sum() uint64 { return h.d.Sum64() }

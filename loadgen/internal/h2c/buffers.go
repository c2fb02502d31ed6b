package h2c

import (
	"math/bits"
	"sync"

	"google.golang.org/grpc/mem"
)

// keptBuffer is the most a stream keeps between messages, for each of its
// receive and send buffers; larger ones go back to the shared pool, so
// that ten thousand idle streams do not each pin their largest push.
const keptBuffer = 4 << 10

// Size classes of pooled buffers: powers of two from 4 KiB to 64 MiB.
const (
	poolMinShift = 12
	poolClasses  = 15
)

var pools [poolClasses]sync.Pool // of *[]byte

// getBuf returns a buffer of length n, from the pool when one fits.
func getBuf(n int) []byte {
	c := max(bits.Len(uint(max(n, 1)-1))-poolMinShift, 0)
	if c >= poolClasses {
		return make([]byte, n)
	}
	if p, ok := pools[c].Get().(*[]byte); ok {
		return (*p)[:n]
	}
	return make([]byte, n, 1<<(c+poolMinShift))
}

// putBuf returns b to the pool if it is one of its classes.
func putBuf(b []byte) {
	n := cap(b)
	c := bits.TrailingZeros(uint(n)) - poolMinShift
	if n&(n-1) != 0 || c < 0 || c >= poolClasses {
		return
	}
	b = b[:0]
	pools[c].Put(&b)
}

// keepSmall returns b emptied if a stream may keep it, else gives it back
// to the pool and returns nil.
func keepSmall(b []byte) []byte {
	if cap(b) > keptBuffer {
		putBuf(b)
		return nil
	}
	return b[:0]
}

// messageReader reads a message as sent: the 5-byte gRPC prefix, then the
// marshaled buffers.
type messageReader struct {
	prefix []byte
	data   mem.BufferSlice
	buf    int // index in data of the buffer being read
	off    int // offset in it
}

func (r *messageReader) left() int {
	n := len(r.prefix)
	for i := r.buf; i < len(r.data); i++ {
		n += r.data[i].Len()
	}
	return n - r.off
}

// appendTo appends the next n bytes to b.
func (r *messageReader) appendTo(b []byte, n int) []byte {
	if k := min(n, len(r.prefix)); k > 0 {
		b = append(b, r.prefix[:k]...)
		r.prefix = r.prefix[k:]
		n -= k
	}
	for n > 0 && r.buf < len(r.data) {
		d := r.data[r.buf].ReadOnlyData()[r.off:]
		k := min(n, len(d))
		b = append(b, d[:k]...)
		n -= k
		r.off += k
		if r.off == len(r.data[r.buf].ReadOnlyData()) {
			r.buf, r.off = r.buf+1, 0
		}
	}
	return b
}

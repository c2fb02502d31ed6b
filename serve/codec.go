package serve

import (
	"errors"
	"fmt"
	"math/bits"
	"sync"
	"unsafe"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	protoenc "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
)

// ServerOptions returns the grpc.ServerOptions an XDSServer needs on the
// *grpc.Server it is registered on: the raw-bytes codec (a superset of
// grpc-go's proto codec, so other services on the same server — CA,
// health, reflection — are unaffected), and connection buffers sized for
// many mostly idle streams. gRPC otherwise keeps a 32 KiB read buffer and
// a 32 KiB write buffer per connection for its whole life, more than all
// of a proxy's own state here: xDS connections are idle between pushes,
// so the write buffer goes back to a shared pool after each flush, and
// the read buffer is 512 bytes: enough for a frame header and a typical
// ACK in one read system call instead of two (header, then payload; 7% of
// the server's CPU per endpoint push measured at 2,000 proxies with a 4 KiB
// buffer), while a large request (a SotW EDS ACK names every cluster)
// bypasses the buffer and is read straight into its own.
//
// The receive windows are fixed (1 MiB, far above any request), which
// turns off gRPC's BDP estimation: with it on, every request a proxy sends
// (each ACK) made the server send a PING and read its ACK, two more
// syscalls per proxy per push on each side.
func ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ForceServerCodecV2(rawCodec{}),
		grpc.SharedWriteBuffer(true),
		grpc.ReadBufferSize(serverReadBuffer),
		grpc.InitialWindowSize(serverWindow),
		grpc.InitialConnWindowSize(serverWindow),
	}
}

// serverReadBuffer is the size of each connection's read buffer.
const serverReadBuffer = 512

// serverWindow is the stream and connection receive window.
const serverWindow = 1 << 20

// rawMessage is an already encoded protobuf message, sent as its bytes. The
// codec hands buf to gRPC, which returns it to pool once written, so a
// rawMessage is good for one SendMsg: Marshal clears it.
type rawMessage struct {
	buf  *[]byte
	pool mem.BufferPool
	// shared, when set, is sent before buf: an immutable body shared by
	// every stream that sends the same response (see sharedBody). It is
	// never pooled or freed by gRPC.
	shared []byte
}

var errRawReused = errors.New("serve: raw message already sent")

// vtUnmarshaler is implemented by vtprotobuf-generated messages (build tag
// vtprotobuf). go-control-plane v1.40 generates only the marshal half
// (MarshalVTStrict, SizeVT) for the discovery messages, so requests decode
// with proto.Unmarshal today; this picks UnmarshalVT up without code changes
// the day it is generated.
type vtUnmarshaler interface {
	UnmarshalVT([]byte) error
}

// rawCodec is grpc-go's proto codec plus two fast paths: a *rawMessage is
// written as its bytes without copying, and a request with UnmarshalVT is
// decoded with it. It keeps the name "proto" so the content-type on the wire
// stays application/grpc and unmodified clients interoperate.
type rawCodec struct{}

// protoCodec is grpc-go's registered proto codec, the fallback for every
// ordinary message.
var protoCodec = encoding.GetCodecV2(protoenc.Name)

func (rawCodec) Name() string { return protoenc.Name }

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	if m, ok := v.(*rawMessage); ok {
		if m.buf == nil {
			return nil, errRawReused
		}
		b := mem.NewBuffer(m.buf, m.pool)
		m.buf = nil
		if m.shared != nil {
			shared := mem.SliceBuffer(m.shared)
			m.shared = nil
			return mem.BufferSlice{shared, b}, nil
		}
		return mem.BufferSlice{b}, nil
	}
	return protoCodec.Marshal(v)
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if r, ok := v.(*discoveryv3.DiscoveryRequest); ok {
		// One copy out of the frames, into the string the decoded names
		// are substrings of: a SotW ACK repeats the whole subscription
		// (tens of KiB for a thousand EDS names, in several frames), and
		// joining it in a pooled buffer first cost a second copy and the
		// default pool's zeroing of its 64 KiB tier.
		if err := decodeDiscoveryRequestOwned(ownedString(data), r); err != nil {
			return fmt.Errorf("serve: unmarshal %T: %w", v, err)
		}
		return nil
	}
	m, ok := v.(vtUnmarshaler)
	if !ok {
		return protoCodec.Unmarshal(data, v)
	}
	buf := data.MaterializeToBuffer(bufPool) // no zeroing: UnmarshalVT reads len bytes only
	defer buf.Free()
	if err := m.UnmarshalVT(buf.ReadOnlyData()); err != nil {
		return fmt.Errorf("serve: unmarshal %T: %w", v, err)
	}
	return nil
}

// bufPool is where assembled responses live. gRPC returns each buffer to it
// once written, so the next assembly of a similar size on any stream reuses
// it.
// ownedString copies data into a new string.
func ownedString(data mem.BufferSlice) string {
	n := data.Len()
	if n == 0 {
		return ""
	}
	b := make([]byte, n)
	data.CopyTo(b)
	return unsafe.String(unsafe.SliceData(b), n) // b is not written again
}

var bufPool mem.BufferPool = &respPool{}

// getBuf returns a pooled buffer of capacity at least n and length 0.
func getBuf(n int) *[]byte {
	b := bufPool.Get(n)
	*b = (*b)[:0]
	return b
}

// respPool is a mem.BufferPool of power-of-two size classes from 4 KiB to
// 64 MiB. Unlike grpc-go's default pool it does not zero buffers: assembly
// writes every byte up to len and nothing past len is ever read, while
// zeroing a 1 MiB tier for a 100 KiB response cost more than assembling it.
// The smallest class is above mem's pooling threshold (1 KiB): gRPC never
// returns a buffer below it, which would then be garbage after every send.
type respPool struct {
	classes [respClasses]sync.Pool // of *[]byte with cap 1<<(i+respMinShift)
}

const (
	respMinShift = 12 // 4 KiB
	respClasses  = 15 // up to 64 MiB; larger responses are not pooled
)

func (p *respPool) Get(n int) *[]byte {
	c := max(bits.Len(uint(n-1))-respMinShift, 0)
	if n <= 0 {
		c = 0
	}
	if c >= respClasses {
		b := make([]byte, n)
		return &b
	}
	if b, ok := p.classes[c].Get().(*[]byte); ok {
		*b = (*b)[:n]
		return b
	}
	b := make([]byte, n, 1<<(c+respMinShift))
	return &b
}

func (p *respPool) Put(b *[]byte) {
	n := cap(*b)
	c := bits.TrailingZeros(uint(n)) - respMinShift
	if n&(n-1) != 0 || c < 0 || c >= respClasses {
		return // not one of ours
	}
	p.classes[c].Put(b)
}

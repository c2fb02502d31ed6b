package serve

import (
	"time"

	"google.golang.org/grpc/encoding"

	"github.com/pilotfish-mesh/pilotfish/engine"
)

// Internals exported to the serve_test package.

var (
	EncodeControlPlane = encodeControlPlane
	SetDigest          = setDigest
	NonceIs            = nonceIs
)

// Codec is the raw-bytes codec ServerOptions installs.
func Codec() encoding.CodecV2 { return rawCodec{} }

// RawMessage wraps b (which the codec hands to gRPC) for Codec().Marshal.
func RawMessage(b []byte) any { return &rawMessage{buf: &b} }

// AppendSotW appends a DiscoveryResponse as a stream would send it.
func AppendSotW(dst []byte, version, nonce uint64, typeURL string, cp []byte, res []engine.Resource) []byte {
	h := wireHeader{version: version, nonce: nonce, typeURL: typeURL, controlPlane: cp}
	if n := sizeDiscoveryResponse(&h, res); n+len(dst) != len(appendDiscoveryResponse(dst, &h, res)) {
		panic("sizeDiscoveryResponse disagrees with appendDiscoveryResponse")
	}
	return appendDiscoveryResponse(dst, &h, res)
}

// AppendDelta appends a DeltaDiscoveryResponse as a stream would send it.
func AppendDelta(dst []byte, version, nonce uint64, typeURL string, cp []byte, res []engine.Resource, removed []string) []byte {
	h := wireHeader{version: version, nonce: nonce, typeURL: typeURL, controlPlane: cp}
	if n := sizeDeltaDiscoveryResponse(&h, res, removed); n+len(dst) != len(appendDeltaDiscoveryResponse(dst, &h, res, removed)) {
		panic("sizeDeltaDiscoveryResponse disagrees with appendDeltaDiscoveryResponse")
	}
	return appendDeltaDiscoveryResponse(dst, &h, res, removed)
}

// Encoder runs a stream's send path up to the network: digest, pooled
// buffer, assembly, codec, and gRPC's release of the buffer after writing.
type Encoder struct{ msg rawMessage }

// EncodeSotW encodes a SotW response of res and returns its size.
func (e *Encoder) EncodeSotW(nonce uint64, typeURL string, cp []byte, res []engine.Resource) int {
	h := wireHeader{version: setDigest(res), nonce: nonce, typeURL: typeURL, controlPlane: cp}
	buf := getBuf(sizeDiscoveryResponse(&h, res))
	*buf = appendDiscoveryResponse(*buf, &h, res)
	return e.encode(buf)
}

// EncodeDelta encodes a Delta response of res and removed and returns its
// size.
func (e *Encoder) EncodeDelta(nonce uint64, typeURL string, cp []byte, res []engine.Resource, removed []string) int {
	h := wireHeader{version: setDigest(res), nonce: nonce, typeURL: typeURL, controlPlane: cp}
	buf := getBuf(sizeDeltaDiscoveryResponse(&h, res, removed))
	*buf = appendDeltaDiscoveryResponse(*buf, &h, res, removed)
	return e.encode(buf)
}

func (e *Encoder) encode(buf *[]byte) int {
	e.msg = rawMessage{buf: buf, pool: bufPool}
	bs, err := rawCodec{}.Marshal(&e.msg)
	if err != nil {
		panic(err)
	}
	n := bs.Len()
	bs.Free()
	return n
}

// SetHTTPTimeouts shortens s's connection timeouts (before Start), so a
// test of slow clients runs in seconds; MaxHeaderBytes stays as served.
func SetHTTPTimeouts(s *HTTPServer, readHeader, read, idle time.Duration) {
	s.srv.ReadHeaderTimeout, s.srv.ReadTimeout, s.srv.IdleTimeout = readHeader, read, idle
}

package encode

import (
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// vtMarshaler is implemented by messages compiled with go-control-plane's
// vtprotobuf code (build tag vtprotobuf). Without the tag the assertion
// fails and marshaling falls back to proto.Marshal, so a plain
// `go build ./...` still works.
type vtMarshaler interface {
	SizeVT() int
	MarshalToSizedBufferVTStrict([]byte) (int, error)
}

// Any field numbers (google.protobuf.Any).
const (
	anyTypeURL protowire.Number = 1
	anyValue   protowire.Number = 2
)

// AppendAny appends m encoded as a google.protobuf.Any with typeURL to dst:
// the form in which a resource travels in DiscoveryResponse.resources and
// is cached.
func AppendAny(dst []byte, typeURL string, m proto.Message) ([]byte, error) {
	dst = protowire.AppendTag(dst, anyTypeURL, protowire.BytesType)
	dst = protowire.AppendString(dst, typeURL)
	dst = protowire.AppendTag(dst, anyValue, protowire.BytesType)
	if vt, ok := m.(vtMarshaler); ok {
		// The Any's value is length-prefixed: encode after a reserved
		// maximal varint, then move the bytes down when the size is known.
		var hdr [binaryMaxVarintLen64]byte
		start := len(dst)
		dst = append(dst, hdr[:]...)
		dst, err := marshalVT(dst, vt, m)
		if err != nil {
			return dst[:start], err
		}
		body := len(dst) - start - len(hdr)
		n := protowire.SizeVarint(uint64(body))
		protowire.AppendVarint(dst[start:start], uint64(body))
		copy(dst[start+n:], dst[start+len(hdr):])
		return dst[:start+n+body], nil
	}
	return appendAnySlow(dst, m)
}

func appendAnySlow(dst []byte, m proto.Message) ([]byte, error) {
	opts := proto.MarshalOptions{Deterministic: true}
	dst = protowire.AppendVarint(dst, uint64(opts.Size(m)))
	return opts.MarshalAppend(dst, m)
}

const binaryMaxVarintLen64 = 10

// appendMessage appends m's bare encoding (no Any) to dst, as AppendAny
// encodes a value.
func appendMessage(dst []byte, m proto.Message) ([]byte, error) {
	if vt, ok := m.(vtMarshaler); ok {
		return marshalVT(dst, vt, m)
	}
	return proto.MarshalOptions{Deterministic: true}.MarshalAppend(dst, m)
}

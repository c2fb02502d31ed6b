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
		n := vt.SizeVT()
		dst = protowire.AppendVarint(dst, uint64(n))
		start := len(dst)
		dst = append(dst, make([]byte, n)...)
		if _, err := vt.MarshalToSizedBufferVTStrict(dst[start:]); err != nil {
			return dst[:start], err
		}
		return dst, nil
	}
	return appendAnySlow(dst, m)
}

func appendAnySlow(dst []byte, m proto.Message) ([]byte, error) {
	opts := proto.MarshalOptions{Deterministic: true}
	dst = protowire.AppendVarint(dst, uint64(opts.Size(m)))
	return opts.MarshalAppend(dst, m)
}

package encode

import (
	"slices"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// vtprotobuf's marshalers write map entries in Go's random iteration
// order, so a message holding a map of two or more entries encodes to
// different bytes from one marshaling to the next, and from one replica to
// another. Versions name bytes and replicas must serve identical bytes, so
// such fields are encoded with proto's deterministic marshaling (which
// sorts map keys) — only those fields, so that the rest of the resource
// keeps vtprotobuf's speed. A message is the concatenation of its fields'
// encodings, so the two parts are simply appended.
//
// Where generated resources keep multi-entry maps is known: a cluster's
// istio metadata (a Struct of several fields) and, rarely, its typed
// extension protocol options. Every other map a generator builds has one
// entry, and Any values are marshaled deterministically where they are
// built (rtAny, clAny). A reflective search of whole resources cost more
// than marshaling them, so the check is per type; TestGeneratedBytesStable
// catches a generator that starts emitting an unsorted map elsewhere.

// marshalVT appends m's encoding to dst: vtprotobuf, with the fields that
// hold multi-entry maps encoded deterministically.
func marshalVT(dst []byte, vt vtMarshaler, m proto.Message) ([]byte, error) {
	if c, ok := m.(*clusterv3.Cluster); ok && clusterHasUnsortedMaps(c) {
		if len(c.TypedExtensionProtocolOptions) >= 2 {
			return proto.MarshalOptions{Deterministic: true}.MarshalAppend(dst, m)
		}
		// The cluster is this generation's own message: its metadata is
		// set aside while the rest is encoded, then appended with sorted
		// keys (field 25; fields may come in any order on the wire).
		md := c.Metadata
		c.Metadata = nil
		n := vt.SizeVT() // c, without its metadata
		start := len(dst)
		dst = slices.Grow(dst, n+clusterMetadataReserve)
		dst = dst[:start+n]
		_, err := vt.MarshalToSizedBufferVTStrict(dst[start:])
		c.Metadata = md
		if err != nil {
			return dst[:start], err
		}
		dst = protowire.AppendTag(dst, clusterMetadataField, protowire.BytesType)
		at := openLen(&dst)
		dst = appendMetadata(dst, md)
		return closeLen(dst, at), nil
	}
	return appendVT(dst, vt)
}

// clusterMetadataField is Cluster.metadata's field number;
// clusterMetadataReserve is room enough for a typical istio metadata.
const (
	clusterMetadataField   = 25
	clusterMetadataReserve = 160
)

func appendVT(dst []byte, vt vtMarshaler) ([]byte, error) {
	n := vt.SizeVT()
	start := len(dst)
	dst = slices.Grow(dst, n)[:start+n]
	if _, err := vt.MarshalToSizedBufferVTStrict(dst[start:]); err != nil {
		return dst[:start], err
	}
	return dst, nil
}

// clusterHasUnsortedMaps: c holds maps vtprotobuf would write in random
// order — its metadata (the istio Struct has several fields; encoding it
// sorted costs little), or several typed extension protocol options.
func clusterHasUnsortedMaps(c *clusterv3.Cluster) bool {
	return len(c.TypedExtensionProtocolOptions) >= 2 || c.Metadata != nil
}

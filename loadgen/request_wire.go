package loadgen

import (
	"slices"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/puzpuzpuz/xsync/v4"
)

// A SotW request repeats the whole subscription, as Envoy's do: an EDS ACK
// of a sidecar at 1,000 services carries a thousand cluster names. Built as
// a message and marshaled, those were two fifths of the client's CPU in an
// endpoint change at 10,000 proxies, so requests are written straight to
// the wire, with the encoded name list computed once per distinct list and
// shared by every proxy that subscribes to it.

// rawRequest is an already encoded request; rawCodec sends its bytes.
type rawRequest []byte

// Field numbers of envoy.service.discovery.v3.DiscoveryRequest.
const (
	fReqVersion  = 1
	fReqNode     = 2
	fReqNames    = 3
	fReqTypeURL  = 4
	fReqNonce    = 5
	fReqErrorDtl = 6
)

// encodeSotWRequest encodes a DiscoveryRequest whose resource_names are
// names (already encoded as repeated field 3).
func encodeSotWRequest(typeURL, version, nonce string, node *corev3.Node, names []byte, errDetail *statuspb.Status) (rawRequest, error) {
	var nodeB, errB []byte
	var err error
	if node != nil {
		if nodeB, err = proto.Marshal(node); err != nil {
			return nil, err
		}
	}
	if errDetail != nil {
		if errB, err = proto.Marshal(errDetail); err != nil {
			return nil, err
		}
	}
	b := make([]byte, 0, len(names)+len(nodeB)+len(errB)+len(typeURL)+len(version)+len(nonce)+32)
	if version != "" {
		b = protowire.AppendTag(b, fReqVersion, protowire.BytesType)
		b = protowire.AppendString(b, version)
	}
	if node != nil {
		b = protowire.AppendTag(b, fReqNode, protowire.BytesType)
		b = protowire.AppendBytes(b, nodeB)
	}
	b = append(b, names...)
	b = protowire.AppendTag(b, fReqTypeURL, protowire.BytesType)
	b = protowire.AppendString(b, typeURL)
	if nonce != "" {
		b = protowire.AppendTag(b, fReqNonce, protowire.BytesType)
		b = protowire.AppendString(b, nonce)
	}
	if errDetail != nil {
		b = protowire.AppendTag(b, fReqErrorDtl, protowire.BytesType)
		b = protowire.AppendBytes(b, errB)
	}
	return b, nil
}

// encodedNames is one name list as repeated field 3.
type encodedNames struct {
	ids []uint32 // the list (verification)
	b   []byte
}

type namesKey struct {
	hash uint64
	n    int
}

// encodeNames returns ids' names encoded as resource_names, shared by
// every caller with the same list. The result must not be modified.
func (s *symtab) encodeNames(ids []uint32) []byte {
	if len(ids) == 0 {
		return nil
	}
	k := namesKey{hash: hashIDs(ids), n: len(ids)}
	if e, ok := s.encoded.Load(k); ok && slices.Equal(e.ids, ids) {
		return e.b
	}
	var b []byte
	for _, id := range ids {
		b = protowire.AppendTag(b, fReqNames, protowire.BytesType)
		b = protowire.AppendString(b, s.name(id))
	}
	if s.encoded.Size() >= maxEncodedLists {
		s.encoded.Clear()
	}
	s.encoded.Store(k, &encodedNames{ids: slices.Clone(ids), b: b})
	return b
}

// maxEncodedLists bounds the shared lists: a few per proxy class and type.
const maxEncodedLists = 256

func newEncodedNames() *xsync.Map[namesKey, *encodedNames] {
	return xsync.NewMap[namesKey, *encodedNames]()
}

func hashIDs(ids []uint32) uint64 {
	h := uint64(len(ids)) * 0x9e3779b97f4a7c15
	for _, id := range ids {
		h = (h ^ uint64(id)) * 0x100000001b3
	}
	return h
}

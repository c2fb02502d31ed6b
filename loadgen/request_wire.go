package loadgen

import (
	"slices"
	"sync"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/puzpuzpuz/xsync/v4"
)

// Requests (SotW and Delta) are written straight to the wire, not built as
// messages and marshaled: a SotW request repeats the whole subscription, as
// Envoy's do, and an EDS ACK of a sidecar at 1,000 services carries a
// thousand cluster names. Built as a message and marshaled, those were two
// fifths of the client's CPU in an endpoint change at 10,000 proxies.
//
// A request is sent as two buffers: the scalar fields (version, node, type
// URL, nonce, error detail), written into a pooled buffer that gRPC returns
// to the pool once the frame is written, then resource_names as one encoded
// list computed once per distinct list and shared, read-only, by every
// proxy that subscribes to it. Protobuf parsers accept fields in any order.
// An ACK therefore allocates nothing of its own.

// rawRequest is an encoded request; rawCodec sends it. The proxy reuses
// one for every request: gRPC reads it only during SendMsg.
type rawRequest struct {
	head  *[]byte // from reqPool, handed to gRPC by Marshal
	names []byte  // shared resource_names (SotW), or nil
}

// Field numbers of envoy.service.discovery.v3.DiscoveryRequest.
const (
	fReqVersion  = 1
	fReqNode     = 2
	fReqNames    = 3
	fReqTypeURL  = 4
	fReqNonce    = 5
	fReqErrorDtl = 6
)

// Field numbers of envoy.service.discovery.v3.DeltaDiscoveryRequest.
const (
	fDReqNode        = 1
	fDReqTypeURL     = 2
	fDReqSubscribe   = 3
	fDReqUnsubscribe = 4
	fDReqNonce       = 6
	fDReqErrorDtl    = 7
)

// nackDetail is the error_detail of every NACK, a google.rpc.Status
// (code = 1, message = 2), encoded once.
var nackDetail = func() []byte {
	b := protowire.AppendTag(nil, 1, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(codes.InvalidArgument))
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	return protowire.AppendString(b, nackMessage)
}()

// reqPool holds request buffers. Their capacity is above gRPC's pooling
// threshold (mem.NewBuffer keeps smaller buffers out of pools), so gRPC
// puts each back here once its frame is written.
var reqPool = &requestPool{}

const reqBufMin = 2 << 10

type requestPool struct{ p sync.Pool }

// Get returns a buffer of length n.
func (rp *requestPool) Get(n int) *[]byte {
	if b, ok := rp.p.Get().(*[]byte); ok && cap(*b) >= n {
		*b = (*b)[:n]
		return b
	}
	b := make([]byte, n, max(n, reqBufMin))
	return &b
}

func (rp *requestPool) Put(b *[]byte) {
	if cap(*b) <= 64<<10 { // a Node of huge metadata: let it go
		rp.p.Put(b)
	}
}

var _ mem.BufferPool = reqPool

// reqWriter appends one request's scalar fields to a pooled buffer.
type reqWriter struct{ b *[]byte }

func newReqWriter() reqWriter { return reqWriter{b: reqPool.Get(0)} }

func (w reqWriter) bytes(num protowire.Number, v []byte) {
	*w.b = protowire.AppendTag(*w.b, num, protowire.BytesType)
	*w.b = protowire.AppendBytes(*w.b, v)
}

func (w reqWriter) string(num protowire.Number, v string) {
	*w.b = protowire.AppendTag(*w.b, num, protowire.BytesType)
	*w.b = protowire.AppendString(*w.b, v)
}

// node writes a Node; nil writes nothing.
func (w reqWriter) node(num protowire.Number, node *corev3.Node) error {
	if node == nil {
		return nil
	}
	b, err := proto.Marshal(node)
	if err != nil {
		return err
	}
	w.bytes(num, b)
	return nil
}

// release returns r's buffer to the pool if gRPC did not take it.
func (r *rawRequest) release() {
	if r.head != nil {
		reqPool.Put(r.head)
	}
	*r = rawRequest{}
}

// sotwRequest is a DiscoveryRequest's fields; names is resource_names,
// already encoded (encodeNames).
type sotwRequest struct {
	typeURL string
	version string
	nonce   []byte
	node    *corev3.Node
	names   []byte
	nack    bool
}

// encode encodes q into out.
func (q *sotwRequest) encode(out *rawRequest) error {
	w := newReqWriter()
	if q.version != "" {
		w.string(fReqVersion, q.version)
	}
	if err := w.node(fReqNode, q.node); err != nil {
		reqPool.Put(w.b)
		return err
	}
	w.string(fReqTypeURL, q.typeURL)
	if len(q.nonce) > 0 {
		w.bytes(fReqNonce, q.nonce)
	}
	if q.nack {
		w.bytes(fReqErrorDtl, nackDetail)
	}
	*out = rawRequest{head: w.b, names: q.names}
	return nil
}

// deltaRequest is a DeltaDiscoveryRequest's fields.
type deltaRequest struct {
	typeURL                string
	nonce                  []byte
	node                   *corev3.Node
	subscribe, unsubscribe []uint32 // names, as IDs
	nack                   bool
}

// encode encodes q into out, looking names up in syms.
func (q *deltaRequest) encode(syms *symtab, out *rawRequest) error {
	w := newReqWriter()
	if err := w.node(fDReqNode, q.node); err != nil {
		reqPool.Put(w.b)
		return err
	}
	w.string(fDReqTypeURL, q.typeURL)
	for _, id := range q.subscribe {
		w.string(fDReqSubscribe, syms.name(id))
	}
	for _, id := range q.unsubscribe {
		w.string(fDReqUnsubscribe, syms.name(id))
	}
	if len(q.nonce) > 0 {
		w.bytes(fDReqNonce, q.nonce)
	}
	if q.nack {
		w.bytes(fDReqErrorDtl, nackDetail)
	}
	*out = rawRequest{head: w.b}
	return nil
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

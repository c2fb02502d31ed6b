package bench

import (
	"fmt"
	"strconv"

	"google.golang.org/grpc/encoding"
	protoenc "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/pilotfish-mesh/pilotfish/engine"
)

// The floor's wire format: responses are assembled once with protowire and
// written as they are; requests are walked in place for the few fields the
// protocol needs, without a proto.Unmarshal.

// Field numbers of the discovery messages (envoy/service/discovery/v3).
const (
	fSotWReqNames  = 3 // DiscoveryRequest.resource_names
	fSotWReqType   = 4 // DiscoveryRequest.type_url
	fSotWReqNonce  = 5 // DiscoveryRequest.response_nonce
	fSotWReqDetail = 6 // DiscoveryRequest.error_detail

	fDeltaReqType   = 2 // DeltaDiscoveryRequest.type_url
	fDeltaReqSub    = 3 // DeltaDiscoveryRequest.resource_names_subscribe
	fDeltaReqUnsub  = 4 // DeltaDiscoveryRequest.resource_names_unsubscribe
	fDeltaReqNonce  = 6 // DeltaDiscoveryRequest.response_nonce
	fDeltaReqDetail = 7 // DeltaDiscoveryRequest.error_detail

	fRespVersion   = 1 // DiscoveryResponse.version_info, Delta's system_version_info
	fRespResources = 2 // resources (Any; Delta: Resource)
	fRespType      = 4 // type_url
	fRespNonce     = 5 // nonce
	fRespRemoved   = 6 // DeltaDiscoveryResponse.removed_resources

	fResVersion = 1 // Resource.version
	fResAny     = 2 // Resource.resource
	fResName    = 3 // Resource.name
)

// floorCodec is grpc-go's proto codec plus the floor's two fast paths: a
// *wireBody is written as its shared bytes, and a *floorRequest is walked
// in place. It replaces serve's codec on the floor's grpc.Server (the last
// ForceServerCodecV2 wins); every transport setting of serve.ServerOptions
// stays.
type floorCodec struct{}

var floorProtoCodec = encoding.GetCodecV2(protoenc.Name)

func (floorCodec) Name() string { return protoenc.Name }

func (floorCodec) Marshal(v any) (mem.BufferSlice, error) {
	if b, ok := v.(*wireBody); ok {
		// Shared by every stream: gRPC only reads a BufferSlice and
		// SliceBuffer's Ref and Free do nothing.
		return b.bs, nil
	}
	return floorProtoCodec.Marshal(v)
}

func (floorCodec) Unmarshal(data mem.BufferSlice, v any) error {
	r, ok := v.(*floorRequest)
	if !ok {
		return floorProtoCodec.Unmarshal(data, v)
	}
	var b []byte
	if len(data) == 1 {
		b = data[0].ReadOnlyData()
	} else {
		if n := data.Len(); cap(r.scratch) < n {
			r.scratch = make([]byte, n)
		}
		b = r.scratch[:data.Len()]
		data.CopyTo(b)
	}
	if err := r.decode(b); err != nil {
		return fmt.Errorf("bench: floor: %w", err)
	}
	return nil
}

// wireBody is an encoded response, nonce included, shared by every stream
// it is sent on: nonces need only be unique within a stream, and each body
// takes a fresh one from the server's counter. A nil bs is nothing to send.
type wireBody struct {
	bs mem.BufferSlice
}

func newWireBody(b []byte) *wireBody {
	if b == nil {
		return &wireBody{}
	}
	return &wireBody{bs: mem.BufferSlice{mem.SliceBuffer(b)}}
}

func (b *wireBody) empty() bool { return b.bs == nil }

// floorResource is one resource of one version, encoded once.
type floorResource struct {
	name  string
	any   []byte // the Any, as a SotW response carries it
	delta []byte // the Resource (name, version, Any), as a Delta response carries it
}

func encodeFloorResource(name string, m proto.Message, version uint64) (*floorResource, error) {
	a, err := anypb.New(m)
	if err != nil {
		return nil, fmt.Errorf("bench: floor: resource %s: %w", name, err)
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(a)
	if err != nil {
		return nil, fmt.Errorf("bench: floor: resource %s: %w", name, err)
	}
	var d []byte
	d = protowire.AppendTag(d, fResName, protowire.BytesType)
	d = protowire.AppendString(d, name)
	d = protowire.AppendTag(d, fResVersion, protowire.BytesType)
	d = protowire.AppendString(d, strconv.FormatUint(version, 10))
	d = protowire.AppendTag(d, fResAny, protowire.BytesType)
	d = protowire.AppendBytes(d, b)
	return &floorResource{name: name, any: b, delta: d}, nil
}

// appendResponse appends a DiscoveryResponse (delta: a
// DeltaDiscoveryResponse) of res, and in Delta the names removed.
func appendResponse(dst []byte, delta bool, typeURL string, version, nonce uint64, res []*floorResource, removed []string) []byte {
	var num [20]byte
	dst = protowire.AppendTag(dst, fRespVersion, protowire.BytesType)
	dst = protowire.AppendBytes(dst, strconv.AppendUint(num[:0], version, 10))
	for _, r := range res {
		dst = protowire.AppendTag(dst, fRespResources, protowire.BytesType)
		if delta {
			dst = protowire.AppendBytes(dst, r.delta)
		} else {
			dst = protowire.AppendBytes(dst, r.any)
		}
	}
	dst = protowire.AppendTag(dst, fRespType, protowire.BytesType)
	dst = protowire.AppendString(dst, typeURL)
	dst = protowire.AppendTag(dst, fRespNonce, protowire.BytesType)
	dst = protowire.AppendBytes(dst, strconv.AppendUint(num[:0], nonce, 10))
	for _, n := range removed {
		dst = protowire.AppendTag(dst, fRespRemoved, protowire.BytesType)
		dst = protowire.AppendString(dst, n)
	}
	return dst
}

// floorTypeIndex returns the index in xdsTypes of typeURL, -1 if it is none
// of them.
func floorTypeIndex(typeURL []byte) int {
	switch string(typeURL) {
	case engine.TypeEndpoint:
		return 0
	case engine.TypeCluster:
		return 1
	case engine.TypeListener:
		return 2
	case engine.TypeRoute:
		return 3
	}
	return -1
}

// floorRequest is the receive target of floorCodec: a DiscoveryRequest or
// DeltaDiscoveryRequest reduced to what the floor acts on. One per stream,
// reused; decode resolves the names against the stream's subscription, so
// that an ACK repeating a SotW subscription costs a compare, not a parse.
type floorRequest struct {
	st      *floorStream
	t       int  // xdsTypes index, -1: another type
	nonce   bool // response_nonce set: an ACK or NACK of an earlier response
	nack    bool // error_detail set
	set     *nameSet
	tr      *transition // Delta: the subscription change, nil if none
	scratch []byte      // a request that came in several buffers
	sub     [][]byte    // Delta subscribe names (within the request bytes)
	unsub   [][]byte
}

func (r *floorRequest) decode(b []byte) error {
	r.t, r.nonce, r.nack, r.set, r.tr = -1, false, false, nil, nil
	if r.st.delta {
		return r.decodeDelta(b)
	}
	return r.decodeSotW(b)
}

// decodeSotW walks a DiscoveryRequest. The resource_names fields are
// located as one region: loadgen (like Envoy) sends them contiguously, and
// a region equal to the current subscription's is the same subscription.
func (r *floorRequest) decodeSotW(all []byte) error {
	var typeURL []byte
	start, end, names := -1, -1, 0
	pure := true // no other field inside the names region
	for b := all; len(b) > 0; {
		at := len(all) - len(b)
		num, typ, v, rest, err := consumeField(b)
		if err != nil {
			return err
		}
		b = rest
		switch num {
		case fSotWReqNames:
			if start < 0 {
				start = at
			} else if end != at {
				pure = false
			}
			end = len(all) - len(b)
			names++
		case fSotWReqType:
			typeURL = v
		case fSotWReqNonce:
			r.nonce = len(v) > 0
		case fSotWReqDetail:
			r.nack = typ == protowire.BytesType
		}
	}
	r.t = floorTypeIndex(typeURL)
	if r.t < 0 || xdsWildcard(r.t) || names == 0 {
		return nil
	}
	region := all[start:end]
	if cur := r.st.types[r.t].names; cur != nil && pure && string(cur.raw) == string(region) {
		r.set = cur
		return nil
	}
	set, err := r.st.srv.sets.sotw(region, pure)
	r.set = set
	return err
}

// decodeDelta walks a DeltaDiscoveryRequest.
func (r *floorRequest) decodeDelta(b []byte) error {
	var typeURL []byte
	r.sub, r.unsub = r.sub[:0], r.unsub[:0]
	for len(b) > 0 {
		num, typ, v, rest, err := consumeField(b)
		if err != nil {
			return err
		}
		b = rest
		switch num {
		case fDeltaReqType:
			typeURL = v
		case fDeltaReqSub:
			r.sub = append(r.sub, v)
		case fDeltaReqUnsub:
			r.unsub = append(r.unsub, v)
		case fDeltaReqNonce:
			r.nonce = len(v) > 0
		case fDeltaReqDetail:
			r.nack = typ == protowire.BytesType
		}
	}
	r.t = floorTypeIndex(typeURL)
	if r.t < 0 || xdsWildcard(r.t) || len(r.sub)+len(r.unsub) == 0 {
		return nil
	}
	r.tr = r.st.srv.sets.transition(r.st.types[r.t].names, r.sub, r.unsub)
	clear(r.sub) // they point into gRPC's buffers
	clear(r.unsub)
	return nil
}

// consumeField consumes one field of b; v is a bytes field's value.
func consumeField(b []byte) (num protowire.Number, typ protowire.Type, v, rest []byte, err error) {
	num, typ, n := protowire.ConsumeTag(b)
	if n < 0 {
		return 0, 0, nil, nil, protowire.ParseError(n)
	}
	b = b[n:]
	if typ == protowire.BytesType {
		v, n = protowire.ConsumeBytes(b)
	} else {
		n = protowire.ConsumeFieldValue(num, typ, b)
	}
	if n < 0 {
		return 0, 0, nil, nil, protowire.ParseError(n)
	}
	return num, typ, v, b[n:], nil
}

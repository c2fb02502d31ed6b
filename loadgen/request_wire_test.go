package loadgen

import (
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
)

// wireBytes marshals req with rawCodec, as gRPC sends it, and frees the
// buffers as gRPC does once they are written.
func wireBytes(t *testing.T, req *rawRequest) []byte {
	t.Helper()
	data, err := rawCodec{}.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	b := data.Materialize()
	data.Free()
	if req.head != nil {
		t.Error("Marshal did not take the request's buffer")
	}
	return b
}

// TestEncodeSotWRequest: the wire-built request decodes to exactly the
// message it stands for, and equal name lists share one encoding.
func TestEncodeSotWRequest(t *testing.T) {
	syms := newSymtab()
	ids := []uint32{syms.idString("outbound|80||a"), syms.idString("outbound|80||b")}
	names := syms.encodeNames(ids)
	if again := syms.encodeNames(append([]uint32(nil), ids...)); &again[0] != &names[0] {
		t.Fatal("an equal name list was encoded again")
	}
	node := &corev3.Node{Id: "sidecar~10.0.0.1~p.ns~ns.svc.cluster.local"}
	nack := &statuspb.Status{Code: int32(codes.InvalidArgument), Message: nackMessage}
	for _, tc := range []struct {
		name    string
		node    *corev3.Node
		nack    bool
		names   []byte
		version string
		nonce   string
	}{
		{"first", node, false, names, "v1", "7"},
		{"nack", nil, true, names, "v1", "7"},
		{"wildcard ack", nil, false, nil, "v1", "7"},
		{"initial", node, false, nil, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := sotwRequest{typeURL: EndpointType, version: tc.version, nonce: []byte(tc.nonce),
				node: tc.node, names: tc.names, nack: tc.nack}
			var req rawRequest
			if err := q.encode(&req); err != nil {
				t.Fatal(err)
			}
			var got discoveryv3.DiscoveryRequest
			if err := proto.Unmarshal(wireBytes(t, &req), &got); err != nil {
				t.Fatal(err)
			}
			want := &discoveryv3.DiscoveryRequest{TypeUrl: EndpointType, VersionInfo: tc.version,
				ResponseNonce: tc.nonce, Node: tc.node}
			if tc.nack {
				want.ErrorDetail = nack
			}
			if tc.names != nil {
				want.ResourceNames = []string{"outbound|80||a", "outbound|80||b"}
			}
			if !proto.Equal(&got, want) {
				t.Fatalf("decoded %v, want %v", &got, want)
			}
		})
	}
}

// TestEncodeDeltaRequest: the wire-built delta request decodes to exactly
// the message it stands for.
func TestEncodeDeltaRequest(t *testing.T) {
	syms := newSymtab()
	a, b, c := syms.idString("a"), syms.idString("b"), syms.idString("c")
	node := &corev3.Node{Id: "sidecar~10.0.0.1~p.ns~ns.svc.cluster.local"}
	for _, tc := range []struct {
		name string
		q    deltaRequest
		want *discoveryv3.DeltaDiscoveryRequest
	}{
		{"subscribe", deltaRequest{typeURL: EndpointType, node: node, subscribe: []uint32{a, b}, unsubscribe: []uint32{c}},
			&discoveryv3.DeltaDiscoveryRequest{TypeUrl: EndpointType, Node: node,
				ResourceNamesSubscribe: []string{"a", "b"}, ResourceNamesUnsubscribe: []string{"c"}}},
		{"ack", deltaRequest{typeURL: ClusterType, nonce: []byte("n-1")},
			&discoveryv3.DeltaDiscoveryRequest{TypeUrl: ClusterType, ResponseNonce: "n-1"}},
		{"nack", deltaRequest{typeURL: ClusterType, nonce: []byte("n-2"), nack: true},
			&discoveryv3.DeltaDiscoveryRequest{TypeUrl: ClusterType, ResponseNonce: "n-2",
				ErrorDetail: &statuspb.Status{Code: int32(codes.InvalidArgument), Message: nackMessage}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var req rawRequest
			if err := tc.q.encode(syms, &req); err != nil {
				t.Fatal(err)
			}
			var got discoveryv3.DeltaDiscoveryRequest
			if err := proto.Unmarshal(wireBytes(t, &req), &got); err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(&got, tc.want) {
				t.Fatalf("decoded %v, want %v", &got, tc.want)
			}
		})
	}
}

// TestRequestSentOnce: a request's buffer goes to gRPC once; marshaling
// the same request again is an error, not a reuse of a buffer gRPC owns.
func TestRequestSentOnce(t *testing.T) {
	var req rawRequest
	q := deltaRequest{typeURL: ClusterType}
	if err := q.encode(newSymtab(), &req); err != nil {
		t.Fatal(err)
	}
	data, err := rawCodec{}.Marshal(&req)
	if err != nil {
		t.Fatal(err)
	}
	defer data.Free()
	if _, err := (rawCodec{}).Marshal(&req); err == nil {
		t.Fatal("a request marshaled twice")
	}
}

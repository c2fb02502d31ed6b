package loadgen

import (
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"
)

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
	nack := &statuspb.Status{Code: 3, Message: "rejected"}
	for _, tc := range []struct {
		node *corev3.Node
		err  *statuspb.Status
		ids  []byte
	}{{node, nil, names}, {nil, nack, names}, {nil, nil, nil}} {
		raw, err := encodeSotWRequest("type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment", "v1", "7", tc.node, tc.ids, tc.err)
		if err != nil {
			t.Fatal(err)
		}
		var got discoveryv3.DiscoveryRequest
		if err := proto.Unmarshal(raw, &got); err != nil {
			t.Fatal(err)
		}
		want := &discoveryv3.DiscoveryRequest{
			TypeUrl: "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment", VersionInfo: "v1",
			ResponseNonce: "7", Node: tc.node, ErrorDetail: tc.err,
		}
		if tc.ids != nil {
			want.ResourceNames = []string{"outbound|80||a", "outbound|80||b"}
		}
		if !proto.Equal(&got, want) {
			t.Fatalf("decoded %v, want %v", &got, want)
		}
	}
}

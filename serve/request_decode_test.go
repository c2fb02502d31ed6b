package serve

import (
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/pilotfish-mesh/pilotfish/engine"
)

func ackRequest(names int) *discoveryv3.DiscoveryRequest {
	md, _ := structpb.NewStruct(map[string]any{"CLUSTER_ID": "Kubernetes", "ISTIO_VERSION": "1.31.0"})
	return &discoveryv3.DiscoveryRequest{
		VersionInfo:   "1f3a",
		Node:          &corev3.Node{Id: "sidecar~10.0.0.1~a.default~default.svc.cluster.local", Metadata: md},
		ResourceNames: ackNames(names),
		TypeUrl:       engine.TypeEndpoint,
		ResponseNonce: "42",
	}
}

// checkDecodeAsProto: decodeDiscoveryRequest agrees with proto.Unmarshal
// on b — the same error verdict and an equal message.
func checkDecodeAsProto(t *testing.T, b []byte) {
	t.Helper()
	want := &discoveryv3.DiscoveryRequest{}
	wantErr := proto.Unmarshal(b, want)
	got := &discoveryv3.DiscoveryRequest{ResourceNames: []string{"stale"}, Node: &corev3.Node{Id: "stale"}}
	gotErr := decodeDiscoveryRequest(b, got)
	if (wantErr == nil) != (gotErr == nil) {
		t.Fatalf("error %v, proto.Unmarshal's %v", gotErr, wantErr)
	}
	if wantErr == nil && !proto.Equal(got, want) {
		t.Fatalf("decoded %v\nproto.Unmarshal: %v", got, want)
	}
}

func TestDecodeDiscoveryRequest(t *testing.T) {
	full := ackRequest(50)
	full.ErrorDetail = &statuspb.Status{Code: 3, Message: "rejected"}
	withLocators := ackRequest(2)
	withLocators.ResourceLocators = []*discoveryv3.ResourceLocator{{Name: "x"}}
	for name, m := range map[string]*discoveryv3.DiscoveryRequest{
		"empty": {}, "ack": ackRequest(1000), "nack": full, "locators": withLocators,
		"no names": {TypeUrl: engine.TypeCluster, VersionInfo: "v"},
	} {
		t.Run(name, func(t *testing.T) {
			b, err := proto.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			checkDecodeAsProto(t, b)
			// A message field repeated on the wire merges.
			checkDecodeAsProto(t, append(append([]byte{}, b...), b...))
			// Truncated anywhere: errors as proto.Unmarshal errors.
			for _, cut := range []int{1, 2, len(b) / 2, len(b) - 1} {
				if cut > 0 && cut < len(b) {
					checkDecodeAsProto(t, b[:cut])
				}
			}
		})
	}
	t.Run("invalid utf-8", func(t *testing.T) {
		b, _ := proto.Marshal(&discoveryv3.DiscoveryRequest{ResourceNames: []string{"ok"}})
		b = append(b, 0x1a, 2, 0xff, 0xfe) // resource_names: "\xff\xfe"
		checkDecodeAsProto(t, b)
	})
	t.Run("names are one allocation", func(t *testing.T) {
		b, _ := proto.Marshal(&discoveryv3.DiscoveryRequest{ResourceNames: ackNames(1000), TypeUrl: engine.TypeEndpoint})
		r := &discoveryv3.DiscoveryRequest{}
		if n := testing.AllocsPerRun(20, func() { _ = decodeDiscoveryRequest(b, r) }); n > 2 {
			t.Errorf("decoding 1,000 names: %v allocations, want 2 (the string, the slice)", n)
		}
	})
}

// FuzzDecodeDiscoveryRequest: on any input, the fast decoder's result is
// proto.Unmarshal's.
func FuzzDecodeDiscoveryRequest(f *testing.F) {
	for _, m := range []*discoveryv3.DiscoveryRequest{ackRequest(3), {TypeUrl: engine.TypeListener}, {ErrorDetail: &statuspb.Status{Message: "x"}}} {
		b, _ := proto.Marshal(m)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkDecodeAsProto(t, b) })
}

// BenchmarkDecodeACK: decoding a SotW EDS ACK repeating 1,000 names.
func BenchmarkDecodeACK(b *testing.B) {
	buf, _ := proto.Marshal(ackRequest(1000))
	r := &discoveryv3.DiscoveryRequest{}
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = decodeDiscoveryRequest(buf, r)
		}
	})
	b.Run("proto.Unmarshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			r.Reset()
			_ = proto.Unmarshal(buf, r)
		}
	})
}

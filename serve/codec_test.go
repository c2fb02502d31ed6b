package serve_test

import (
	"bytes"
	"fmt"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"github.com/pilotfish-mesh/pilotfish/engine"
	"github.com/pilotfish-mesh/pilotfish/serve"
)

func TestCodec(t *testing.T) {
	c := serve.Codec()
	if c.Name() != "proto" {
		t.Fatalf("codec name %q: clients negotiate application/grpc+proto", c.Name())
	}

	t.Run("raw message is written as is, once", func(t *testing.T) {
		raw := serve.AppendSotW(nil, 1, 1, engine.TypeCluster, nil, clusters(t, 3))
		msg := serve.RawMessage(bytes.Clone(raw))
		bs, err := c.Marshal(msg)
		if err != nil {
			t.Fatal(err)
		}
		if got := bs.Materialize(); !bytes.Equal(got, raw) {
			t.Fatal("raw bytes changed by the codec")
		}
		bs.Free()
		if _, err := c.Marshal(msg); err == nil {
			t.Fatal("a raw message was marshaled twice: its buffer may already be reused")
		}
	})

	t.Run("ordinary messages use the proto codec", func(t *testing.T) {
		req := &discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: "p"}, TypeUrl: engine.TypeCluster,
			ResourceNames: []string{"a", "b"}, ResponseNonce: "3"}
		bs, err := c.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := proto.Marshal(req)
		if !bytes.Equal(bs.Materialize(), want) {
			t.Fatal("proto fallback differs from proto.Marshal")
		}
		got := &discoveryv3.DiscoveryRequest{}
		if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(want)}, got); err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(got, req) {
			t.Fatalf("decoded %v, want %v", got, req)
		}
		if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer([]byte{0xff})}, got); err == nil {
			t.Fatal("garbage decoded without error")
		}
	})

	// A large ACK arrives in several HTTP/2 frames and is joined in a
	// pooled buffer that is not zeroed: the decode must see exactly the
	// message, never a longer request's leftover bytes, and keep nothing of
	// the buffer once it is reused.
	t.Run("requests split over frames decode through the pool", func(t *testing.T) {
		names := make([]string, 2000)
		for i := range names {
			names[i] = fmt.Sprintf("outbound|80||service-%d.ns.svc.cluster.local", i)
		}
		long := &discoveryv3.DiscoveryRequest{TypeUrl: engine.TypeEndpoint, ResourceNames: names, ResponseNonce: "9"}
		short := &discoveryv3.DiscoveryRequest{TypeUrl: engine.TypeEndpoint, ResourceNames: names[:1500], VersionInfo: "v2", ResponseNonce: "10"}
		var kept []*discoveryv3.DiscoveryRequest
		for round := range 3 {
			for _, req := range []*discoveryv3.DiscoveryRequest{long, short} {
				wire, err := proto.Marshal(req)
				if err != nil {
					t.Fatal(err)
				}
				var frames mem.BufferSlice
				for b := wire; len(b) > 0; {
					n := min(len(b), 16<<10)
					frames = append(frames, mem.SliceBuffer(bytes.Clone(b[:n])))
					b = b[n:]
				}
				got := &discoveryv3.DiscoveryRequest{}
				if err := c.Unmarshal(frames, got); err != nil {
					t.Fatalf("round %d: %v", round, err)
				}
				if !proto.Equal(got, req) {
					t.Fatalf("round %d: decoded %d names (version %q), want %d (%q)", round,
						len(got.GetResourceNames()), got.GetVersionInfo(), len(req.GetResourceNames()), req.GetVersionInfo())
				}
				kept = append(kept, got)
			}
		}
		for i, got := range kept {
			if want := []*discoveryv3.DiscoveryRequest{long, short}[i%2]; !proto.Equal(got, want) {
				t.Fatalf("request %d changed after its buffer went back to the pool", i)
			}
		}
	})
}

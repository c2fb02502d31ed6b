package serve

import (
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"

	"github.com/pilotfish-mesh/pilotfish/engine"
)

func TestSharedBodyIsSharedAndDecodes(t *testing.T) {
	s := NewXDSServer(nil, XDSOptions{ControlPlaneID: "cp-1"})
	res := []engine.Resource{{Name: "a", Any: []byte{0x0a, 0x01, 'x'}}, {Name: "b", Any: []byte{0x0a, 0x01, 'y'}}}
	h := wireHeader{version: 42, nonce: 7, typeURL: engine.TypeCluster, controlPlane: s.controlPlane}
	b1 := s.sharedBodyOf(&h, h.version, res)
	h.nonce = 8
	b2 := s.sharedBodyOf(&h, h.version, res)
	if &b1[0] != &b2[0] {
		t.Fatal("two streams sending the same content did not share the body")
	}
	// body + nonce tail is a valid DiscoveryResponse equal to the one
	// assembled in one piece.
	msg := append(append([]byte(nil), b2...), appendField(nil, fieldRespNonce, appendDecimal(nil, 8))...)
	var got, want discoveryv3.DiscoveryResponse
	if err := proto.Unmarshal(msg, &got); err != nil {
		t.Fatal(err)
	}
	if err := proto.Unmarshal(appendDiscoveryResponse(nil, &h, res), &want); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(&got, &want) || got.Nonce != "8" || len(got.Resources) != 2 {
		t.Fatalf("shared body + nonce = %v, want %v", &got, &want)
	}
	// Another server (another control plane id) has its own bodies.
	other := NewXDSServer(nil, XDSOptions{ControlPlaneID: "cp-2"})
	h.controlPlane = other.controlPlane
	if b3 := other.sharedBodyOf(&h, h.version, res); &b3[0] == &b1[0] {
		t.Fatal("bodies shared across servers")
	}
}

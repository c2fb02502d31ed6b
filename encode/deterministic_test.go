package encode

import (
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/structpb"
)

// TestMarshalDeterministic: a resource holding multi-entry maps encodes to
// the same bytes every time (vtprotobuf alone writes map entries in random
// order), and one without maps keeps the fast path.
func TestMarshalDeterministic(t *testing.T) {
	md, err := structpb.NewStruct(map[string]any{"a": "1", "b": "2", "c": "3", "d": "4", "e": "5", "f": "6"})
	if err != nil {
		t.Fatal(err)
	}
	withMaps := &clusterv3.Cluster{Name: "c", Metadata: &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{"istio": md}}}
	if !clusterHasUnsortedMaps(withMaps) {
		t.Fatal("a Struct of six fields inside a one-entry map was not seen")
	}
	if clusterHasUnsortedMaps(&clusterv3.Cluster{Name: "plain"}) {
		t.Error("a cluster without metadata takes the sorted path")
	}
	first, err := AppendAny(nil, "t", withMaps)
	if err != nil {
		t.Fatal(err)
	}
	for range 50 {
		b, _ := AppendAny(nil, "t", withMaps)
		if string(b) != string(first) {
			t.Fatal("two encodings of one cluster differ")
		}
		if b, _ := marshalBare(withMaps); string(b) != string(first[len(first)-len(b):]) {
			t.Fatal("marshalBare differs from AppendAny's payload")
		}
	}
}

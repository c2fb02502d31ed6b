package encode

import (
	"bytes"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"
)

// TestAppendMetadataIsDeterministicMarshal: appendMetadata writes what
// proto's deterministic marshaling writes, for nested structs and lists,
// every value kind, and values of 128 bytes and more at every level (their
// length takes two varint bytes and the value is moved up).
func TestAppendMetadataIsDeterministicMarshal(t *testing.T) {
	long := strings.Repeat("h", 200)
	service := func(host string) any {
		return map[string]any{"host": host, "name": "reviews", "namespace": "shop"}
	}
	for name, fields := range map[string]map[string]any{
		"empty": {},
		"short": {"services": []any{service("reviews.shop.svc.cluster.local")}, "external": true},
		"long": {
			"services": []any{service(long), service(long + "2"), service("a")},
			"config":   "/apis/networking.istio.io/v1/namespaces/shop/destination-rule/" + long,
			"n":        12.5, "nothing": nil,
			"nested": map[string]any{"deeper": map[string]any{"list": []any{long, 1.0, false}}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			s, err := structpb.NewStruct(fields)
			if err != nil {
				t.Fatal(err)
			}
			md := &corev3.Metadata{
				FilterMetadata: map[string]*structpb.Struct{"istio": s, "b": {}, long: s},
				TypedFilterMetadata: map[string]*anypb.Any{
					"x": {TypeUrl: "type.googleapis.com/x", Value: []byte(long)},
					"y": {},
				},
			}
			want, err := proto.MarshalOptions{Deterministic: true}.Marshal(md)
			if err != nil {
				t.Fatal(err)
			}
			if got := appendMetadata([]byte("prefix"), md); !bytes.Equal(got[len("prefix"):], want) {
				t.Fatalf("appendMetadata differs from proto's deterministic marshal:\ngot  %x\nwant %x", got[len("prefix"):], want)
			}
		})
	}
}

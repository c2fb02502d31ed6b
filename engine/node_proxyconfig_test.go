package engine

import (
	"errors"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/pilotfish-mesh/pilotfish/encode"
)

// TestParseNodeGatewayTopology reads PROXY_CONFIG's gatewayTopology as
// istio-agent sends it (enum by name or number, unknown fields ignored),
// keeps it in a router's class only, and rejects values istiod's protojson
// would.
func TestParseNodeGatewayTopology(t *testing.T) {
	node := func(typ string, pc map[string]any) *corev3.Node {
		md, err := structpb.NewStruct(map[string]any{"NAMESPACE": "istio-system", "PROXY_CONFIG": pc})
		if err != nil {
			t.Fatal(err)
		}
		return &corev3.Node{Id: typ + "~10.0.0.9~gw-1.istio-system~istio-system.svc.cluster.local", Metadata: md}
	}
	for _, tc := range []struct {
		name string
		typ  string
		pc   map[string]any
		want encode.GatewayTopology
		err  bool
	}{
		{name: "all", typ: "router", pc: map[string]any{
			"concurrency":     2, // another ProxyConfig field: ignored
			"gatewayTopology": map[string]any{"numTrustedProxies": 2, "forwardClientCertDetails": "APPEND_FORWARD", "proxyProtocol": map[string]any{}},
		}, want: encode.GatewayTopology{NumTrustedProxies: 2, ForwardClientCert: 3, ProxyProtocol: true}},
		{name: "enum number", typ: "router", pc: map[string]any{"gatewayTopology": map[string]any{"forwardClientCertDetails": 5}},
			want: encode.GatewayTopology{ForwardClientCert: 5}},
		{name: "none", typ: "router", pc: map[string]any{"concurrency": 2}},
		{name: "sidecar ignores it", typ: "sidecar", pc: map[string]any{"gatewayTopology": map[string]any{"numTrustedProxies": 2}}},
		// An unknown enum name is dropped, as istiod's protojson
		// (UnmarshalAllowUnknown) drops it: the default applies.
		{name: "unknown enum name", typ: "router", pc: map[string]any{"gatewayTopology": map[string]any{"forwardClientCertDetails": "SOMETIMES", "numTrustedProxies": 1}},
			want: encode.GatewayTopology{NumTrustedProxies: 1}},
		{name: "enum number out of range", typ: "router", pc: map[string]any{"gatewayTopology": map[string]any{"forwardClientCertDetails": 9}}, err: true},
		{name: "negative hops", typ: "router", pc: map[string]any{"gatewayTopology": map[string]any{"numTrustedProxies": -1}}, err: true},
		{name: "not an object", typ: "router", pc: map[string]any{"gatewayTopology": "two"}, err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, err := ParseNode(node(tc.typ, tc.pc))
			if tc.err {
				if !errors.Is(err, ErrBadNode) {
					t.Fatalf("err = %v, want ErrBadNode", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if n.GatewayTopology != tc.want {
				t.Fatalf("topology = %+v, want %+v", n.GatewayTopology, tc.want)
			}
			if c := n.Class(); c.GatewayTopology != tc.want {
				t.Fatalf("class topology = %+v, want %+v", c.GatewayTopology, tc.want)
			}
		})
	}
	// Routers behind different topologies are different classes (the
	// engine keys classes by value).
	a, _ := ParseNode(node("router", map[string]any{"gatewayTopology": map[string]any{"numTrustedProxies": 1}}))
	b, _ := ParseNode(node("router", map[string]any{"gatewayTopology": map[string]any{"numTrustedProxies": 2}}))
	if a.Class() == b.Class() {
		t.Fatal("routers with different gatewayTopology share a class")
	}
}

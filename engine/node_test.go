package engine

import (
	"errors"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/pilotfish-mesh/pilotfish/encode"
)

func TestParseNode(t *testing.T) {
	md := func(m map[string]any) *structpb.Struct {
		s, err := structpb.NewStruct(m)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	for _, tc := range []struct {
		name    string
		node    *corev3.Node
		wantErr bool
		check   func(*testing.T, *Node)
	}{
		{
			name: "istio-agent sidecar",
			node: &corev3.Node{Id: "sidecar~10.0.0.1~pod-0.default~default.svc.cluster.local", Metadata: md(map[string]any{
				"NAMESPACE": "default", "ISTIO_VERSION": "1.31.0", "CLUSTER_ID": "Kubernetes",
				"LABELS": map[string]any{"app": "load-0"}, "INSTANCE_IPS": "10.0.0.1,fd00::1",
			}), Locality: &corev3.Locality{Region: "r", Zone: "z"}},
			check: func(t *testing.T, n *Node) {
				if n.ID != "pod-0.default" || n.Namespace != "default" || n.PodName != "pod-0" || n.Type != encode.ProxySidecar {
					t.Fatalf("identity = %+v", n)
				}
				if len(n.IPs) != 2 || n.IPs[1].String() != "fd00::1" {
					t.Fatalf("IPs = %v", n.IPs)
				}
				if n.Labels["app"] != "load-0" || n.IstioVersion != "1.31" || n.ClusterID != "Kubernetes" || n.Locality != "r/z/" {
					t.Fatalf("metadata = %+v", n)
				}
				if n.Class().IPv6 {
					t.Fatal("a dual-stack proxy is not IPv6-only")
				}
			},
		},
		{
			name: "router",
			node: &corev3.Node{Id: "router~10.0.0.9~gw-1.istio-system~istio-system.svc.cluster.local"},
			check: func(t *testing.T, n *Node) {
				if n.Type != encode.ProxyRouter || n.Namespace != "istio-system" {
					t.Fatalf("router = %+v", n)
				}
			},
		},
		{
			name: "proxyless gRPC",
			node: &corev3.Node{Id: "sidecar~10.0.0.200~grpc-client-0.default~default.svc.cluster.local", Metadata: md(map[string]any{"GENERATOR": "grpc"})},
			check: func(t *testing.T, n *Node) {
				if n.Type != encode.ProxyGRPC {
					t.Fatalf("type = %v, want grpc", n.Type)
				}
			},
		},
		{name: "empty id", node: &corev3.Node{}, wantErr: true},
		{name: "three parts", node: &corev3.Node{Id: "sidecar~10.0.0.1~pod.ns"}, wantErr: true},
		{name: "unknown type", node: &corev3.Node{Id: "waypoint~10.0.0.1~pod.ns~ns.svc.cluster.local"}, wantErr: true},
		{name: "no ip", node: &corev3.Node{Id: "sidecar~nope~pod.ns~ns.svc.cluster.local"}, wantErr: true},
		{name: "no namespace", node: &corev3.Node{Id: "sidecar~10.0.0.1~pod~x"}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, err := ParseNode(tc.node)
			if tc.wantErr {
				if !errors.Is(err, ErrBadNode) {
					t.Fatalf("err = %v, want ErrBadNode", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, n)
		})
	}
}

func FuzzParseNode(f *testing.F) {
	f.Add("sidecar~10.0.0.1~pod-0.default~default.svc.cluster.local", "default", "grpc")
	f.Add("router~::1~gw.istio-system~istio-system.svc.cluster.local", "", "")
	f.Add("~~~", "x", "y")
	f.Fuzz(func(t *testing.T, id, ns, gen string) {
		md, _ := structpb.NewStruct(map[string]any{"NAMESPACE": ns, "GENERATOR": gen})
		n, err := ParseNode(&corev3.Node{Id: id, Metadata: md})
		if err != nil {
			if !errors.Is(err, ErrBadNode) {
				t.Fatalf("error %v does not wrap ErrBadNode", err)
			}
			return
		}
		if n.Namespace == "" || len(n.IPs) == 0 {
			t.Fatalf("accepted node without namespace or IP: %+v", n)
		}
	})
}

// TestNodeLocalityFromLabels: as istiod does, a proxy's topology labels
// give its locality before the node's, then its locality label.
func TestNodeLocalityFromLabels(t *testing.T) {
	cases := []struct {
		name   string
		labels map[string]any
		want   string
	}{
		{"node's locality without labels", map[string]any{"app": "a"}, "r/z/"},
		{"topology labels win", map[string]any{"topology.kubernetes.io/region": "us-east", "topology.kubernetes.io/zone": "us-east-1a"}, "us-east/us-east-1a/"},
		{"subzone alone", map[string]any{"topology.istio.io/subzone": "rack-1"}, "//rack-1"},
		{"locality label", map[string]any{"topology.istio.io/locality": "us-west/b/c"}, "us-west/b/c"},
		{"legacy locality label", map[string]any{"istio-locality": "eu/x"}, "eu/x/"},
		{"topology labels before the locality label", map[string]any{"topology.kubernetes.io/region": "a", "istio-locality": "b"}, "a//"},
		{"empty locality label", map[string]any{"istio-locality": ""}, "r/z/"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			md, err := structpb.NewStruct(map[string]any{"NAMESPACE": "default", "LABELS": tc.labels})
			if err != nil {
				t.Fatal(err)
			}
			n, err := ParseNode(&corev3.Node{Id: "sidecar~10.0.0.1~p.default~default.svc.cluster.local", Metadata: md,
				Locality: &corev3.Locality{Region: "r", Zone: "z"}})
			if err != nil {
				t.Fatal(err)
			}
			if n.Locality != tc.want {
				t.Fatalf("locality %q, want %q", n.Locality, tc.want)
			}
		})
	}
}

package engine

import (
	"context"
	"errors"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/pilotfish-mesh/pilotfish/encode"
)

// FuzzConnectNode feeds an arbitrary node (id, metadata as an encoded
// google.protobuf.Struct, locality) through what a connecting proxy drives:
// ParseNode, Connect (class, service instances) and a generation of every
// type, wildcard and by the fuzzer's name. Whatever the input: no panic; a
// refusal wraps ErrBadNode; an accepted node gets config without error.
func FuzzConnectNode(f *testing.F) {
	seed := func(id string, md map[string]any, zone, name string) {
		s, err := structpb.NewStruct(md)
		if err != nil {
			f.Fatal(err)
		}
		b, err := proto.Marshal(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(id, b, zone, name)
	}
	seed("sidecar~10.0.0.1~pod-0.a~a.svc.cluster.local", map[string]any{
		"NAMESPACE": "a", "ISTIO_VERSION": "1.31.0", "CLUSTER_ID": "Kubernetes", "NETWORK": "n1",
		"LABELS": map[string]any{"app": "one", "version": "v1"}, "INSTANCE_IPS": "10.0.0.1,fd00::1",
	}, "z1", "outbound|80||one.a.svc.cluster.local")
	seed("sidecar~10.0.0.2~pod-1.b~b.svc.cluster.local", map[string]any{"GENERATOR": "grpc", "NAMESPACE": "b"},
		"", "one.a.svc.cluster.local:80")
	seed("router~::1~gw.istio-system~istio-system.svc.cluster.local", map[string]any{
		"LABELS": map[string]any{"istio": "ingressgateway"}, "ISTIO_VERSION": "x.y",
	}, "", "http.80")
	seed("router~10.0.0.9~gw-1.istio-system~istio-system.svc.cluster.local", map[string]any{
		"PROXY_CONFIG": map[string]any{"gatewayTopology": map[string]any{"numTrustedProxies": 2, "forwardClientCertDetails": "APPEND_FORWARD", "proxyProtocol": map[string]any{}}},
	}, "", "0.0.0.0_80")
	seed("sidecar~10.0.0.3~pod-2.a~a.svc.cluster.local", map[string]any{"NAMESPACE": "a", "LABELS": map[string]any{
		"topology.istio.io/locality": "r/z/s/extra", "istio-locality": "", "topology.istio.io/subzone": "s"}}, "z", "*")
	seed("sidecar~1.2.3.4,bad,::~p.~~", map[string]any{"LABELS": "not a struct", "INSTANCE_IPS": 7.0}, "", "*")
	seed("sidecar~10.0.0.4~pod-3.a~a.svc.cluster.local", map[string]any{"NAMESPACE": "a", "MESH_ID": "m", "PROXY_CONFIG": map[string]any{"tracing": map[string]any{
		"sampling": 150.0, "maxPathTagLength": 9.0, "enableIstioTags": false, "customTags": map[string]any{"t": map[string]any{"header": map[string]any{"name": "x"}}}}}}, "", "*")

	m := newTestMesh(f)
	m.setEndpoints(m.svcA, 2)
	// A mesh with tracing: a proxy's PROXY_CONFIG tracing shapes its HCMs.
	mesh := encode.DefaultMesh()
	mesh.Tracing = &encode.MeshTracing{Sampling: 1, IstioTags: true}
	e := New(m.w, Options{Mesh: mesh})
	types := []string{TypeCluster, TypeEndpoint, TypeListener, TypeRoute}
	f.Fuzz(func(t *testing.T, id string, mdBytes []byte, zone, name string) {
		md := &structpb.Struct{}
		if proto.Unmarshal(mdBytes, md) != nil {
			md = nil
		}
		node := &corev3.Node{Id: id, Metadata: md, Locality: &corev3.Locality{Zone: zone}}
		c, err := e.Connect(context.Background(), node, "")
		if err != nil {
			if !errors.Is(err, ErrBadNode) {
				t.Fatalf("refusal %v does not wrap ErrBadNode", err)
			}
			return
		}
		defer c.Close()
		for _, typ := range types {
			if _, err := c.Generate(typ, nil, true, nil); err != nil {
				t.Fatalf("%s wildcard: %v", typ, err)
			}
			if _, err := c.Generate(typ, []string{name}, false, nil); err != nil {
				t.Fatalf("%s %q: %v", typ, name, err)
			}
		}
	})
}

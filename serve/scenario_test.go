package serve_test

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/pilotfish-mesh/pilotfish/engine"
	"github.com/pilotfish-mesh/pilotfish/internal/scenario"
	"github.com/pilotfish-mesh/pilotfish/serve"
)

// TestScenarios runs the scenario files (internal/scenario/testdata) over a
// real gRPC ADS stream to the XDSServer in front of the real engine: the
// same behaviours engine's TestScenarios proves on Generate, as a proxy
// receives them.
func TestScenarios(t *testing.T) {
	scenario.RunDir(t, scenario.Dir(t), newServeTarget)
}

type serveTarget struct {
	m  *scenario.Mesh
	cc *grpc.ClientConn
}

func newServeTarget(t *testing.T) scenario.Target {
	m := scenario.NewMesh()
	eng := engine.New(m.W, engine.Options{})
	gs := grpc.NewServer(serve.ServerOptions()...)
	serve.NewXDSServer(engineBackend{eng}, serve.XDSOptions{}).Register(gs)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return &serveTarget{m: m, cc: cc}
}

func (st *serveTarget) Mesh() *scenario.Mesh { return st.m }

func (st *serveTarget) Connect(_ testing.TB, node *corev3.Node) scenario.Fetcher {
	return &streamFetcher{cc: st.cc, node: node}
}

// streamFetcher answers each request on a new SotW stream, so every answer
// reflects the mesh as it is now (pushes are engine's business, tested
// there).
type streamFetcher struct {
	cc   *grpc.ClientConn
	node *corev3.Node
}

func (f *streamFetcher) Fetch(typeURL string, names []string, _ bool) ([]scenario.Resource, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stream, err := discoveryv3.NewAggregatedDiscoveryServiceClient(f.cc).StreamAggregatedResources(ctx)
	if err != nil {
		return nil, err
	}
	if err := stream.Send(&discoveryv3.DiscoveryRequest{Node: f.node, TypeUrl: typeURL, ResourceNames: names}); err != nil {
		return nil, err
	}
	for {
		resp, err := stream.Recv()
		if err != nil {
			return nil, err
		}
		if resp.GetTypeUrl() != typeURL {
			continue
		}
		out := make([]scenario.Resource, 0, len(resp.GetResources()))
		for _, a := range resp.GetResources() {
			b, err := proto.Marshal(a)
			if err != nil {
				return nil, err
			}
			name, err := resourceName(a.GetTypeUrl(), a.GetValue())
			if err != nil {
				return nil, err
			}
			out = append(out, scenario.Resource{Name: name, Any: b})
		}
		return out, nil
	}
}

// resourceName reads the name of an encoded resource: its name field, or a
// ClusterLoadAssignment's cluster_name.
func resourceName(typeURL string, value []byte) (string, error) {
	mt, err := protoregistry.GlobalTypes.FindMessageByURL(typeURL)
	if err != nil {
		return "", err
	}
	m := mt.New()
	if err := proto.Unmarshal(value, m.Interface()); err != nil {
		return "", err
	}
	fields := m.Descriptor().Fields()
	for _, n := range []protoreflect.Name{"name", "cluster_name"} {
		if fd := fields.ByName(n); fd != nil {
			return m.Get(fd).String(), nil
		}
	}
	return "", fmt.Errorf("%s has no name field", typeURL)
}

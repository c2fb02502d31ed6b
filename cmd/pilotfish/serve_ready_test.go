package main

import (
	"context"
	"net"
	"sync/atomic"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/engine"
	"github.com/pilotfish-mesh/pilotfish/index"
	"github.com/pilotfish-mesh/pilotfish/serve"
)

// TestXDSRefusedUntilReady: before every config source has synced, an ADS
// stream is refused with Unavailable (the proxy retries) rather than
// served config built from a half-read mesh; once ready the same request
// is answered.
func TestXDSRefusedUntilReady(t *testing.T) {
	var ready atomic.Bool
	eng := engine.New(index.NewWriter(), engine.Options{Mesh: encode.DefaultMesh()})
	gs := grpc.NewServer(serve.ServerOptions()...)
	serve.NewXDSServer(backend{e: eng, ready: ready.Load}, serve.XDSOptions{}).Register(gs)
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

	ask := func() (*discoveryv3.DiscoveryResponse, error) {
		stream, err := discoveryv3.NewAggregatedDiscoveryServiceClient(cc).StreamAggregatedResources(context.Background())
		if err != nil {
			return nil, err
		}
		defer func() { _ = stream.CloseSend() }()
		if err := stream.Send(&discoveryv3.DiscoveryRequest{TypeUrl: engine.TypeCluster,
			Node: &corev3.Node{Id: "sidecar~10.0.0.1~a-1.ns~ns.svc.cluster.local"}}); err != nil {
			return nil, err
		}
		return stream.Recv()
	}
	_, err = ask()
	if status.Code(err) != codes.Unavailable || status.Convert(err).Message() != "server is not ready to serve discovery information" {
		t.Fatalf("stream before ready: %v, want Unavailable: server is not ready to serve discovery information", err)
	}
	ready.Store(true)
	resp, err := ask()
	if err != nil || resp.GetTypeUrl() != engine.TypeCluster {
		t.Fatalf("stream once ready: %v %v", resp, err)
	}
}

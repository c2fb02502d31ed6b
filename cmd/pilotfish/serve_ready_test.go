package main

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

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

// TestXDSStreamHeldUntilReady: before every config source has synced, an
// ADS stream is neither served config built from a half-read mesh nor
// refused (grpc-go's xDS client treats a refusal as final for the resource
// it asked for): it is held, counted as waiting, and answered as soon as the
// sources have synced. A stream whose proxy leaves while held is released.
func TestXDSStreamHeldUntilReady(t *testing.T) {
	var ready atomic.Bool
	eng := engine.New(index.NewWriter(), engine.Options{Mesh: encode.DefaultMesh()})
	gate := newSyncGate(ready.Load, nil)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go gate.run(ctx)
	gs := grpc.NewServer(serve.ServerOptions()...)
	serve.NewXDSServer(backend{e: eng, gate: gate}, serve.XDSOptions{}).Register(gs)
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

	type answer struct {
		resp *discoveryv3.DiscoveryResponse
		err  error
	}
	ask := func(ctx context.Context) <-chan answer {
		out := make(chan answer, 1)
		go func() {
			stream, err := discoveryv3.NewAggregatedDiscoveryServiceClient(cc).StreamAggregatedResources(ctx)
			if err == nil {
				err = stream.Send(&discoveryv3.DiscoveryRequest{TypeUrl: engine.TypeCluster,
					Node: &corev3.Node{Id: "sidecar~10.0.0.1~a-1.ns~ns.svc.cluster.local"}})
			}
			if err != nil {
				out <- answer{err: err}
				return
			}
			resp, err := stream.Recv()
			out <- answer{resp, err}
		}()
		return out
	}
	waitWaiting := func(n int64) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for gate.waiting.Load() != n {
			if time.Now().After(deadline) {
				t.Fatalf("streams waiting for sync = %d, want %d", gate.waiting.Load(), n)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}

	// A proxy that gives up while held is released, not leaked.
	leaveCtx, leave := context.WithCancel(context.Background())
	left := ask(leaveCtx)
	waitWaiting(1)
	leave()
	if a := <-left; status.Code(a.err) != codes.Canceled {
		t.Fatalf("held stream whose client left: %v %v, want Canceled", a.resp, a.err)
	}
	waitWaiting(0)

	held := ask(context.Background())
	waitWaiting(1)
	select {
	case a := <-held:
		t.Fatalf("stream answered before the sources synced: %v %v", a.resp, a.err)
	default:
	}
	ready.Store(true)
	select {
	case a := <-held:
		if a.err != nil || a.resp.GetTypeUrl() != engine.TypeCluster {
			t.Fatalf("held stream once ready: %v %v", a.resp, a.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("held stream not answered after the sources synced")
	}
	waitWaiting(0)
}

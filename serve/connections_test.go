package serve_test

import (
	"net"
	"slices"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/pilotfish-mesh/pilotfish/engine"
	"github.com/pilotfish-mesh/pilotfish/serve"
)

// startRegistryServer is startServer that also returns the XDSServer, to
// read its registry.
func startRegistryServer(t *testing.T, b serve.Backend, opts serve.XDSOptions) (*serve.XDSServer, *grpc.ClientConn) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(serve.ServerOptions()...)
	x := serve.NewXDSServer(b, opts)
	x.Register(gs)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	return x, dial(t, lis.Addr().String())
}

func typeStatus(t *testing.T, x *serve.XDSServer, id, typeURL string) serve.TypeStatus {
	t.Helper()
	c, ok := x.Connection(id)
	if !ok {
		t.Fatalf("no connection %q in %+v", id, x.Connections())
	}
	for _, ts := range c.Types {
		if ts.TypeURL == typeURL {
			return ts
		}
	}
	t.Fatalf("connection %q has no status for %s: %+v", id, typeURL, c.Types)
	return serve.TypeStatus{}
}

// The registry follows each stream's sent, acked and rejected responses
// with their versions and nonces, and forgets the stream when it closes.
func TestRegistrySyncStatus(t *testing.T) {
	b := newTestBackend()
	meshFixture(t, b)
	x, cc := startRegistryServer(t, b, serve.XDSOptions{})
	c := newSotWClient(t, cc, "sidecar~10.0.0.1~a.ns~ns.svc.cluster.local")

	c.request(engine.TypeCluster)
	cds := c.expect(engine.TypeCluster, "c1", "c2")
	b.session(t, "sidecar~10.0.0.1~a.ns~ns.svc.cluster.local")
	var st serve.TypeStatus
	waitFor(t, "CDS sent", func() bool {
		st = typeStatus(t, x, "a.ns", engine.TypeCluster)
		return st.SentNonce != ""
	})
	if st.SentNonce != cds.GetNonce() || st.SentVersion != cds.GetVersionInfo() || st.AckedNonce != "" || !st.Wildcard {
		t.Fatalf("after the CDS response: %+v; want sent nonce %s version %s, not acked, wildcard", st, cds.GetNonce(), cds.GetVersionInfo())
	}
	c.ack(cds)
	waitFor(t, "CDS acked", func() bool { return typeStatus(t, x, "a.ns", engine.TypeCluster).AckedNonce == cds.GetNonce() })
	if st = typeStatus(t, x, "a.ns", engine.TypeCluster); st.AckedVersion != cds.GetVersionInfo() || st.Error != "" {
		t.Fatalf("after the ACK: %+v", st)
	}

	c.request(engine.TypeRoute, "r1")
	rds := c.expect(engine.TypeRoute, "r1")
	c.send(&discoveryv3.DiscoveryRequest{TypeUrl: engine.TypeRoute, ResponseNonce: rds.GetNonce(), ResourceNames: []string{"r1"},
		ErrorDetail: &rpcstatus.Status{Code: 3, Message: "bad route"}})
	waitFor(t, "RDS nacked", func() bool { return typeStatus(t, x, "a.ns", engine.TypeRoute).Error == "bad route" })
	st = typeStatus(t, x, "a.ns", engine.TypeRoute)
	if st.NackedVersion != rds.GetVersionInfo() || st.AckedNonce != "" || len(st.Names) != 1 || st.Names[0] != "r1" {
		t.Fatalf("after the NACK: %+v", st)
	}

	if _, ok := x.Connection("nobody.ns"); ok {
		t.Fatal("Connection found a proxy that never connected")
	}
	c.cancel()
	waitFor(t, "stream gone from the registry", func() bool { return len(x.Connections()) == 0 })
}

// istiod's debug types are answered once from the DebugSource, the stream
// is marked as a tool's, and the ACK that follows is not answered.
func TestDebugTypeRequest(t *testing.T) {
	b := newTestBackend()
	var asked []string
	debug := func(srv *serve.XDSServer, typeURL string, names []string) ([]engine.Resource, error) {
		asked = append(asked, typeURL)
		a, err := anypb.New(wrapperspb.String(typeURL))
		if err != nil {
			return nil, err
		}
		raw, err := proto.Marshal(a)
		if err != nil {
			return nil, err
		}
		return []engine.Resource{{Name: "x", Version: "1", Any: raw}}, nil
	}
	x, cc := startRegistryServer(t, b, serve.XDSOptions{Debug: debug})
	c := newSotWClient(t, cc, "sidecar~10.0.0.9~istioctl.istio-system~istio-system.svc.cluster.local")
	// istioctl's first request carries a nonce of its own making.
	c.send(&discoveryv3.DiscoveryRequest{TypeUrl: serve.TypeDebugSyncz, ResponseNonce: "2026-11-22 06:00:00"})
	r := c.recv()
	if r.GetTypeUrl() != serve.TypeDebugSyncz || len(r.GetResources()) != 1 {
		t.Fatalf("debug response: type %s, %d resources", r.GetTypeUrl(), len(r.GetResources()))
	}
	got := &wrapperspb.StringValue{}
	if err := r.GetResources()[0].UnmarshalTo(got); err != nil || got.GetValue() != serve.TypeDebugSyncz {
		t.Fatalf("debug resource %v (%v)", got, err)
	}
	c.ack(r)
	c.expectQuiet()
	conns := x.Connections()
	if len(conns) != 1 || !conns[0].Debug {
		t.Fatalf("connections %+v: want one debug stream", conns)
	}
	if len(asked) != 1 {
		t.Fatalf("DebugSource asked %d times, want 1", len(asked))
	}
	if _, ok := x.Connection("istioctl.istio-system"); ok {
		t.Fatal("Connection returned a tool's debug stream")
	}
}

// The registry keeps a stream's full EDS subscription: a push of a few
// changed clusters does not replace it, a smaller subscription does.
func TestRegistrySubscription(t *testing.T) {
	b := newTestBackend()
	meshFixture(t, b)
	x, cc := startRegistryServer(t, b, serve.XDSOptions{})
	c := newSotWClient(t, cc, "sidecar~10.0.0.1~a.ns~ns.svc.cluster.local")
	c.request(engine.TypeEndpoint, "c1", "c2")
	r := c.expect(engine.TypeEndpoint, "c1", "c2")
	c.ack(r, "c1", "c2")
	names := func() []string { return typeStatus(t, x, "a.ns", engine.TypeEndpoint).Names }
	waitFor(t, "EDS acked", func() bool { return typeStatus(t, x, "a.ns", engine.TypeEndpoint).AckedNonce == r.GetNonce() })

	b.set(t, cla("c2", "10.0.0.9", 80))
	b.push(engine.Push{Types: []string{engine.TypeEndpoint}, Endpoints: []string{"c2"}, Reason: "endpoint"})
	p := c.expect(engine.TypeEndpoint, "c2")
	waitFor(t, "partial push recorded", func() bool { return typeStatus(t, x, "a.ns", engine.TypeEndpoint).SentNonce == p.GetNonce() })
	if got := names(); !slices.Equal(got, []string{"c1", "c2"}) {
		t.Fatalf("after a partial push: names %v, want [c1 c2]", got)
	}

	c.send(&discoveryv3.DiscoveryRequest{TypeUrl: engine.TypeEndpoint, VersionInfo: p.GetVersionInfo(), ResponseNonce: p.GetNonce(), ResourceNames: []string{"c1"}})
	waitFor(t, "subscription shrunk", func() bool { return slices.Equal(names(), []string{"c1"}) })
}

package serve_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/pilotfish-mesh/pilotfish/engine"
	"github.com/pilotfish-mesh/pilotfish/serve"
)

// Test harness: a real gRPC server on 127.0.0.1 and raw ADS clients built on
// go-control-plane's generated client.

// startServer serves b on a loopback port and returns a client connection.
func startServer(t testing.TB, b serve.Backend, opts serve.XDSOptions) *grpc.ClientConn {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(serve.ServerOptions()...)
	serve.NewXDSServer(b, opts).Register(gs)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	return dial(t, lis.Addr().String())
}

func dial(t testing.TB, addr string) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// meshFixture sets the resources most tests use: EDS clusters c1 and c2 with
// their endpoints, and listener svc.test:80 routing via r1 to c1.
func meshFixture(t testing.TB, b *testBackend) {
	b.set(t,
		cluster("c1", 0), cluster("c2", 0),
		cla("c1", "10.0.0.1", 80), cla("c2", "10.0.0.2", 80),
		apiListener(t, "svc.test:80", "r1"),
		routeConfig("r1", "svc.test:80", "c1"),
	)
}

// sotwClient is a raw SotW ADS client. Responses are read by a goroutine
// into a channel so tests can wait with a timeout.
type sotwClient struct {
	t      testing.TB
	node   *corev3.Node
	stream discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesClient
	resps  chan *discoveryv3.DiscoveryResponse
	err    chan error
	cancel context.CancelFunc
}

func newSotWClient(t testing.TB, cc *grpc.ClientConn, nodeID string) *sotwClient {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	stream, err := discoveryv3.NewAggregatedDiscoveryServiceClient(cc).StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := &sotwClient{t: t, node: &corev3.Node{Id: nodeID}, stream: stream,
		resps: make(chan *discoveryv3.DiscoveryResponse, 64), err: make(chan error, 1), cancel: cancel}
	go func() {
		for {
			r, err := stream.Recv()
			if err != nil {
				c.err <- err
				return
			}
			c.resps <- r
		}
	}()
	return c
}

// send sends req, adding the node to the first request only (as Envoy does
// with set_node_on_first_message_only).
func (c *sotwClient) send(req *discoveryv3.DiscoveryRequest) {
	c.t.Helper()
	if c.node != nil {
		req.Node, c.node = c.node, nil
	}
	if err := c.stream.Send(req); err != nil {
		c.t.Fatalf("send: %v", err)
	}
}

// request subscribes to typeURL with names (a new watch: no nonce).
func (c *sotwClient) request(typeURL string, names ...string) {
	c.t.Helper()
	c.send(&discoveryv3.DiscoveryRequest{TypeUrl: typeURL, ResourceNames: names})
}

// ack acknowledges r, subscribing to names.
func (c *sotwClient) ack(r *discoveryv3.DiscoveryResponse, names ...string) {
	c.t.Helper()
	c.send(&discoveryv3.DiscoveryRequest{TypeUrl: r.GetTypeUrl(), VersionInfo: r.GetVersionInfo(),
		ResponseNonce: r.GetNonce(), ResourceNames: names})
}

func (c *sotwClient) recv() *discoveryv3.DiscoveryResponse {
	c.t.Helper()
	select {
	case r := <-c.resps:
		return r
	case err := <-c.err:
		c.t.Fatalf("stream ended: %v", err)
	case <-time.After(10 * time.Second):
		c.t.Fatal("timed out waiting for a response")
	}
	return nil
}

// expect receives a response and checks its type and resource names.
func (c *sotwClient) expect(typeURL string, names ...string) *discoveryv3.DiscoveryResponse {
	c.t.Helper()
	r := c.recv()
	if got := shortType(r.GetTypeUrl()); got != shortType(typeURL) {
		c.t.Fatalf("response type %s, want %s (names %v)", got, shortType(typeURL), anyNames(c.t, r.GetResources()))
	}
	if got := anyNames(c.t, r.GetResources()); !slices.Equal(got, names) {
		c.t.Fatalf("%s response names %q, want %q", shortType(typeURL), got, names)
	}
	return r
}

// expectQuiet checks that nothing more arrives within a short while. Tests
// order events so that this is a final check, not the only proof.
func (c *sotwClient) expectQuiet() {
	c.t.Helper()
	select {
	case r := <-c.resps:
		c.t.Fatalf("unexpected %s response %q", shortType(r.GetTypeUrl()), anyNames(c.t, r.GetResources()))
	case <-time.After(100 * time.Millisecond):
	}
}

// anyNames decodes each Any and returns the resource names, sorted.
func anyNames(t testing.TB, as []*anypb.Any) []string {
	t.Helper()
	names := []string{}
	for _, a := range as {
		m, err := a.UnmarshalNew()
		if err != nil {
			t.Fatalf("decode %s: %v", a.GetTypeUrl(), err)
		}
		names = append(names, nameOf(m))
	}
	slices.Sort(names)
	return names
}

// anyFor returns the decoded resource named name in as, or nil.
func anyFor(t testing.TB, as []*anypb.Any, name string) proto.Message {
	t.Helper()
	for _, a := range as {
		m, err := a.UnmarshalNew()
		if err != nil {
			t.Fatal(err)
		}
		if nameOf(m) == name {
			return m
		}
	}
	return nil
}

func shortType(typeURL string) string {
	switch typeURL {
	case engine.TypeCluster:
		return "CDS"
	case engine.TypeEndpoint:
		return "EDS"
	case engine.TypeListener:
		return "LDS"
	case engine.TypeRoute:
		return "RDS"
	}
	return typeURL
}

func TestStreamErrors(t *testing.T) {
	tests := []struct {
		name       string
		node       *corev3.Node
		connectErr error
		want       codes.Code
	}{
		{"no node", nil, nil, codes.InvalidArgument},
		{"node without id", &corev3.Node{Cluster: "x"}, nil, codes.InvalidArgument},
		{"connect error", &corev3.Node{Id: "p"}, errors.New("engine not ready"), codes.Unavailable},
		{"connect status", &corev3.Node{Id: "p"}, status.Error(codes.PermissionDenied, "no"), codes.PermissionDenied},
		{"bad node", &corev3.Node{Id: "p"}, fmt.Errorf("%w: not TYPE~IP~ID~DOMAIN", engine.ErrBadNode), codes.InvalidArgument},
		{"shutting down", &corev3.Node{Id: "p"}, engine.ErrShuttingDown, codes.Unavailable},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := newTestBackend()
			b.connectErr = tc.connectErr
			cc := startServer(t, b, serve.XDSOptions{})
			for _, delta := range []bool{false, true} {
				var err error
				ads := discoveryv3.NewAggregatedDiscoveryServiceClient(cc)
				if delta {
					s, _ := ads.DeltaAggregatedResources(t.Context())
					_ = s.Send(&discoveryv3.DeltaDiscoveryRequest{Node: tc.node, TypeUrl: engine.TypeCluster})
					_, err = s.Recv()
				} else {
					s, _ := ads.StreamAggregatedResources(t.Context())
					_ = s.Send(&discoveryv3.DiscoveryRequest{Node: tc.node, TypeUrl: engine.TypeCluster})
					_, err = s.Recv()
				}
				if got := status.Code(err); got != tc.want {
					t.Errorf("delta=%v: got %v (%v), want %v", delta, got, err, tc.want)
				}
			}
		})
	}
}

// TestStreamCloseOnCancel checks that a proxy going away ends the stream and
// closes the session, for both protocols.
func TestStreamCloseOnCancel(t *testing.T) {
	b := newTestBackend()
	meshFixture(t, b)
	m := newTestMetrics()
	cc := startServer(t, b, serve.XDSOptions{Metrics: m})

	c := newSotWClient(t, cc, "sotw")
	c.request(engine.TypeCluster)
	c.expect(engine.TypeCluster, "c1", "c2")
	d := newDeltaClient(t, cc, "delta")
	d.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: engine.TypeCluster})
	d.expect(engine.TypeCluster, []string{"c1", "c2"}, nil)

	for _, id := range []string{"sotw", "delta"} {
		s := b.session(t, id)
		if id == "sotw" {
			c.cancel()
		} else {
			d.cancel()
		}
		select {
		case <-s.closed:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: session not closed after cancel", id)
		}
	}
	waitFor(t, "disconnect metrics", func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.connected == 2 && m.disconnected == 2
	})
}

// TestStreamUnknownType checks that a type the engine does not serve is left
// unanswered without disturbing the others.
func TestStreamUnknownType(t *testing.T) {
	b := newTestBackend()
	meshFixture(t, b)
	cc := startServer(t, b, serve.XDSOptions{})
	c := newSotWClient(t, cc, "p")
	c.request(engine.TypeSecret, "default")
	c.request(engine.TypeCluster)
	c.expect(engine.TypeCluster, "c1", "c2")
	b.push(engine.Push{Full: true})
	c.expectQuiet()
}

// TestManyStreams connects 200 proxies at once, half SotW and half Delta;
// every one gets the full config, then a change.
func TestManyStreams(t *testing.T) {
	const n = 200
	b := newTestBackend()
	meshFixture(t, b)
	cc := startServer(t, b, serve.XDSOptions{})
	conns := make([]*grpc.ClientConn, 8) // several HTTP/2 connections, as real proxies have
	for i := range conns {
		conns[i] = dial(t, cc.Target())
	}

	var wg sync.WaitGroup
	errs := make(chan error, n)
	synced := make(chan struct{})
	ready := make(chan struct{}, n)
	for i := range n {
		wg.Go(func() {
			errs <- runProxy(t, conns[i%len(conns)], fmt.Sprintf("proxy-%d", i), i%2 == 1, ready, synced)
		})
	}
	for range n {
		select {
		case <-ready:
		case err := <-errs:
			t.Fatal(err)
		case <-time.After(30 * time.Second):
			t.Fatal("timed out waiting for initial config")
		}
	}
	b.set(t, cluster("c2", 1))
	b.push(engine.Push{Full: true, Reason: "config"})
	close(synced)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

// runProxy fetches all four types, signals ready, waits for synced and then
// expects the changed cluster c2.
func runProxy(t testing.TB, cc *grpc.ClientConn, id string, delta bool, ready chan<- struct{}, synced <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ads := discoveryv3.NewAggregatedDiscoveryServiceClient(cc)
	node := &corev3.Node{Id: id}
	subs := [][]string{nil, {"c1", "c2"}, nil, {"r1"}}
	types := []string{engine.TypeCluster, engine.TypeEndpoint, engine.TypeListener, engine.TypeRoute}
	wantSizes := []int{2, 2, 1, 1}
	if delta {
		s, err := ads.DeltaAggregatedResources(ctx)
		if err != nil {
			return err
		}
		for i, typ := range types {
			if err := s.Send(&discoveryv3.DeltaDiscoveryRequest{Node: node, TypeUrl: typ, ResourceNamesSubscribe: subs[i]}); err != nil {
				return err
			}
		}
		for i := range types {
			r, err := s.Recv()
			if err != nil {
				return fmt.Errorf("%s: %w", id, err)
			}
			if r.GetTypeUrl() != types[i] || len(r.GetResources()) != wantSizes[i] {
				return fmt.Errorf("%s: got %s with %d resources", id, shortType(r.GetTypeUrl()), len(r.GetResources()))
			}
		}
		ready <- struct{}{}
		<-synced
		r, err := s.Recv()
		if err != nil || r.GetTypeUrl() != engine.TypeCluster || len(r.GetResources()) != 1 || r.GetResources()[0].GetName() != "c2" {
			return fmt.Errorf("%s: after push got %v, %v", id, r, err)
		}
		return nil
	}
	s, err := ads.StreamAggregatedResources(ctx)
	if err != nil {
		return err
	}
	for i, typ := range types {
		if err := s.Send(&discoveryv3.DiscoveryRequest{Node: node, TypeUrl: typ, ResourceNames: subs[i]}); err != nil {
			return err
		}
	}
	for i := range types {
		r, err := s.Recv()
		if err != nil {
			return fmt.Errorf("%s: %w", id, err)
		}
		if r.GetTypeUrl() != types[i] || len(r.GetResources()) != wantSizes[i] {
			return fmt.Errorf("%s: got %s with %d resources", id, shortType(r.GetTypeUrl()), len(r.GetResources()))
		}
	}
	ready <- struct{}{}
	<-synced
	r, err := s.Recv()
	if err != nil || r.GetTypeUrl() != engine.TypeCluster || len(r.GetResources()) != 2 {
		return fmt.Errorf("%s: after push got %v, %v", id, r, err)
	}
	return nil
}

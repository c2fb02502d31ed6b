package serve_test

import (
	"context"
	"slices"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"

	"github.com/pilotfish-mesh/pilotfish/engine"
	"github.com/pilotfish-mesh/pilotfish/serve"
)

// Delta conformance tests; the same ordering argument as the SotW tests
// proves that quiet steps sent nothing.

// deltaClient is a raw Delta ADS client.
type deltaClient struct {
	t      testing.TB
	node   *corev3.Node
	stream discoveryv3.AggregatedDiscoveryService_DeltaAggregatedResourcesClient
	resps  chan *discoveryv3.DeltaDiscoveryResponse
	err    chan error
	cancel context.CancelFunc
}

func newDeltaClient(t testing.TB, cc *grpc.ClientConn, nodeID string) *deltaClient {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	stream, err := discoveryv3.NewAggregatedDiscoveryServiceClient(cc).DeltaAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := &deltaClient{t: t, node: &corev3.Node{Id: nodeID}, stream: stream,
		resps: make(chan *discoveryv3.DeltaDiscoveryResponse, 64), err: make(chan error, 1), cancel: cancel}
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

func (c *deltaClient) send(req *discoveryv3.DeltaDiscoveryRequest) {
	c.t.Helper()
	if c.node != nil {
		req.Node, c.node = c.node, nil
	}
	if err := c.stream.Send(req); err != nil {
		c.t.Fatalf("send: %v", err)
	}
}

func (c *deltaClient) subscribe(typeURL string, names ...string) {
	c.t.Helper()
	c.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: typeURL, ResourceNamesSubscribe: names})
}

func (c *deltaClient) ack(r *discoveryv3.DeltaDiscoveryResponse) {
	c.t.Helper()
	c.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: r.GetTypeUrl(), ResponseNonce: r.GetNonce()})
}

// expect receives a response and checks its type, resource names (sorted;
// each must match the name inside its Any) and removed names.
func (c *deltaClient) expect(typeURL string, names, removed []string) *discoveryv3.DeltaDiscoveryResponse {
	c.t.Helper()
	var r *discoveryv3.DeltaDiscoveryResponse
	select {
	case r = <-c.resps:
	case err := <-c.err:
		c.t.Fatalf("stream ended: %v", err)
	case <-time.After(10 * time.Second):
		c.t.Fatal("timed out waiting for a response")
	}
	if shortType(r.GetTypeUrl()) != shortType(typeURL) {
		c.t.Fatalf("response type %s, want %s", shortType(r.GetTypeUrl()), shortType(typeURL))
	}
	got := []string{}
	for _, res := range r.GetResources() {
		m, err := res.GetResource().UnmarshalNew()
		if err != nil {
			c.t.Fatal(err)
		}
		if nameOf(m) != res.GetName() || res.GetVersion() == "" {
			c.t.Fatalf("resource %q (version %q) holds %q", res.GetName(), res.GetVersion(), nameOf(m))
		}
		got = append(got, res.GetName())
	}
	slices.Sort(got)
	if !slices.Equal(got, names) || !slices.Equal(r.GetRemovedResources(), removed) {
		c.t.Fatalf("%s response: resources %q removed %q, want %q and %q", shortType(typeURL),
			got, r.GetRemovedResources(), names, removed)
	}
	return r
}

func (c *deltaClient) expectQuiet() {
	c.t.Helper()
	select {
	case r := <-c.resps:
		c.t.Fatalf("unexpected %s response: %d resources, removed %q", shortType(r.GetTypeUrl()),
			len(r.GetResources()), r.GetRemovedResources())
	case <-time.After(100 * time.Millisecond):
	}
}

// deltaSynced returns a client that fetched all four types and ACKed them.
func deltaSynced(t *testing.T, cc *grpc.ClientConn, id string) *deltaClient {
	t.Helper()
	c := newDeltaClient(t, cc, id)
	c.subscribe(engine.TypeCluster)
	c.ack(c.expect(engine.TypeCluster, []string{"c1", "c2"}, nil))
	c.subscribe(engine.TypeEndpoint, "c1", "c2")
	c.ack(c.expect(engine.TypeEndpoint, []string{"c1", "c2"}, nil))
	c.subscribe(engine.TypeListener)
	c.ack(c.expect(engine.TypeListener, []string{"svc.test:80"}, nil))
	c.subscribe(engine.TypeRoute, "r1")
	c.ack(c.expect(engine.TypeRoute, []string{"r1"}, nil))
	return c
}

func TestDeltaInitialFetchAndChanges(t *testing.T) {
	b := newTestBackend()
	meshFixture(t, b)
	m := newTestMetrics()
	cc := startServer(t, b, serve.XDSOptions{Metrics: m})
	c := deltaSynced(t, cc, "p")
	s := b.session(t, "p")
	waitFor(t, "4 ACKs", func() bool { a, _ := s.counts(); return a == 4 })

	// Only what changed is sent, in push order.
	b.set(t, cluster("c3", 0), cla("c3", "10.0.0.3", 80), routeConfig("r1", "svc.test:80", "c3"))
	b.set(t, cla("c2", "10.0.0.22", 80))
	b.push(engine.Push{Full: true})
	c.expect(engine.TypeCluster, []string{"c3"}, nil)
	c.expect(engine.TypeEndpoint, []string{"c2"}, nil) // c3 is not subscribed yet
	r := c.expect(engine.TypeRoute, []string{"r1"}, nil)
	c.subscribe(engine.TypeEndpoint, "c3")
	c.expect(engine.TypeEndpoint, []string{"c3"}, nil)
	c.expectQuiet()
	if want := toResource(t, routeConfig("r1", "svc.test:80", "c3")).Version; r.GetResources()[0].GetVersion() != want {
		t.Errorf("resource version %q, want the engine's %q", r.GetResources()[0].GetVersion(), want)
	}
}

func TestDeltaSubscribeUnsubscribe(t *testing.T) {
	b := newTestBackend()
	meshFixture(t, b)
	cc := startServer(t, b, serve.XDSOptions{})
	c := newDeltaClient(t, cc, "p")
	c.subscribe(engine.TypeEndpoint, "c1")
	c.ack(c.expect(engine.TypeEndpoint, []string{"c1"}, nil))
	c.subscribe(engine.TypeEndpoint, "c2")
	c.ack(c.expect(engine.TypeEndpoint, []string{"c2"}, nil))
	// A name that does not exist is reported absent, once.
	c.subscribe(engine.TypeEndpoint, "missing")
	c.ack(c.expect(engine.TypeEndpoint, nil, []string{"missing"}))
	c.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: engine.TypeEndpoint,
		ResourceNamesUnsubscribe: []string{"c1"}, ResourceNamesSubscribe: []string{"x"}})
	c.ack(c.expect(engine.TypeEndpoint, nil, []string{"x"})) // handled before the pushes below

	b.set(t, cla("c1", "10.0.0.7", 80)) // unsubscribed: not sent
	b.push(engine.Push{Types: []string{engine.TypeEndpoint}, Endpoints: []string{"c1"}})
	b.push(engine.Push{Full: true})
	b.set(t, cla("c2", "10.0.0.8", 80))
	b.push(engine.Push{Types: []string{engine.TypeEndpoint}, Endpoints: []string{"c2"}})
	c.ack(c.expect(engine.TypeEndpoint, []string{"c2"}, nil))
	// Resubscribing resends what the proxy dropped; "missing" appears later.
	c.subscribe(engine.TypeEndpoint, "c1")
	c.ack(c.expect(engine.TypeEndpoint, []string{"c1"}, nil))
	b.set(t, cla("missing", "10.0.0.9", 80))
	b.push(engine.Push{Types: []string{engine.TypeEndpoint}, Endpoints: []string{"missing", "c1"}})
	c.expect(engine.TypeEndpoint, []string{"missing"}, nil)
	c.expectQuiet()
}

func TestDeltaWildcardAndRemoval(t *testing.T) {
	b := newTestBackend()
	meshFixture(t, b)
	cc := startServer(t, b, serve.XDSOptions{})
	legacy := newDeltaClient(t, cc, "legacy")
	legacy.subscribe(engine.TypeCluster)
	legacy.ack(legacy.expect(engine.TypeCluster, []string{"c1", "c2"}, nil))
	named := newDeltaClient(t, cc, "named")
	named.subscribe(engine.TypeCluster, "c1")
	named.ack(named.expect(engine.TypeCluster, []string{"c1"}, nil))
	named.subscribe(engine.TypeCluster, "*") // now wildcard too: gets the rest
	named.ack(named.expect(engine.TypeCluster, []string{"c2"}, nil))

	b.remove(engine.TypeCluster, "c2")
	b.push(engine.Push{Full: true})
	legacy.ack(legacy.expect(engine.TypeCluster, nil, []string{"c2"}))
	named.ack(named.expect(engine.TypeCluster, nil, []string{"c2"}))

	// Dropping the wildcard keeps only the explicit names.
	// (Subscribing to a missing name in the same request makes the server
	// answer, so the test knows the request was handled before the push.)
	named.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: engine.TypeCluster,
		ResourceNamesUnsubscribe: []string{"*"}, ResourceNamesSubscribe: []string{"x"}})
	named.expect(engine.TypeCluster, nil, []string{"x"})
	b.set(t, cluster("c2", 0))
	b.push(engine.Push{Full: true})
	legacy.expect(engine.TypeCluster, []string{"c2"}, nil)
	b.set(t, cluster("c1", 1))
	b.push(engine.Push{Full: true})
	named.expect(engine.TypeCluster, []string{"c1"}, nil)
	named.expectQuiet()
}

func TestDeltaReconnectWithInitialVersions(t *testing.T) {
	b := newTestBackend()
	meshFixture(t, b)
	cc := startServer(t, b, serve.XDSOptions{})
	first := newDeltaClient(t, cc, "p")
	first.subscribe(engine.TypeCluster)
	held := map[string]string{}
	for _, r := range first.expect(engine.TypeCluster, []string{"c1", "c2"}, nil).GetResources() {
		held[r.GetName()] = r.GetVersion()
	}
	first.cancel()

	// While disconnected: c2 changes, c3 appears; the proxy also holds a
	// cluster the server no longer has.
	b.set(t, cluster("c2", 1), cluster("c3", 0))
	held["gone"] = "v0"
	again := newDeltaClient(t, cc, "p")
	again.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: engine.TypeCluster, InitialResourceVersions: held})
	again.ack(again.expect(engine.TypeCluster, []string{"c2", "c3"}, []string{"gone"}))

	// Nothing changed for a non-wildcard reconnect: the answer is empty.
	again.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: engine.TypeEndpoint, ResourceNamesSubscribe: []string{"c1"},
		InitialResourceVersions: map[string]string{"c1": toResource(t, cla("c1", "10.0.0.1", 80)).Version}})
	again.expect(engine.TypeEndpoint, nil, nil)
	again.expectQuiet()
}

func TestDeltaNackAndStaleNonce(t *testing.T) {
	b := newTestBackend()
	meshFixture(t, b)
	m := newTestMetrics()
	cc := startServer(t, b, serve.XDSOptions{Metrics: m})
	c := deltaSynced(t, cc, "p")
	s := b.session(t, "p")

	b.set(t, cluster("c1", 1))
	b.push(engine.Push{Full: true})
	bad := c.expect(engine.TypeCluster, []string{"c1"}, nil)
	c.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: engine.TypeCluster, ResponseNonce: bad.GetNonce(),
		ErrorDetail: &status.Status{Code: 3, Message: "bad c1"}})
	waitFor(t, "NACK recorded", func() bool { _, n := s.counts(); return n == 1 })
	if m.rejectedOf(engine.TypeCluster) != 1 {
		t.Errorf("rejections not counted")
	}
	b.push(engine.Push{Full: true}) // no change: the rejected c1 is not resent

	// A stale nonce: its NACK is ignored, its subscription applies.
	c.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: engine.TypeCluster, ResponseNonce: "1",
		ErrorDetail: &status.Status{Message: "late"}, ResourceNamesSubscribe: []string{"*"}})
	c.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: engine.TypeEndpoint, ResponseNonce: "1",
		ResourceNamesUnsubscribe: []string{"c1"}, ResourceNamesSubscribe: []string{"missing"}})
	c.expect(engine.TypeEndpoint, nil, []string{"missing"})

	b.set(t, cluster("c1", 2))
	b.push(engine.Push{Full: true})
	good := c.expect(engine.TypeCluster, []string{"c1"}, nil)
	if good.GetResources()[0].GetVersion() == bad.GetResources()[0].GetVersion() {
		t.Fatal("resent the rejected version")
	}
	c.expectQuiet()
	if _, n := s.counts(); n != 1 {
		t.Errorf("%d NACKs recorded, want 1", n)
	}
}

func TestDeltaPushWithoutChangeSendsNothing(t *testing.T) {
	b := newTestBackend()
	meshFixture(t, b)
	cc := startServer(t, b, serve.XDSOptions{})
	c := deltaSynced(t, cc, "p")
	meshFixture(t, b)
	b.push(engine.Push{Full: true})
	b.push(engine.Push{Types: []string{engine.TypeEndpoint}, Endpoints: []string{"c1", "c2"}})
	b.set(t, apiListener(t, "svc.test:80", "r2"))
	b.push(engine.Push{Full: true})
	c.expect(engine.TypeListener, []string{"svc.test:80"}, nil)
	c.expectQuiet()
}

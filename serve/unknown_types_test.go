package serve_test

import (
	"context"
	"errors"
	"io"
	"maps"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/pilotfish-mesh/pilotfish/ca"
	"github.com/pilotfish-mesh/pilotfish/engine"
	"github.com/pilotfish-mesh/pilotfish/serve"
)

// runtimeType is an Envoy type no istiod generator serves (RTDS).
const runtimeType = "type.googleapis.com/envoy.service.runtime.v3.Runtime"

// sotwEnds waits for c's stream to end and returns its status.
func sotwEnds(t *testing.T, c *sotwClient) *status.Status {
	t.Helper()
	select {
	case r := <-c.resps:
		t.Fatalf("answered %s with %d resources, want the stream ended", shortType(r.GetTypeUrl()), len(r.GetResources()))
	case err := <-c.err:
		st, _ := status.FromError(err)
		return st
	case <-time.After(10 * time.Second):
		t.Fatal("timed out waiting for the stream to end")
	}
	return nil
}

// TestUnknownTypesSotW: types the engine does not serve, answered as
// istiod answers them on a sidecar's plaintext stream. Ordering proves
// what is left unanswered: requests are handled in order, so the CDS
// response that follows is the next response only if the ones before got
// none.
func TestUnknownTypesSotW(t *testing.T) {
	b := newTestBackend()
	meshFixture(t, b)
	m := newCountMetrics()
	cc := startServer(t, b, serve.XDSOptions{Metrics: m})
	sidecar := func(id string) *sotwClient {
		c := newSotWClient(t, cc, id)
		c.node = node(t, "sidecar", "shop", map[string]string{"NAMESPACE": "shop"})
		c.node.Id = "sidecar~10.0.0.1~" + id + ".shop~shop.svc.cluster.local"
		return c
	}

	// ECDS and istiod's ambient types: an empty set, once; its ACK and
	// later pushes get nothing more.
	c := sidecar("a")
	c.request(serve.TypeExtensionConfig, "ext-1")
	ecds := c.expect(serve.TypeExtensionConfig)
	c.request(serve.TypeWorkload)
	wds := c.expect(serve.TypeWorkload)
	c.ack(ecds, "ext-1", "ext-2")
	c.expect(serve.TypeExtensionConfig) // a new name: the set again, still empty
	c.ack(wds)
	// PCDS and health reports: left unanswered; the stream goes on.
	c.request(serve.TypeProxyConfig)
	c.request(serve.TypeHealthInfo)
	c.request(engine.TypeCluster)
	c.expect(engine.TypeCluster, "c1", "c2")
	b.set(t, cluster("c1", 1))
	b.push(engine.Push{Full: true})
	c.expect(engine.TypeCluster, "c1", "c2")
	c.expectQuiet()

	// Anything else: istiod's api generator, for root-namespace callers
	// only; a plaintext stream has no identity.
	c = sidecar("b")
	c.request(runtimeType)
	if st := sotwEnds(t, c); st.Code() != codes.Unauthenticated || !strings.Contains(st.Message(), "istio-system") {
		t.Errorf("other type on plaintext: %v %q, want Unauthenticated naming the root namespace", st.Code(), st.Message())
	}

	// A proxyless gRPC client: its generator leaves other types unanswered.
	c = newSotWClient(t, cc, "grpc")
	c.node = node(t, "sidecar", "shop", map[string]string{"GENERATOR": "grpc"})
	c.request(runtimeType)
	c.request(engine.TypeCluster)
	c.expect(engine.TypeCluster, "c1", "c2")

	_, got := m.snapshot()
	want := map[string]int{serve.UnknownECDS: 1, serve.UnknownWDS: 1, serve.UnknownPCDS: 1, serve.UnknownHealth: 1, serve.UnknownOther: 2}
	if !maps.Equal(got, want) {
		t.Errorf("unknown type requests %v, want %v", got, want)
	}
}

// TestUnknownTypesDelta: the same on Delta. An empty-set type reports the
// names subscribed as removed (they do not exist), as istiod's Delta does
// for a generator's empty answer.
func TestUnknownTypesDelta(t *testing.T) {
	b := newTestBackend()
	meshFixture(t, b)
	m := newCountMetrics()
	cc := startServer(t, b, serve.XDSOptions{Metrics: m})

	c := newDeltaClient(t, cc, "a")
	c.node = node(t, "sidecar", "shop", nil)
	c.subscribe(serve.TypeExtensionConfig, "ext-1", "ext-2")
	r := c.expect(serve.TypeExtensionConfig, []string{}, []string{"ext-1", "ext-2"})
	c.ack(r)
	c.subscribe(serve.TypeExtensionConfig, "ext-3")
	c.expect(serve.TypeExtensionConfig, []string{}, []string{"ext-3"})
	c.subscribe(serve.TypeAddress)
	c.expect(serve.TypeAddress, []string{}, nil)
	c.subscribe(serve.TypeProxyConfig)
	c.subscribe(serve.TypeHealthInfo)
	c.subscribe(engine.TypeCluster)
	c.expect(engine.TypeCluster, []string{"c1", "c2"}, nil)
	b.set(t, cluster("c2", 1))
	b.push(engine.Push{Full: true})
	c.expect(engine.TypeCluster, []string{"c2"}, nil)
	c.expectQuiet()

	c = newDeltaClient(t, cc, "b")
	c.node = node(t, "sidecar", "shop", nil)
	c.subscribe(runtimeType, "x")
	select {
	case r := <-c.resps:
		t.Fatalf("answered %s", shortType(r.GetTypeUrl()))
	case err := <-c.err:
		if status.Code(err) != codes.Unauthenticated {
			t.Errorf("other type on plaintext Delta: %v, want Unauthenticated", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("timed out waiting for the stream to end")
	}

	c = newDeltaClient(t, cc, "grpc")
	c.node = node(t, "sidecar", "shop", map[string]string{"GENERATOR": "grpc"})
	c.subscribe(runtimeType)
	c.subscribe(engine.TypeCluster)
	c.expect(engine.TypeCluster, []string{"c1", "c2"}, nil)

	_, got := m.snapshot()
	want := map[string]int{serve.UnknownECDS: 1, serve.UnknownWDS: 1, serve.UnknownPCDS: 1, serve.UnknownHealth: 1, serve.UnknownOther: 2}
	if !maps.Equal(got, want) {
		t.Errorf("unknown type requests %v, want %v", got, want)
	}
}

// TestUnknownTypesTLS: on the TLS port, other types are answered with an
// empty set to a caller authenticated in the root namespace, and end the
// stream of any other caller with PermissionDenied.
func TestUnknownTypesTLS(t *testing.T) {
	b := newTestBackend()
	meshFixture(t, b)
	p := startTLSPort(t, b, func(a *ca.Authority) serve.AuthOptions { return serve.AuthOptions{Authenticator: a} })
	open := func(uri string, n *corev3.Node) discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesClient {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		t.Cleanup(cancel)
		st, err := discoveryv3.NewAggregatedDiscoveryServiceClient(p.dial(t, p.cert(t, uri))).StreamAggregatedResources(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Send(&discoveryv3.DiscoveryRequest{Node: n, TypeUrl: runtimeType}); err != nil && !errors.Is(err, io.EOF) {
			t.Fatal(err) // io.EOF: the server ended the stream, Recv has the status
		}
		return st
	}

	st := open("spiffe://cluster.local/ns/istio-system/sa/istiod", node(t, "sidecar", "istio-system", nil))
	r, err := st.Recv()
	if err != nil || r.GetTypeUrl() != runtimeType || len(r.GetResources()) != 0 {
		t.Fatalf("root namespace: %v, %v; want an empty %s response", r, err, runtimeType)
	}
	if err := st.Send(&discoveryv3.DiscoveryRequest{TypeUrl: engine.TypeCluster}); err != nil {
		t.Fatal(err)
	}
	if r, err = st.Recv(); err != nil || r.GetTypeUrl() != engine.TypeCluster {
		t.Fatalf("root namespace, then CDS: %v, %v", r, err)
	}

	st = open(cart, node(t, "sidecar", "shop", nil))
	_, err = st.Recv()
	if s, _ := status.FromError(err); s.Code() != codes.PermissionDenied || !strings.Contains(s.Message(), cart) {
		t.Errorf("shop caller: %v %q, want PermissionDenied naming it", s.Code(), s.Message())
	}
}

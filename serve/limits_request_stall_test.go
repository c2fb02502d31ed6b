package serve_test

import (
	"context"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"

	"github.com/pilotfish-mesh/pilotfish/engine"
	"github.com/pilotfish-mesh/pilotfish/serve"
)

// A write blocked on the receiver's side: the response to a request, not a
// push (limits_test.go covers those). The receiver then holds the stream's
// mutex, and the pusher must neither hold its throttle slot while it waits
// for it nor lose the push.

// unreadStream opens a SotW stream and asks for CDS twice (the second a new
// watch, which is answered again), then reads nothing until the test calls
// Recv. gRPC queues one response of any size without blocking, so it is the
// second answer whose write blocks.
func unreadStream(t *testing.T, cc *grpc.ClientConn, id string) discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesClient {
	t.Helper()
	st := cdsStream(t, cc, id)
	if err := st.Send(&discoveryv3.DiscoveryRequest{TypeUrl: engine.TypeCluster}); err != nil {
		t.Fatal(err)
	}
	return st
}

// TestStalledResponseGivesBackItsSlots: a proxy that asks for CDS and does
// not read blocks the write of its answer. Its admission slot comes back
// (with RequestConcurrency 1 another proxy is answered), a push signalled
// during the stall gets PushDone at once, and once the proxy reads it gets
// the answer and then the push.
func TestStalledResponseGivesBackItsSlots(t *testing.T) {
	b := newTestBackend()
	bigClusters(t, b, 3000, 0)
	addr := startLimitServer(t, b, serve.XDSOptions{Limits: serve.Limits{RequestConcurrency: 1}})
	st := unreadStream(t, dialFixedWindow(t, addr), "stalled")
	s := b.session(t, "stalled")

	// The only admission slot is the stalled stream's until its write has
	// been blocked for a second; then the healthy proxy is answered.
	healthy := newSotWClient(t, dial(t, addr), "healthy")
	healthy.request(engine.TypeCluster)
	healthy.ack(healthy.recv())

	bigClusters(t, b, 3000, 1)
	b.push(engine.Push{Full: true})
	healthy.ack(healthy.recv())
	waitFor(t, "the slot of the push signalled during the stall given back", func() bool {
		signals, dones, _ := s.progress()
		return signals == 1 && dones == 1
	})
	if _, _, sent := s.progress(); sent != 1 {
		t.Fatalf("%d responses recorded as sent while the proxy is not reading", sent)
	}

	// The proxy reads: both answers of generation 0, then the push of 1.
	for i, gen := range []int{0, 0, 1} {
		r, err := st.Recv()
		if err != nil {
			t.Fatalf("recv: %v", err)
		}
		c := unmarshalCluster(t, r.Resources[0].Value)
		if want := cluster("x", gen).GetConnectTimeout().AsDuration(); c.GetConnectTimeout().AsDuration() != want || len(r.Resources) != 3000 {
			t.Fatalf("response %d: %d clusters, connect timeout %v, want generation %d", i, len(r.Resources), c.GetConnectTimeout().AsDuration(), gen)
		}
		if err := st.Send(&discoveryv3.DiscoveryRequest{TypeUrl: r.TypeUrl, VersionInfo: r.VersionInfo, ResponseNonce: r.Nonce}); err != nil {
			t.Fatal(err)
		}
	}
	// Earlier ACKs may be stale by the time they arrive; the push's is not.
	waitFor(t, "the push's ACK", func() bool { acks, _ := s.counts(); return acks >= 1 })
}

// TestSendTimeoutOnStalledResponse: the send timeout also ends a stream
// whose answer to a request stays blocked, with DeadlineExceeded, counted
// as a timeout of that type.
func TestSendTimeoutOnStalledResponse(t *testing.T) {
	b := newTestBackend()
	bigClusters(t, b, 3000, 0)
	metrics := &errorMetrics{}
	addr := startLimitServer(t, b, serve.XDSOptions{Metrics: metrics, Limits: serve.Limits{SendTimeout: 1500 * time.Millisecond}})
	st := unreadStream(t, dialFixedWindow(t, addr), "stalled")
	s := b.session(t, "stalled")
	expectSendTimeout(t, s, st, metrics)
}

// gatedBackend is a testBackend whose sessions' Generate blocks, for the
// node gated, until gate is closed.
type gatedBackend struct {
	*testBackend
	gated string
	gate  chan struct{}
}

func (b *gatedBackend) Connect(ctx context.Context, node *corev3.Node, addr string) (serve.Session, error) {
	s, err := b.testBackend.Connect(ctx, node, addr)
	if err != nil || node.GetId() != b.gated {
		return s, err
	}
	return gatedSession{Session: s, gate: b.gate}, nil
}

type gatedSession struct {
	serve.Session
	gate chan struct{}
}

func (s gatedSession) Generate(typeURL string, names []string, wildcard bool, dst []engine.Resource) ([]engine.Resource, error) {
	<-s.gate
	return s.Session.Generate(typeURL, names, wildcard, dst)
}

// TestPushWaitingBehindRequestHoldsNoSlot: a stream whose receiver is
// waiting for an admission slot (every one is taken) gives the engine's
// push slot back as soon as a push is signalled, so pushes to other
// streams never queue behind requests; the push still reaches the proxy.
func TestPushWaitingBehindRequestHoldsNoSlot(t *testing.T) {
	b := &gatedBackend{testBackend: newTestBackend(), gated: "hog", gate: make(chan struct{})}
	b.set(t, cluster("c1", 0))
	addr := startLimitServer(t, b, serve.XDSOptions{Limits: serve.Limits{RequestConcurrency: 1}})
	cc := dial(t, addr)

	// The hog takes the only admission slot and keeps it, generating.
	hog := newSotWClient(t, cc, "hog")
	hog.request(engine.TypeCluster)
	b.session(t, "hog")
	// The waiter's receiver waits for that slot, holding its stream.
	waiter := newSotWClient(t, cc, "waiter")
	waiter.request(engine.TypeCluster)
	s := b.session(t, "waiter")

	b.set(t, cluster("c1", 1))
	b.push(engine.Push{Full: true})
	waitFor(t, "the waiter's push slot given back while its request waits", func() bool {
		signals, dones, _ := s.progress()
		return signals == 1 && dones == 1
	})
	if _, _, sent := s.progress(); sent != 0 {
		t.Fatalf("%d responses sent to the waiter before it was admitted", sent)
	}

	close(b.gate)
	r := waiter.recv()
	if c := unmarshalCluster(t, r.Resources[0].Value); c.GetConnectTimeout().AsDuration() != cluster("c1", 1).GetConnectTimeout().AsDuration() {
		t.Fatalf("the waiter got %v, want the pushed generation", c.GetConnectTimeout().AsDuration())
	}
	hog.recv()
}

package serve_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

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
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	st, err := discoveryv3.NewAggregatedDiscoveryServiceClient(cc).StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: id}, TypeUrl: engine.TypeCluster}); err != nil {
		t.Fatal(err)
	}
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
	select {
	case <-s.closed:
	case <-time.After(30 * time.Second):
		t.Fatal("the stalled stream was not closed")
	}
	var err error
	for err == nil {
		_, err = st.Recv()
	}
	if status.Code(err) != codes.DeadlineExceeded || !strings.Contains(err.Error(), "not reading") {
		t.Fatalf("stalled stream ended with %v, want DeadlineExceeded", err)
	}
	if got := metrics.list(); !slices.Equal(got, []string{engine.TypeCluster + " timeout"}) {
		t.Fatalf("push errors %q, want one CDS timeout", got)
	}
}

package serve_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/pilotfish-mesh/pilotfish/engine"
	"github.com/pilotfish-mesh/pilotfish/serve"
)

// Resilience tests (limits.go): a proxy that stops reading, send timeouts,
// subscription and per-client limits, and a panicking generator.

// startLimitServer serves b with opts and returns its address.
func startLimitServer(t *testing.T, b serve.Backend, opts serve.XDSOptions) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(serve.ServerOptions()...)
	serve.NewXDSServer(b, opts).Register(gs)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	return lis.Addr().String()
}

// dialFixedWindow dials with fixed 64 KiB HTTP/2 windows (no BDP growth), so
// a client that stops reading blocks the server's writes after a few
// hundred kilobytes, as a stuck Envoy does.
func dialFixedWindow(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(1<<16), grpc.WithInitialConnWindowSize(1<<16))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// bigClusters sets n clusters with long names and generation gen: about
// 200 bytes each, so a CDS response of 3,000 is ~600 KB, far beyond the
// flow-control windows.
func bigClusters(t *testing.T, b *testBackend, n, gen int) {
	t.Helper()
	msgs := make([]proto.Message, n)
	for i := range msgs {
		msgs[i] = cluster(fmt.Sprintf("outbound|8080||service-%05d.%s.svc.cluster.local", i, strings.Repeat("namespace", 12)), gen)
	}
	b.set(t, msgs...)
}

// cdsStream opens a SotW stream for node id and asks for CDS; it reads
// nothing.
func cdsStream(t *testing.T, cc *grpc.ClientConn, id string) discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesClient {
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
	return st
}

// stalledStream opens a SotW stream, receives and ACKs its CDS response,
// then reads nothing more until the test calls recv.
func stalledStream(t *testing.T, cc *grpc.ClientConn, id string) discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesClient {
	t.Helper()
	st := cdsStream(t, cc, id)
	r, err := st.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&discoveryv3.DiscoveryRequest{TypeUrl: r.TypeUrl, VersionInfo: r.VersionInfo, ResponseNonce: r.Nonce}); err != nil {
		t.Fatal(err)
	}
	return st
}

func (s *testSession) progress() (signals, pushDones, sent int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.signals, s.pushDones, len(s.sent)
}

// TestStalledProxyGivesBackItsSlot: a proxy that stops reading blocks its
// stream's write; the stream must still answer every push signal with
// PushDone (the engine's throttle slot) while that write is blocked, and
// send the merged latest config once the proxy reads again.
func TestStalledProxyGivesBackItsSlot(t *testing.T) {
	b := newTestBackend()
	bigClusters(t, b, 3000, 0)
	cc := dialFixedWindow(t, startLimitServer(t, b, serve.XDSOptions{}))
	st := stalledStream(t, cc, "stalled")
	s := b.session(t, "stalled")
	waitFor(t, "the CDS ACK", func() bool { acks, _ := s.counts(); return acks == 1 })

	// Two changes: the first response is queued by gRPC, the second's
	// write blocks on flow control.
	bigClusters(t, b, 3000, 1)
	b.push(engine.Push{Full: true})
	waitFor(t, "the first push sent", func() bool { _, _, sent := s.progress(); return sent == 2 })
	bigClusters(t, b, 3000, 2)
	b.push(engine.Push{Full: true})
	waitFor(t, "the slot of the blocked push given back", func() bool {
		signals, dones, _ := s.progress()
		return signals == 2 && dones == 2
	})
	if _, _, sent := s.progress(); sent != 2 {
		t.Fatalf("%d responses recorded as sent; the third must still be blocked", sent)
	}
	// A push while the write is blocked: its slot comes back at once.
	bigClusters(t, b, 3000, 3)
	b.push(engine.Push{Full: true})
	waitFor(t, "the slot of a push signalled during the stall given back", func() bool {
		signals, dones, _ := s.progress()
		return signals == 3 && dones == 3
	})
	if _, _, sent := s.progress(); sent != 2 {
		t.Fatalf("%d responses recorded as sent while the proxy is not reading", sent)
	}

	// The proxy reads again: it gets generation 1, 2, then the pending
	// generation 3.
	want := cluster("x", 3).GetConnectTimeout().AsDuration()
	for i := 0; ; i++ {
		r, err := st.Recv()
		if err != nil {
			t.Fatalf("recv: %v", err)
		}
		if i > 3 {
			t.Fatalf("%d responses without generation 3", i)
		}
		if len(r.Resources) != 3000 {
			t.Fatalf("response with %d clusters", len(r.Resources))
		}
		c := unmarshalCluster(t, r.Resources[0].Value)
		if c.GetConnectTimeout().AsDuration() == want {
			break
		}
	}
}

// TestSendTimeoutClosesStalledStream: with a send timeout, a stream whose
// write stays blocked ends with DeadlineExceeded and its session closes;
// other streams are unaffected.
func TestSendTimeoutClosesStalledStream(t *testing.T) {
	b := newTestBackend()
	bigClusters(t, b, 3000, 0)
	metrics := &errorMetrics{}
	addr := startLimitServer(t, b, serve.XDSOptions{Metrics: metrics, Limits: serve.Limits{SendTimeout: 1500 * time.Millisecond}})
	st := stalledStream(t, dialFixedWindow(t, addr), "stalled")
	s := b.session(t, "stalled")
	healthy := newSotWClient(t, dial(t, addr), "healthy")
	healthy.request(engine.TypeCluster)
	healthy.ack(healthy.recv())
	waitFor(t, "the CDS ACKs", func() bool { acks, _ := s.counts(); return acks == 1 })

	for gen := 1; gen <= 2; gen++ {
		bigClusters(t, b, 3000, gen)
		b.push(engine.Push{Full: true})
		healthy.ack(healthy.recv())
	}
	expectSendTimeout(t, s, st, metrics)
	bigClusters(t, b, 3000, 3)
	b.push(engine.Push{Full: true})
	if r := healthy.recv(); len(r.Resources) != 3000 {
		t.Fatalf("healthy stream got %d clusters", len(r.Resources))
	}
}

// expectSendTimeout waits for the stalled stream st (session s) to be
// closed by the send timeout: the proxy reads DeadlineExceeded after the
// responses queued before it, and one CDS timeout is counted.
func expectSendTimeout(t *testing.T, s *testSession, st discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesClient, metrics *errorMetrics) {
	t.Helper()
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

// TestSubscribedNamesLimit: a stream asking for more names of a type than
// the limit ends with ResourceExhausted, SotW and Delta.
func TestSubscribedNamesLimit(t *testing.T) {
	b := newTestBackend()
	meshFixture(t, b)
	addr := startLimitServer(t, b, serve.XDSOptions{Limits: serve.Limits{MaxSubscribedNames: 3}})
	cc := dial(t, addr)

	t.Run("sotw", func(t *testing.T) {
		c := newSotWClient(t, cc, "sotw")
		c.request(engine.TypeEndpoint, "c1", "c2")
		c.recv()
		c.request(engine.TypeEndpoint, "c1", "c2", "c3", "c4")
		err := <-c.err
		if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "limit of 3 names") {
			t.Fatalf("got %v, want ResourceExhausted naming the limit", err)
		}
	})
	t.Run("delta", func(t *testing.T) {
		st, err := discoveryv3.NewAggregatedDiscoveryServiceClient(cc).DeltaAggregatedResources(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		send := func(r *discoveryv3.DeltaDiscoveryRequest) {
			if err := st.Send(r); err != nil {
				t.Fatal(err)
			}
		}
		send(&discoveryv3.DeltaDiscoveryRequest{Node: &corev3.Node{Id: "delta"}, TypeUrl: engine.TypeEndpoint,
			ResourceNamesSubscribe: []string{"c1", "c2"}})
		if _, err := st.Recv(); err != nil {
			t.Fatal(err)
		}
		send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: engine.TypeEndpoint, ResourceNamesSubscribe: []string{"c3", "c4"}})
		for err == nil {
			_, err = st.Recv()
		}
		if status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("got %v, want ResourceExhausted", err)
		}
	})
}

// TestStreamsPerClientLimit: streams beyond the per-client limit are
// refused with ResourceExhausted until one closes.
func TestStreamsPerClientLimit(t *testing.T) {
	b := newTestBackend()
	meshFixture(t, b)
	cc := dial(t, startLimitServer(t, b, serve.XDSOptions{Limits: serve.Limits{MaxStreamsPerClient: 2}}))
	var open []*sotwClient
	for i := range 2 {
		c := newSotWClient(t, cc, fmt.Sprintf("p%d", i))
		c.request(engine.TypeCluster)
		c.recv()
		open = append(open, c)
	}
	over := newSotWClient(t, cc, "p2")
	over.request(engine.TypeCluster)
	if err := <-over.err; status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "127.0.0.1") {
		t.Fatalf("third stream: %v, want ResourceExhausted naming the client", err)
	}
	open[0].cancel()
	<-b.session(t, "p0").closed
	again := newSotWClient(t, cc, "p3")
	again.request(engine.TypeCluster)
	if r := again.recv(); len(r.Resources) != 2 {
		t.Fatalf("after a close: %d clusters", len(r.Resources))
	}
}

// errorMetrics records PushError calls as "type reason".
type errorMetrics struct {
	serve.NopXDSMetrics
	mu   sync.Mutex
	errs []string // guarded by mu
}

func (m *errorMetrics) PushError(typeURL, reason string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.errs = append(m.errs, typeURL+" "+reason)
}

func (m *errorMetrics) list() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.errs)
}

// panicBackend wraps testBackend with sessions whose Generate panics for one
// type.
type panicBackend struct {
	*testBackend
	typeURL string
}

func (b panicBackend) Connect(ctx context.Context, node *corev3.Node, peer string) (serve.Session, error) {
	s, err := b.testBackend.Connect(ctx, node, peer)
	if err != nil {
		return nil, err
	}
	return panicSession{Session: s, typeURL: b.typeURL}, nil
}

type panicSession struct {
	serve.Session
	typeURL string
}

func (s panicSession) Generate(typeURL string, names []string, wildcard bool, dst []engine.Resource) ([]engine.Resource, error) {
	if typeURL == s.typeURL {
		var m map[string]int
		m["boom"]++ // a nil map write: a runtime panic, as a generator bug would be
	}
	return s.Session.Generate(typeURL, names, wildcard, dst)
}

// syncBuffer is a bytes.Buffer safe for a logger's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *syncBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// TestGeneratePanicFailsOneStream: a panic while building one proxy's
// config ends that stream with Internal and is logged with the proxy id;
// the server and other streams go on.
func TestGeneratePanicFailsOneStream(t *testing.T) {
	b := newTestBackend()
	meshFixture(t, b)
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	metrics := &errorMetrics{}
	cc := dial(t, startLimitServer(t, panicBackend{b, engine.TypeRoute}, serve.XDSOptions{Logger: log, Metrics: metrics}))

	bad := newSotWClient(t, cc, "bad-proxy")
	bad.request(engine.TypeRoute, "r1")
	if err := <-bad.err; status.Code(err) != codes.Internal {
		t.Fatalf("panicking stream ended with %v, want Internal", err)
	}
	if out := logs.String(); !strings.Contains(out, "panicked") || !strings.Contains(out, "proxy=bad-proxy") ||
		!strings.Contains(out, "assignment to entry in nil map") {
		t.Fatalf("log does not name the proxy and the panic:\n%s", out)
	}
	if got := metrics.list(); !slices.Equal(got, []string{engine.TypeRoute + " panic"}) {
		t.Fatalf("push errors %q, want one RDS panic", got)
	}
	for _, id := range []string{"good-1", "good-2"} {
		c := newSotWClient(t, cc, id)
		c.request(engine.TypeCluster)
		if r := c.recv(); len(r.Resources) != 2 {
			t.Fatalf("%s: %d clusters", id, len(r.Resources))
		}
	}
}

func unmarshalCluster(t *testing.T, b []byte) *clusterv3.Cluster {
	t.Helper()
	c := &clusterv3.Cluster{}
	if err := proto.Unmarshal(b, c); err != nil {
		t.Fatal(err)
	}
	return c
}

package serve_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/pilotfish-mesh/pilotfish/engine"
	"github.com/pilotfish-mesh/pilotfish/serve"
)

// The adversarial suite (issue 21): each test runs one attack from the
// family an unauthenticated client on the plaintext xDS port can mount,
// on loopback and bounded in time, and asserts that
//   - heap after GC, once the attackers are gone, is back within
//     heapMargin of the baseline taken before the attack, and
//   - a canary proxy (a real SotW client on its own connection) stays in
//     sync: a config change pushed during the attack reaches it and it
//     ACKs it.
// Attack sizes are scaled down from the (1 MB, 300 requests) so a
// test takes seconds on a loaded 2-core machine, but each one leaked
// several times heapMargin before the fixes. Each test logs heap after GC
// before, during and after (go test -v -run Adversarial).

// heapMargin is how far above its baseline heap after GC may end.
const heapMargin = 6 << 20

// heapAfterGC returns the heap in use once garbage collection has settled:
// GC, let cleanups (weak_table.go) and exiting goroutines run, repeat
// until two readings agree.
func heapAfterGC() uint64 {
	var ms runtime.MemStats
	var prev uint64
	for i := range 10 {
		runtime.GC()
		time.Sleep(20 * time.Millisecond)
		runtime.ReadMemStats(&ms)
		if i >= 2 && ms.HeapAlloc <= prev+256<<10 && prev <= ms.HeapAlloc+256<<10 {
			break
		}
		prev = ms.HeapAlloc
	}
	return ms.HeapAlloc
}

func mib(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// logSink counts what a server logs, keeping none of it.
type logSink struct {
	mu             sync.Mutex
	bytes, longest int // guarded by mu
}

func (s *logSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bytes += len(p)
	s.longest = max(s.longest, len(p))
	return len(p), nil
}

func (s *logSink) stats() (bytes, longest int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bytes, s.longest
}

// advServer is a server under attack: serve's XDSServer on a real gRPC
// server on loopback, with a testBackend whose sessions are forgotten when
// they close (so the backend keeps nothing of an attacker either), and a
// log sink at Info level.
type advServer struct {
	addr    string
	srv     *serve.XDSServer
	b       *testBackend
	metrics *testMetrics
	logs    *logSink
	keep    int // streams that are not the attackers' (the canary's)

	mu        sync.Mutex
	attackers []*grpc.ClientConn // guarded by mu
}

// attacker dials a connection of an attacker's: leave closes it.
func (a *advServer) attacker(t *testing.T, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient(a.addr, append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	a.mu.Lock()
	a.attackers = append(a.attackers, cc)
	a.mu.Unlock()
	return cc
}

// leave closes every attacker's connection and waits until only the
// canary's stream is left.
func (a *advServer) leave(t *testing.T) {
	t.Helper()
	a.mu.Lock()
	ccs := a.attackers
	a.attackers = nil
	a.mu.Unlock()
	for _, cc := range ccs {
		_ = cc.Close()
	}
	a.waitStreams(t, a.keep)
}

func startAdv(t *testing.T, opts serve.XDSOptions, gopts ...grpc.ServerOption) *advServer {
	t.Helper()
	return startAdvBackend(t, newTestBackend(), nil, opts, gopts...)
}

// startAdvBackend serves b; connect, when set, vets each node before b
// registers it (as the engine's Connect does).
func startAdvBackend(t *testing.T, b *testBackend, connect func(*corev3.Node) error, opts serve.XDSOptions, gopts ...grpc.ServerOption) *advServer {
	t.Helper()
	meshFixture(t, b)
	a := &advServer{b: b, metrics: newTestMetrics(), logs: &logSink{}, keep: 1}
	opts.Metrics = a.metrics
	opts.Logger = slog.New(slog.NewTextHandler(a.logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(append(serve.ServerOptions(), gopts...)...)
	a.srv = serve.NewXDSServer(forgetfulBackend{b, connect}, opts)
	a.srv.Register(gs)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	a.addr = lis.Addr().String()
	return a
}

// streams is the number of live streams the server's registry holds.
func (a *advServer) streams() int { return len(a.srv.Connections()) }

// waitStreams waits until the server holds exactly n streams.
func (a *advServer) waitStreams(t *testing.T, n int) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%d live streams", n), func() bool { return a.streams() == n })
}

// forgetfulBackend is testBackend, forgetting each session when it closes.
type forgetfulBackend struct {
	b       *testBackend
	connect func(*corev3.Node) error
}

func (f forgetfulBackend) Connect(ctx context.Context, node *corev3.Node, peer string) (serve.Session, error) {
	if f.connect != nil {
		if err := f.connect(node); err != nil {
			return nil, err
		}
	}
	s, err := f.b.Connect(ctx, node, peer)
	if err != nil {
		return nil, err
	}
	return forgetfulSession{s.(*testSession)}, nil
}

type forgetfulSession struct{ *testSession }

func (s forgetfulSession) Close() {
	s.testSession.Close()
	s.b.mu.Lock()
	if s.b.sessions[s.id] == s.testSession {
		delete(s.b.sessions, s.id)
	}
	s.b.mu.Unlock()
}

// canary is a well-behaved proxy: a SotW stream on its own connection
// that subscribes to every cluster and ACKs every response.
type canary struct {
	t    *testing.T
	a    *advServer
	sess *testSession
	gen  int

	mu   sync.Mutex
	last *discoveryv3.DiscoveryResponse // guarded by mu
	err  error                          // guarded by mu
}

const (
	canaryCluster = "canary-cluster"
	canaryID      = "sidecar~10.0.0.1~canary.ns~ns.svc.cluster.local"
)

func startCanary(t *testing.T, a *advServer) *canary {
	t.Helper()
	cc := dial(t, a.addr)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	st, err := discoveryv3.NewAggregatedDiscoveryServiceClient(cc).StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := &canary{t: t, a: a}
	if err := st.Send(&discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: canaryID}, TypeUrl: engine.TypeCluster}); err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			r, err := st.Recv()
			c.mu.Lock()
			c.last, c.err = r, err
			c.mu.Unlock()
			if err != nil {
				return
			}
			if err := st.Send(&discoveryv3.DiscoveryRequest{TypeUrl: r.TypeUrl, VersionInfo: r.VersionInfo, ResponseNonce: r.Nonce}); err != nil {
				return
			}
		}
	}()
	c.sess = a.b.session(t, canaryID)
	c.change()
	return c
}

// change edits the canary's cluster, pushes, and waits until the canary
// has received the new cluster and ACKed the response carrying it.
func (c *canary) change() {
	c.t.Helper()
	c.gen++
	c.a.b.set(c.t, cluster(canaryCluster, c.gen))
	c.a.b.push(engine.Push{Full: true})
	want := time.Duration(c.gen+1) * time.Second // cluster(name, gen)'s connect timeout
	waitFor(c.t, fmt.Sprintf("the canary to ACK change %d", c.gen), func() bool {
		c.mu.Lock()
		r, err := c.last, c.err
		c.mu.Unlock()
		if err != nil {
			c.t.Fatalf("canary stream ended: %v", err)
		}
		if r == nil {
			return false
		}
		got := false
		for _, a := range r.Resources {
			if cl := unmarshalCluster(c.t, a.Value); cl.GetName() == canaryCluster && cl.GetConnectTimeout().AsDuration() == want {
				got = true
			}
		}
		if !got {
			return false
		}
		c.sess.mu.Lock()
		defer c.sess.mu.Unlock()
		return len(c.sess.acks) > 0 && c.sess.acks[len(c.sess.acks)-1] == engine.TypeCluster+" "+r.VersionInfo
	})
}

// report logs an attack's figures and checks heap after GC.
func report(t *testing.T, attack string, before, during, after uint64, c *canary) {
	t.Helper()
	t.Logf("%s: heap after GC before %s, during %s, after %s; canary ACKed %d changes, the last during the attack",
		attack, mib(before), mib(during), mib(after), c.gen)
	if after > before+heapMargin {
		t.Errorf("%s: heap after GC %s once the attackers left, baseline %s (margin %s)", attack, mib(after), mib(before), mib(heapMargin))
	}
}

// attackCtx bounds one attacker.
func attackCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

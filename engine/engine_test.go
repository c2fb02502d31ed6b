package engine

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/index"
	"github.com/pilotfish-mesh/pilotfish/rules"
)

func sidecarNode(t testing.TB, ip, pod, ns string) *corev3.Node {
	t.Helper()
	md, err := structpb.NewStruct(map[string]any{"NAMESPACE": ns, "ISTIO_VERSION": "1.31.0", "CLUSTER_ID": "Kubernetes"})
	if err != nil {
		t.Fatal(err)
	}
	return &corev3.Node{Id: "sidecar~" + ip + "~" + pod + "." + ns + "~" + ns + ".svc.cluster.local", Metadata: md}
}

func grpcNode(t testing.TB, ip, pod, ns string) *corev3.Node {
	n := sidecarNode(t, ip, pod, ns)
	n.Metadata.Fields["GENERATOR"] = structpb.NewStringValue("grpc")
	return n
}

type testMesh struct {
	w          *index.Writer
	nsA, nsB   index.Sym
	svcA, svcB index.ServiceKey
	slice      index.Sym
}

func newTestMesh(t testing.TB) *testMesh {
	w := index.NewWriter()
	sy := w.Symbols()
	m := &testMesh{w: w, nsA: sy.Intern("a"), nsB: sy.Intern("b"), slice: sy.Intern("slice")}
	m.svcA = index.ServiceKey{Host: sy.Intern("one.a.svc.cluster.local"), Namespace: m.nsA}
	m.svcB = index.ServiceKey{Host: sy.Intern("two.b.svc.cluster.local"), Namespace: m.nsB}
	var b index.Batch
	b.PutService(index.Service{Key: m.svcA, Origin: index.OriginKubernetes, Ports: []index.Port{{Number: 80, Protocol: index.ProtocolHTTP}}})
	// svcB is visible only in its own namespace.
	b.PutService(index.Service{Key: m.svcB, Origin: index.OriginKubernetes, ExportTo: index.ExportTo{Private: true}, Ports: []index.Port{{Number: 80, Protocol: index.ProtocolHTTP}}})
	w.Apply(&b)
	return m
}

func (m *testMesh) setEndpoints(svc index.ServiceKey, n int) {
	g := index.EndpointGroup{Source: m.slice}
	for i := 0; i < n; i++ {
		g.Endpoints = append(g.Endpoints, index.Endpoint{Addr: netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 1)})})
	}
	var b index.Batch
	b.PutEndpoints(svc, g)
	m.w.Apply(&b)
}

// waitPush waits for a push on c and takes it.
func waitPush(t *testing.T, c *Conn, timeout time.Duration) (Push, bool) {
	t.Helper()
	select {
	case <-c.Pending():
		p, ok := c.TakePush()
		c.PushDone()
		return p, ok
	case <-time.After(timeout):
		return Push{}, false
	}
}

func TestEndpointFastPathTargetsOnlyProxiesThatSeeTheService(t *testing.T) {
	m := newTestMesh(t)
	e := New(m.w, Options{DebounceAfter: 10 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go e.Run(ctx)

	inA, err := e.Connect(ctx, sidecarNode(t, "10.1.0.1", "p1", "a"), "")
	if err != nil {
		t.Fatal(err)
	}
	inB, err := e.Connect(ctx, sidecarNode(t, "10.1.0.2", "p2", "b"), "")
	if err != nil {
		t.Fatal(err)
	}
	// Both proxies see svcA; only the proxy in b sees the private svcB.
	m.setEndpoints(m.svcB, 2)
	p, ok := waitPush(t, inB, 2*time.Second)
	if !ok || p.Full || len(p.Types) != 1 || p.Types[0] != TypeEndpoint {
		t.Fatalf("proxy in b got push %+v (ok=%v), want an EDS-only push", p, ok)
	}
	if want := "outbound|80||two.b.svc.cluster.local"; len(p.Endpoints) != 1 || p.Endpoints[0] != want {
		t.Fatalf("push names %v, want [%s]", p.Endpoints, want)
	}
	if p, ok := waitPush(t, inA, 200*time.Millisecond); ok {
		t.Fatalf("proxy in a got %+v for a service it cannot see", p)
	}

	m.setEndpoints(m.svcA, 3)
	for _, c := range []*Conn{inA, inB} {
		if p, ok := waitPush(t, c, 2*time.Second); !ok || p.Full {
			t.Fatalf("%s: push %+v ok=%v, want EDS push", c.ID(), p, ok)
		}
	}
}

func TestConfigChangePushesFullToAll(t *testing.T) {
	m := newTestMesh(t)
	e := New(m.w, Options{DebounceAfter: 10 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go e.Run(ctx)
	c1, _ := e.Connect(ctx, sidecarNode(t, "10.1.0.1", "p1", "a"), "")
	c2, _ := e.Connect(ctx, sidecarNode(t, "10.1.0.2", "p2", "b"), "")
	var b index.Batch
	b.PutService(index.Service{Key: index.ServiceKey{Host: m.w.Symbols().Intern("new.a.svc.cluster.local"), Namespace: m.nsA}, Ports: []index.Port{{Number: 9090}}})
	m.w.Apply(&b)
	for _, c := range []*Conn{c1, c2} {
		if p, ok := waitPush(t, c, 2*time.Second); !ok || !p.Full {
			t.Fatalf("%s: push %+v ok=%v, want a full push", c.ID(), p, ok)
		}
	}
}

func TestDebounceMergesBursts(t *testing.T) {
	m := newTestMesh(t)
	var mu sync.Mutex
	var debounced []time.Duration
	// 10 changes 5ms apart under a 250ms quiet period: one push, even on a
	// loaded machine where the sleeps stretch.
	e := New(m.w, Options{DebounceAfter: 250 * time.Millisecond, Metrics: recordDebounce(func(d time.Duration) {
		mu.Lock()
		debounced = append(debounced, d)
		mu.Unlock()
	})})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go e.Run(ctx)
	c, _ := e.Connect(ctx, sidecarNode(t, "10.1.0.1", "p1", "a"), "")
	for i := 1; i <= 10; i++ {
		m.setEndpoints(m.svcA, i)
		time.Sleep(5 * time.Millisecond)
	}
	if _, ok := waitPush(t, c, 2*time.Second); !ok {
		t.Fatal("no push after a burst")
	}
	if p, ok := waitPush(t, c, 600*time.Millisecond); ok {
		t.Fatalf("a burst of 10 changes 5ms apart gave a second push %+v; debounce should merge them", p)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(debounced) != 1 {
		t.Fatalf("%d debounced pushes, want 1", len(debounced))
	}
}

func TestDebounceMaxBoundsTheWait(t *testing.T) {
	m := newTestMesh(t)
	e := New(m.w, Options{DebounceAfter: 40 * time.Millisecond, DebounceMax: 120 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go e.Run(ctx)
	c, _ := e.Connect(ctx, sidecarNode(t, "10.1.0.1", "p1", "a"), "")
	stop := make(chan struct{})
	go func() { // changes every 10ms, never quiet for DebounceAfter
		for i := 1; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
				m.setEndpoints(m.svcA, 1+i%5)
			}
		}
	}()
	defer close(stop)
	if _, ok := waitPush(t, c, 2*time.Second); !ok {
		t.Fatal("continuous changes starved the push: DebounceMax not honoured")
	}
}

func TestThrottleBoundsConcurrentPushes(t *testing.T) {
	m := newTestMesh(t)
	e := New(m.w, Options{DebounceAfter: 5 * time.Millisecond, PushThrottle: 2})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go e.Run(ctx)
	var conns []*Conn
	for i := 0; i < 6; i++ {
		c, err := e.Connect(ctx, sidecarNode(t, netip.AddrFrom4([4]byte{10, 2, 0, byte(i + 1)}).String(), "p", "a"), "")
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	m.setEndpoints(m.svcA, 1)
	time.Sleep(100 * time.Millisecond)
	signalled := 0
	for _, c := range conns {
		if len(c.Pending()) > 0 {
			signalled++
		}
	}
	if signalled != 2 {
		t.Fatalf("%d connections signalled with throttle 2, want 2", signalled)
	}
	if got := e.queue.len(); got != 4 {
		t.Fatalf("%d waiting, want 4", got)
	}
	// Finishing pushes lets the rest through, in order.
	done := 0
	deadline := time.After(2 * time.Second)
	for done < 6 {
		progressed := false
		for _, c := range conns {
			select {
			case <-c.Pending():
				if _, ok := c.TakePush(); ok {
					c.PushDone()
					done++
					progressed = true
				}
			default:
			}
		}
		if !progressed {
			select {
			case <-deadline:
				t.Fatalf("only %d of 6 pushes delivered", done)
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
}

func TestGRPCFastPathFollowsNamedSubscriptions(t *testing.T) {
	m := newTestMesh(t)
	e := New(m.w, Options{DebounceAfter: 5 * time.Millisecond})
	saved := build
	build = func(typeURL string, sc *rules.Scope, mesh *encode.Mesh, cache *encode.Cache, names []string, wildcard bool, dst []Resource) ([]Resource, error) {
		if typeURL == TypeEndpoint {
			return dst, nil
		}
		return saved(typeURL, sc, mesh, cache, names, wildcard, dst)
	}
	defer func() { build = saved }()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go e.Run(ctx)
	watching, _ := e.Connect(ctx, grpcNode(t, "10.3.0.1", "g1", "a"), "")
	other, _ := e.Connect(ctx, grpcNode(t, "10.3.0.2", "g2", "a"), "")
	if _, err := watching.Generate(TypeEndpoint, []string{"outbound|80||one.a.svc.cluster.local"}, false, nil); err != nil {
		t.Fatal(err)
	}
	m.setEndpoints(m.svcA, 2)
	if _, ok := waitPush(t, watching, 2*time.Second); !ok {
		t.Fatal("gRPC client watching the cluster got no push")
	}
	if p, ok := waitPush(t, other, 200*time.Millisecond); ok {
		t.Fatalf("gRPC client not watching the cluster got %+v", p)
	}
}

func TestUnknownTypeIsAnError(t *testing.T) {
	m := newTestMesh(t)
	e := New(m.w, Options{})
	c, _ := e.Connect(context.Background(), sidecarNode(t, "10.1.0.1", "p1", "a"), "")
	if _, err := c.Generate("type.googleapis.com/nope", nil, true, nil); err == nil {
		t.Fatal("no error for an unknown type")
	}
}

type recordDebounce func(time.Duration)

func (r recordDebounce) Proxies(int)                     {}
func (r recordDebounce) PushQueued(string, int)          {}
func (r recordDebounce) QueueTime(time.Duration)         {}
func (r recordDebounce) Converged(string, time.Duration) {}
func (r recordDebounce) Rejected(string)                 {}
func (r recordDebounce) Debounced(d time.Duration, _ bool) {
	r(d)
}

func TestEndpointChangeThatAltersClustersPushesCDS(t *testing.T) {
	m := newTestMesh(t)
	e := New(m.w, Options{DebounceAfter: 5 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go e.Run(ctx)
	c, _ := e.Connect(ctx, sidecarNode(t, "10.1.0.1", "p1", "a"), "")
	sy := m.w.Symbols()
	// The pods exist first (a workload change is a full push).
	var b index.Batch
	for i, a := range []string{"10.0.0.1", "10.0.0.3"} {
		b.PutWorkload(index.Workload{Key: index.WorkloadKey{Kind: index.WorkloadPod, Namespace: m.nsA, Name: sy.Intern(fmt.Sprint("pod-", a))},
			Addr: netip.MustParseAddr(a), ServiceAccount: sy.Intern(fmt.Sprint("sa-", i%1))})
	}
	m.w.Apply(&b)
	if p, ok := waitPush(t, c, 2*time.Second); !ok || !p.Full {
		t.Fatalf("push %+v ok=%v, want the pods' full push", p, ok)
	}
	put := func(addrs ...string) {
		var b index.Batch
		g := index.EndpointGroup{Source: m.slice, Pods: true}
		for _, a := range addrs {
			g.Endpoints = append(g.Endpoints, index.Endpoint{Addr: netip.MustParseAddr(a)})
		}
		b.PutEndpoints(m.svcA, g)
		m.w.Apply(&b)
	}
	// New service accounts behind the service: its clusters' SANs change.
	put("10.0.0.1")
	if p, ok := waitPush(t, c, 2*time.Second); !ok || !slices.Contains(p.Types, TypeCluster) {
		t.Fatalf("push %+v ok=%v: a new service account must push CDS too", p, ok)
	}
	// Same accounts, another pod: EDS only.
	put("10.0.0.1", "10.0.0.3")
	if p, ok := waitPush(t, c, 2*time.Second); !ok || slices.Contains(p.Types, TypeCluster) || !slices.Contains(p.Types, TypeEndpoint) {
		t.Fatalf("push %+v ok=%v: want EDS only", p, ok)
	}
}

package engine

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/pilotfish-mesh/pilotfish/index"
)

// inventedNames are names of each shape a client can vary without bound
// for typeURL: unknown hosts, undeclared subsets, ports spelled with
// leading zeros, unknown route names, foreign gRPC server addresses.
func inventedNames(typeURL string, conn, n int) []string {
	pad := strings.Repeat("x", 40) // names as long as real ones
	out := make([]string, 0, n)
	for i := range n {
		var s string
		switch typeURL {
		case TypeEndpoint, TypeCluster:
			switch i % 4 {
			case 0:
				s = fmt.Sprintf("outbound|80||made-up-%d-%d-%s.example", conn, i, pad)
			case 1:
				s = fmt.Sprintf("outbound|80|subset-%d-%d-%s|one.a.svc.cluster.local", conn, i, pad)
			case 2:
				s = fmt.Sprintf("outbound|%s80||one.a.svc.cluster.local", strings.Repeat("0", 1+(conn*n+i)%200))
			default:
				s = fmt.Sprintf("outbound_.80_.v%d-%d-%s_.nowhere.example", conn, i, pad)
			}
		case TypeRoute:
			switch i % 3 {
			case 0:
				s = fmt.Sprintf("route-%d-%d-%s", conn, i, pad)
			case 1:
				s = fmt.Sprintf("made-up-%d-%d-%s.example:80", conn, i, pad)
			default:
				s = fmt.Sprintf("outbound|80|subset-%d-%d|one.a.svc.cluster.local", conn, i)
			}
		case TypeListener:
			s = fmt.Sprintf("xds.istio.io/grpc/lds/inbound/10.%d.%d.%d:80", conn, i>>8&0xff, i&0xff)
		}
		out = append(out, s)
	}
	return out
}

// heapAfterGC is the live heap after two collections.
func heapAfterGC() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestInventedNamesLeaveNothingBehind (issue 21, "made-up names"): streams
// that subscribe to many names no configuration defines get an answer for
// each (empty, as istiod answers) and leave nothing behind once they close:
// no cache entries, no memoized name lists in the class they shared with a
// proxy that stays, no gateway route keys.
func TestInventedNamesLeaveNothingBehind(t *testing.T) {
	m := newTestMesh(t)
	var b index.Batch
	b.PutService(index.Service{Key: index.ServiceKey{Host: m.w.Symbols().Intern("grpc.a.svc.cluster.local"), Namespace: m.nsA},
		Origin: index.OriginKubernetes, Ports: []index.Port{{Number: 80, Protocol: index.ProtocolGRPC}}})
	m.w.Apply(&b)
	m.setEndpoints(m.svcA, 3)
	e := New(m.w, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// The canary stays connected throughout, in the class most attackers
	// share, and asks for real names.
	canary, err := e.Connect(ctx, sidecarNode(t, "10.1.0.1", "canary", "a"), "")
	if err != nil {
		t.Fatal(err)
	}
	real := map[string][]string{
		TypeEndpoint: {"outbound|80||one.a.svc.cluster.local"},
		TypeRoute:    {"80"},
	}
	for typ, names := range real {
		if _, err := canary.Generate(typ, names, false, nil); err != nil {
			t.Fatal(err)
		}
	}
	baseEntries := e.Cache().Len()
	baseHeap := heapAfterGC()

	const perConn = 20000
	attack := func() {
		var conns []*Conn
		nodes := []struct {
			node  func() *Conn
			types []string
		}{
			{func() *Conn { c, _ := e.Connect(ctx, sidecarNode(t, "10.1.0.2", "p2", "a"), ""); return c }, []string{TypeEndpoint, TypeRoute, TypeCluster, TypeListener}},
			{func() *Conn { c, _ := e.Connect(ctx, sidecarNode(t, "10.1.0.3", "p3", "a"), ""); return c }, []string{TypeEndpoint, TypeRoute, TypeCluster}},
			{func() *Conn { c, _ := e.Connect(ctx, grpcNode(t, "10.1.0.4", "p4", "a"), ""); return c }, []string{TypeEndpoint, TypeRoute, TypeListener}},
			{func() *Conn { c, _ := e.Connect(ctx, routerNode(t, "10.1.0.5", "gw", "a"), ""); return c }, []string{TypeEndpoint, TypeRoute}},
		}
		for i, n := range nodes {
			c := n.node()
			if c == nil {
				t.Fatal("connect failed")
			}
			conns = append(conns, c)
			for _, typ := range n.types {
				names := inventedNames(typ, i, perConn)
				res, err := c.Generate(typ, names, false, nil)
				if err != nil {
					t.Fatalf("%s %s: %v", c.ID(), typ, err)
				}
				if typ == TypeEndpoint && len(res) != len(names) {
					t.Fatalf("%s: %d assignments for %d names: every name gets one", c.ID(), len(res), len(names))
				}
				// The canary's class keeps answering real names meanwhile.
				if _, err := canary.Generate(TypeEndpoint, real[TypeEndpoint], false, nil); err != nil {
					t.Fatal(err)
				}
			}
		}
		if grew := e.Cache().Len() - baseEntries; grew > 16 {
			t.Errorf("cache grew by %d entries while the attackers were connected; names no config defines must not be cached", grew)
		}
		for _, c := range conns {
			c.Close()
		}
	}
	attack()

	canary.class.memoMu.Lock()
	memoized := 0
	for _, ms := range canary.class.memos {
		for _, m := range ms {
			memoized += len(m.names)
		}
	}
	canary.class.memoMu.Unlock()
	if memoized > 16 {
		t.Errorf("the class the attackers shared with the canary memoizes %d names", memoized)
	}
	if n := e.Cache().Len(); n > baseEntries+16 {
		t.Errorf("cache holds %d entries after the attackers left, %d before", n, baseEntries)
	}
	// 4 streams × 2-3 types × 20,000 names of ~80 bytes kept something
	// over 40 MiB before; a few MiB of slack absorbs the test's own noise.
	after := heapAfterGC()
	if after > baseHeap+8<<20 {
		t.Errorf("heap after GC %d MiB, %d MiB before the attack: invented names are retained", after>>20, baseHeap>>20)
	}
	if res, err := canary.Generate(TypeEndpoint, real[TypeEndpoint], false, nil); err != nil || len(res) != 1 {
		t.Fatalf("canary: %v %v", res, err)
	}
	t.Logf("cache entries %d → %d; heap after GC %.1f → %.1f MiB", baseEntries, e.Cache().Len(), float64(baseHeap)/(1<<20), float64(after)/(1<<20))
}

// TestSDSNamesBounded: a stream naming more Secrets than maxSDSRefs is
// taken to read every Secret instead of growing its set.
func TestSDSNamesBounded(t *testing.T) {
	m := newTestMesh(t)
	e := New(m.w, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := e.Connect(ctx, routerNode(t, "10.1.0.5", "gw", "a"), "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	names := make([]string, maxSDSRefs+10)
	for i := range names {
		names[i] = fmt.Sprintf("kubernetes://made-up-%d", i)
	}
	if _, err := c.Generate(TypeSecret, names, false, nil); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	n, all := len(c.sdsRefs), c.sdsAll
	c.mu.Unlock()
	if n != 0 || !all {
		t.Fatalf("%d Secrets tracked (all=%v), want none tracked and all read", n, all)
	}
	if !c.readsAnySecret([]secretRef{{"a", "another"}}) {
		t.Fatal("an untracked connection must read every Secret")
	}
}

package index

import (
	"net/netip"
	"sync"
	"testing"
	"unsafe"
)

func TestPodEndpointsFollowTheirPod(t *testing.T) {
	w := NewWriter()
	sy, ls := w.Symbols(), w.Labels()
	ns, pod := sy.Intern("shop"), sy.Intern("cart-1")
	app := ls.Intern([]Label{{sy.Intern("app"), sy.Intern("cart")}})
	v1 := ls.Intern([]Label{{sy.Intern("app"), sy.Intern("cart")}, {sy.Intern("version"), sy.Intern("v1")}})
	v2 := ls.Intern([]Label{{sy.Intern("app"), sy.Intern("cart")}, {sy.Intern("version"), sy.Intern("v2")}})
	other := ls.Intern([]Label{{sy.Intern("app"), sy.Intern("other")}})
	svc := ServiceKey{Host: sy.Intern("cart.shop.svc.cluster.local"), Namespace: ns}
	addr := netip.MustParseAddr("10.244.0.7")
	podRow := func(labels LabelSetID) Workload {
		return Workload{Key: WorkloadKey{Kind: WorkloadPod, Namespace: ns, Name: pod}, Addr: addr, Labels: labels, ServiceAccount: sy.Intern("cart"), TLSMode: TLSModeIstio}
	}

	// The slice arrives before its Pod: the endpoint has no labels yet.
	var b Batch
	b.PutService(Service{Key: svc, Origin: OriginKubernetes, HasSelector: true, Selector: app})
	b.PutEndpoints(svc, EndpointGroup{Source: sy.Intern("cart-abc"), Pods: true, Endpoints: []Endpoint{{Addr: addr}}})
	w.Apply(&b)
	if got := w.Snapshot().Endpoints(svc).Groups[0].Endpoints[0].Labels; got != 0 {
		t.Fatalf("labels before the pod exists = %d, want 0", got)
	}

	// The Pod arrives: the endpoint picks up its labels and service account.
	b = Batch{}
	b.PutWorkload(podRow(v1))
	cs := w.Apply(&b)
	e := w.Snapshot().Endpoints(svc).Groups[0].Endpoints[0]
	if e.Labels != v1 || e.ServiceAccount != sy.Intern("cart") || e.TLSMode != TLSModeIstio {
		t.Fatalf("endpoint after pod = %+v, want labels %d, sa cart, tls istio", e, v1)
	}
	if len(cs.Endpoints) != 1 || cs.Endpoints[0] != svc {
		t.Fatalf("change set endpoints = %v, want [%v]", cs.Endpoints, svc)
	}

	// The Pod is relabelled: the endpoint follows.
	b = Batch{}
	b.PutWorkload(podRow(v2))
	w.Apply(&b)
	if got := w.Snapshot().Endpoints(svc).Groups[0].Endpoints[0].Labels; got != v2 {
		t.Fatalf("labels after relabel = %d, want %d", got, v2)
	}

	// Pod and slice in one batch: resolved at once.
	svc2 := ServiceKey{Host: sy.Intern("cart2.shop.svc.cluster.local"), Namespace: ns}
	addr2 := netip.MustParseAddr("10.244.0.8")
	b = Batch{}
	b.PutService(Service{Key: svc2, Origin: OriginKubernetes, HasSelector: true, Selector: app})
	b.PutEndpoints(svc2, EndpointGroup{Source: sy.Intern("cart2-abc"), Pods: true, Endpoints: []Endpoint{{Addr: addr2}}})
	b.PutWorkload(Workload{Key: WorkloadKey{Kind: WorkloadPod, Namespace: ns, Name: sy.Intern("cart2-1")}, Addr: addr2, Labels: v1})
	w.Apply(&b)
	if got := w.Snapshot().Endpoints(svc2).Groups[0].Endpoints[0].Labels; got != v1 {
		t.Fatalf("same-batch pod: labels %d, want %d", got, v1)
	}

	// An unrelated pod changes: no endpoint change.
	b = Batch{}
	b.PutWorkload(Workload{Key: WorkloadKey{Kind: WorkloadPod, Namespace: ns, Name: sy.Intern("other")}, Addr: netip.MustParseAddr("10.244.9.9"), Labels: other})
	if cs := w.Apply(&b); len(cs.Endpoints) != 0 {
		t.Fatalf("unrelated pod changed endpoints %v", cs.Endpoints)
	}
}

func TestServiceEntrySelectsWorkloadEntries(t *testing.T) {
	w := NewWriter()
	sy, ls := w.Symbols(), w.Labels()
	ns := sy.Intern("default")
	app := sy.Intern("app")
	sel := ls.Intern([]Label{{app, sy.Intern("random-0")}})
	other := ls.Intern([]Label{{app, sy.Intern("random-1")}})
	svc := ServiceKey{Host: sy.Intern("random-0.host.example"), Namespace: ns}
	we := func(name string, ip string, labels LabelSetID) Workload {
		return Workload{Key: WorkloadKey{Kind: WorkloadEntry, Namespace: ns, Name: sy.Intern(name)}, Addr: netip.MustParseAddr(ip), Labels: labels}
	}
	var b Batch
	b.PutService(Service{Key: svc, Origin: OriginServiceEntry, HasSelector: true, Selector: sel, Ports: []Port{{Number: 80, Protocol: ProtocolHTTP}}})
	b.PutWorkload(we("we-a", "240.241.0.1", sel))
	b.PutWorkload(we("we-b", "240.241.0.2", other))
	w.Apply(&b)
	sh := w.Snapshot().Endpoints(svc)
	if sh == nil || sh.Len() != 1 || sh.Groups[0].Endpoints[0].Addr != netip.MustParseAddr("240.241.0.1") {
		t.Fatalf("selected endpoints = %+v, want only 240.241.0.1", sh)
	}
	if got := sh.Groups[0].Endpoints[0].Labels; got != sel {
		t.Fatalf("selected endpoint labels = %d, want %d", got, sel)
	}

	// A second matching entry joins; a relabelled one leaves.
	b = Batch{}
	b.PutWorkload(we("we-b", "240.241.0.2", sel))
	b.PutWorkload(we("we-a", "240.241.0.1", other))
	cs := w.Apply(&b)
	sh = w.Snapshot().Endpoints(svc)
	if sh.Len() != 1 || sh.Groups[0].Endpoints[0].Addr != netip.MustParseAddr("240.241.0.2") {
		t.Fatalf("after relabel = %+v, want only 240.241.0.2", sh.Groups)
	}
	if len(cs.Endpoints) != 1 {
		t.Fatalf("change set endpoints = %v", cs.Endpoints)
	}

	// Deleting the ServiceEntry removes what its selector contributed.
	b = Batch{}
	b.DeleteService(svc)
	w.Apply(&b)
	if sh := w.Snapshot().Endpoints(svc); sh != nil {
		t.Fatalf("shard after delete = %+v, want none", sh)
	}
}

func TestLabelSets(t *testing.T) {
	sy, ls := NewSymbols(), NewLabelSets()
	a, b, c := sy.Intern("a"), sy.Intern("b"), sy.Intern("c")
	one, two := sy.Intern("1"), sy.Intern("2")
	ab := ls.Intern([]Label{{b, two}, {a, one}})
	if ls.Intern([]Label{{a, one}, {b, two}}) != ab {
		t.Fatal("order changed the interned ID")
	}
	if ls.Intern([]Label{{a, two}, {a, one}, {b, two}}) != ab {
		t.Fatal("a later duplicate key should win")
	}
	known := []Label{{b, two}, {a, one}}
	if n := testing.AllocsPerRun(100, func() { ls.Intern(known) }); n != 0 {
		t.Fatalf("interning a known set allocates %.0f times, want 0", n)
	}
	for _, tc := range []struct {
		name      string
		sel, have []Label
		want      bool
	}{
		{"empty selector", nil, []Label{{a, one}}, true},
		{"subset", []Label{{a, one}}, []Label{{a, one}, {b, two}}, true},
		{"equal", []Label{{a, one}, {b, two}}, []Label{{a, one}, {b, two}}, true},
		{"wrong value", []Label{{a, two}}, []Label{{a, one}, {b, two}}, false},
		{"missing key", []Label{{c, one}}, []Label{{a, one}, {b, two}}, false},
		{"superset", []Label{{a, one}, {b, two}, {c, one}}, []Label{{a, one}, {b, two}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ls.Matches(ls.Intern(tc.sel), ls.Intern(tc.have)); got != tc.want {
				t.Fatalf("Matches = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestSymbolsConcurrent(t *testing.T) {
	s := NewSymbols()
	var wg sync.WaitGroup
	const n = 20000
	ids := make([][]Sym, 4)
	for g := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < n; i++ {
				id := s.Intern(string(rune('a'+i%26)) + string(rune(i)))
				ids[g] = append(ids[g], id)
				_ = s.String(id)
			}
		}()
	}
	wg.Wait()
	for g := 1; g < len(ids); g++ {
		for i := range ids[g] {
			if ids[g][i] != ids[0][i] {
				t.Fatalf("goroutine %d got Sym %d for item %d, goroutine 0 got %d", g, ids[g][i], i, ids[0][i])
			}
		}
	}
	if s.Len() != n+1 {
		t.Fatalf("Len = %d, want %d", s.Len(), n+1)
	}
	if got := s.String(ids[0][12345]); got != string(rune('a'+12345%26))+string(rune(12345)) {
		t.Fatalf("String = %q", got)
	}
}

func TestZeroAllocReads(t *testing.T) {
	w := NewWriter()
	sy := w.Symbols()
	var b Batch
	ns := sy.Intern("default")
	for i := 0; i < 1000; i++ {
		host := sy.Intern("svc-" + string(rune('a'+i%26)) + string(rune(i)) + ".default.svc.cluster.local")
		k := ServiceKey{Host: host, Namespace: ns}
		b.PutService(Service{Key: k, Ports: []Port{{Number: 80}}})
		b.PutEndpoints(k, EndpointGroup{Source: host, Endpoints: []Endpoint{{Addr: netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)})}}})
	}
	w.Apply(&b)
	snap := w.Snapshot()
	hostStr := sy.String(sy.Intern("svc-" + string(rune('a'+500%26)) + string(rune(500)) + ".default.svc.cluster.local"))
	host, _ := sy.Lookup(hostStr)
	key := ServiceKey{Host: host, Namespace: ns}
	for _, tc := range []struct {
		name string
		fn   func()
	}{
		{"Service", func() { _, _, _ = snap.Service(key) }},
		{"LookupService", func() { _, _, _ = snap.LookupService(hostStr, "default") }},
		{"ServicesByHost", func() { _ = snap.ServiceByID(snap.ServicesByHost(host)[0]) }},
		{"Endpoints", func() {
			for _, g := range snap.Endpoints(key).Groups {
				_ = len(g.Endpoints)
			}
		}},
		{"Symbols.Lookup", func() { _, _ = sy.Lookup(hostStr) }},
		{"Symbols.String", func() { _ = sy.String(host) }},
		{"Writer.Snapshot", func() { _ = w.Snapshot() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if a := testing.AllocsPerRun(100, tc.fn); a != 0 {
				t.Fatalf("%s allocates %.1f times per call, budget 0", tc.name, a)
			}
		})
	}
}

func TestEndpointSize(t *testing.T) {
	// The per-endpoint heap budget (< 100 bytes) starts with the row.
	if got := unsafe.Sizeof(Endpoint{}); got > 56 {
		t.Fatalf("Endpoint is %d bytes, budget 56", got)
	}
}

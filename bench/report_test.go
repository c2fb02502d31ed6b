package bench

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/pilotfish-mesh/pilotfish/loadgen"
)

func TestPool(t *testing.T) {
	cdf := func(lo, hi float64) []float64 {
		out := make([]float64, 101)
		for q := range out {
			out[q] = lo + (hi-lo)*float64(q)/100
		}
		return out
	}
	one := []loadgen.ChangeStats{{Convergence: loadgen.Latency{Count: 10, MeanMS: 50, P50MS: 50, P99MS: 99, MaxMS: 100, CDFMS: cdf(0, 100)}}}
	// One change: exact, shifted back by its offset.
	if got := pool(one, []time.Duration{10 * time.Millisecond}); got != (Latency{Count: 10, MeanMS: 40, P50MS: 40, P99MS: 89, MaxMS: 90}) {
		t.Errorf("one change: %+v", got)
	}
	// Two changes of equal weight: 0–100ms and 100–200ms pool to 0–200ms.
	two := append(one, loadgen.ChangeStats{Convergence: loadgen.Latency{Count: 10, MeanMS: 150, MaxMS: 200, CDFMS: cdf(100, 200)}})
	got := pool(two, nil)
	if got.Count != 20 || got.MeanMS != 100 || got.MaxMS != 200 || got.P50MS < 99 || got.P50MS > 101 || got.P99MS < 195 || got.P99MS > 200 {
		t.Errorf("two changes: %+v", got)
	}
	// An offset larger than a value clamps at 0.
	if got := pool(one, []time.Duration{time.Second}); got.MaxMS != 0 || got.P50MS != 0 {
		t.Errorf("clamped: %+v", got)
	}
	if got := percentile([]float64{1, 2, 3, 4}, 50); got != 2 {
		t.Errorf("p50 of 1..4 = %v", got)
	}
	if got := percentile(nil, 99); got != 0 {
		t.Errorf("p99 of nothing = %v", got)
	}
}

func TestRatiosAndTable(t *testing.T) {
	res := &Result{Workload: "http", Services: 100, Proxies: 10, Servers: []*ServerResult{
		{Server: Pilotfish, Connect: &ConnectResult{AllFullConfigMS: 100, CPUPerProxyMS: 1}, Memory: &MemoryResult{HeapPerProxy: 1000}},
		{Server: Snapshot, Connect: &ConnectResult{AllFullConfigMS: 1000, CPUPerProxyMS: 4}, Memory: &MemoryResult{HeapPerProxy: 5000}},
		{Server: Linear, Connect: &ConnectResult{AllFullConfigMS: 200}, Errors: []string{"boom"}},
	}}
	res.Ratios = ratios(res)
	check := func(scenario, metric, baseline string, want float64) {
		t.Helper()
		r, ok := res.Ratio(scenario, metric, baseline)
		if !ok || r.Value != want {
			t.Errorf("%s %s / %s = %+v, %v; want %v", scenario, metric, baseline, r, ok, want)
		}
	}
	check(ScenarioConnect, "all proxies at full config", Snapshot, 0.1)
	check(ScenarioConnect, "all proxies at full config", Linear, 0.5)
	check(ScenarioConnect, "server CPU per proxy", Snapshot, 0.25)
	check(ScenarioMemory, "heap per proxy", Snapshot, 0.2)
	if r, _ := res.Ratio(ScenarioMemory, "heap per proxy", Snapshot); r.Speedup() != 5 {
		t.Errorf("speedup %v", r.Speedup())
	}
	// Linear measured no CPU (0) and no memory: no ratio.
	if _, ok := res.Ratio(ScenarioConnect, "server CPU per proxy", Linear); ok {
		t.Error("ratio over a zero")
	}
	if _, ok := res.Ratio(ScenarioMemory, "heap per proxy", Linear); ok {
		t.Error("ratio for a scenario the baseline did not run")
	}
	var b strings.Builder
	if err := res.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"http, 100 services", "all proxies at full config", "100ms", "1.00s", "0.10", "0.50", "linear: ERROR: boom", "4.9 KiB"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
	if strings.Contains(b.String(), "churn") {
		t.Errorf("table shows a scenario that did not run:\n%s", b.String())
	}
}

func TestFormat(t *testing.T) {
	for _, c := range []struct {
		got, want string
	}{
		{fmtMS(0.05), "50µs"}, {fmtMS(2.5), "2.50ms"}, {fmtMS(250), "250ms"}, {fmtMS(2500), "2.50s"}, {fmtMS(25000), "25.0s"},
		{fmtBytes(512), "512 B"}, {fmtBytes(2048), "2.0 KiB"}, {fmtBytes(-3 << 20), "-3.0 MiB"},
		{fmtRatio(0.05), "0.050"}, {fmtRatio(0.5), "0.50"}, {fmtRatio(12.3), "12"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

// TestTrackingListener: dropAll cuts every open connection and forgets
// closed ones.
func TestTrackingListener(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tl := &trackingListener{Listener: l, conns: map[*trackedConn]struct{}{}}
	defer tl.Close()
	accepted := make(chan net.Conn)
	go func() {
		for {
			c, err := tl.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	var clients []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		clients = append(clients, c)
	}
	var server []net.Conn
	for range 3 {
		server = append(server, <-accepted)
	}
	server[0].Close() // the server closed one itself
	if n := tl.dropAll(); n != 2 {
		t.Fatalf("dropped %d, want 2", n)
	}
	for _, c := range clients {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err == nil {
			t.Error("a client connection survived dropAll")
		}
	}
	if n := tl.dropAll(); n != 0 {
		t.Errorf("second drop: %d", n)
	}
}

// TestPlan: the plan decodes pilotfish's output for loadgen's proxy, and
// each step publishes what changed: an added service touches CDS, EDS and
// RDS; an endpoint change only EDS, one ClusterLoadAssignment.
func TestPlan(t *testing.T) {
	wl, err := LoadWorkload("http", 10)
	if err != nil {
		t.Fatal(err)
	}
	p, err := newPlan(wl, planOptions{changes: 2, churn: 4, churnTargets: 2})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(p.initial[xdsTypes[1]]); n != p.counts.Clusters || n != 14 {
		t.Errorf("%d clusters decoded, counts %+v", n, p.counts)
	}
	for i, c := range p.changes {
		var types []string
		for _, u := range c.updates {
			types = append(types, typeShort(u.typeURL))
		}
		if got := strings.Join(types, ","); got != "eds,cds,rds" {
			t.Errorf("change %d publishes %s, want eds,cds,rds", i+1, got)
		}
		if c.counts.Clusters != p.counts.Clusters+i+1 || c.manifest == nil {
			t.Errorf("change %d: %+v", i+1, c.counts)
		}
	}
	if p.countsAfter(2) != p.changes[1].counts || p.countsAfter(0) != p.counts {
		t.Error("countsAfter")
	}
	hosts := map[string]int{}
	for i, c := range p.churn {
		if len(c.updates) != 1 || typeShort(c.updates[0].typeURL) != "eds" || len(c.updates[0].put) != 1 || c.edit == nil {
			t.Errorf("endpoint change %d: %+v", i+1, c.updates)
			continue
		}
		hosts[c.edit.Host]++
	}
	// Two targets, round robin, each moved away and back.
	if len(hosts) != 2 || p.churn[0].edit.Addr == p.churn[2].edit.Addr || p.churn[0].edit.Host != p.churn[2].edit.Host {
		t.Errorf("churn targets %v; edits %+v %+v", hosts, *p.churn[0].edit, *p.churn[2].edit)
	}
}

func TestLoadWorkloadErrors(t *testing.T) {
	if _, err := LoadWorkload("no-such-workload", 10); err == nil {
		t.Error("unknown workload loaded")
	}
	if _, err := Run(context.Background(), Options{Scenarios: []string{"nope"}}); err == nil {
		t.Error("unknown scenario accepted")
	}
	if _, err := Run(context.Background(), Options{Servers: []string{"istiod"}}); err == nil {
		t.Error("unknown server accepted")
	}
	wl, err := LoadWorkload("../examples", 0)
	if err != nil || wl.Name != "examples" || len(wl.Files) < 5 || wl.String() != "examples" {
		t.Errorf("examples: %v, %+v", err, wl)
	}
}

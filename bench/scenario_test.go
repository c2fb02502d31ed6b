package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/pilotfish-mesh/pilotfish/loadgen"
)

// smallOptions are scenario options small enough for plain go test: a few
// seconds per workload on two shared cores.
func smallOptions(t *testing.T, workload string, services int, scenarios ...string) Options {
	return Options{
		Workload: workload, Services: services, Proxies: 20, Scenarios: scenarios, Changes: 2,
		ChurnRate: 20, ChurnDuration: 300 * time.Millisecond, ChurnTargets: 3, Settle: 100 * time.Millisecond,
		Timeout: time.Minute, ChangeTimeout: 30 * time.Second,
		Client: childClient(t), VerifyCache: true,
	}
}

// TestScenariosEndToEnd runs every scenario against pilotfish and both
// baselines and checks that the numbers are consistent: Run itself fails
// unless every proxy reached full config with the plan's resource counts
// and every change converged everywhere; here the results must be
// complete, positive and ordered, and ratios computed for each baseline.
func TestScenariosEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers and a client process")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	o := smallOptions(t, "http", 10)
	res, err := Run(ctx, o)
	logResult(t, res)
	if err != nil {
		t.Fatal(err)
	}
	if res.FullConfig.Clusters != 14 || res.FullConfig.Endpoints != 11 || res.FullConfig.Listeners != 3 || res.FullConfig.Routes != 1 {
		t.Errorf("full config %+v, want istio-bench http@10's 14 clusters, 11 endpoints, 3 listeners, 1 route", res.FullConfig)
	}
	if len(res.Servers) != 3 || res.ClientInProcess {
		t.Fatalf("%d servers, client in process %v", len(res.Servers), res.ClientInProcess)
	}
	for _, s := range res.Servers {
		if len(s.Errors) > 0 {
			t.Errorf("%s: %v", s.Server, s.Errors)
		}
		if s.Connect == nil || s.Change == nil || s.Churn == nil || s.Reconnect == nil || s.Memory == nil {
			t.Fatalf("%s: a scenario is missing: %+v", s.Server, s)
		}
		c := s.Connect
		if c.AllFullConfigMS <= 0 || c.TimeToFullConfig.Count != o.Proxies || c.TimeToFullConfig.MaxMS > c.AllFullConfigMS+1 ||
			c.CPUPerProxyMS <= 0 || c.AllocsPerProxy <= 0 || c.BytesPerProxy < float64(res.FullConfig.Bytes) {
			t.Errorf("%s: connect %+v", s.Server, c)
		}
		for name, cr := range map[string]*ConvergenceResult{"change": s.Change, "churn": s.Churn, "reconnect": s.Reconnect} {
			l := cr.Convergence
			if l.Count != cr.Changes*o.Proxies || l.P50MS <= 0 || l.P50MS > l.P99MS || l.P99MS > l.MaxMS || cr.BytesPerProxy <= 0 {
				t.Errorf("%s: %s %+v", s.Server, name, cr)
			}
		}
		if s.Change.Changes != o.Changes || s.Churn.Changes != 6 || s.Change.CPUPerProxyMS <= 0 || s.Change.AllocsPerProxy <= 0 {
			t.Errorf("%s: change %+v, churn %+v", s.Server, s.Change, s.Churn)
		}
		// A reconnect re-sends the full config.
		if s.Reconnect.BytesPerProxy < float64(res.FullConfig.Bytes) {
			t.Errorf("%s: reconnect received %.0f bytes per proxy, full config is %d", s.Server, s.Reconnect.BytesPerProxy, res.FullConfig.Bytes)
		}
		// Every proxy holds at least a gRPC transport and its stream.
		if m := s.Memory; m.HeapPerProxy <= 1024 || m.GoroutinesPerProxy < 2 {
			t.Errorf("%s: memory %+v", s.Server, m)
		}
	}
	for _, bl := range []string{Snapshot, Linear} {
		for _, m := range []struct{ scenario, metric string }{
			{ScenarioConnect, "all proxies at full config"}, {ScenarioChange, "convergence p50"},
			{ScenarioChurn, "convergence p99"}, {ScenarioReconnect, "convergence max"}, {ScenarioMemory, "heap per proxy"},
		} {
			r, ok := res.Ratio(m.scenario, m.metric, bl)
			if !ok || r.Value <= 0 || r.Speedup() <= 0 {
				t.Errorf("no ratio for %s %s against %s: %+v", m.scenario, m.metric, bl, r)
			}
		}
	}
	var table, js bytes.Buffer
	if err := res.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"pf/snapshot", "pf/linear", "convergence p99", "heap per proxy", "14 clusters"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
	if err := res.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back Result
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || len(back.Ratios) != len(res.Ratios) {
		t.Errorf("JSON round trip: %v, %d ratios", err, len(back.Ratios))
	}
}

// TestScenariosWorkloads runs the config change (and, where endpoints are
// plain IPs, the churn) on the other workloads: istio-bench virtualservice
// and the example mesh.
func TestScenariosWorkloads(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers and a client process")
	}
	for _, c := range []struct {
		workload  string
		services  int
		scenarios []string
	}{
		{"virtualservice", 10, []string{ScenarioConnect, ScenarioChange}},
		{"../examples", 0, []string{ScenarioChange, ScenarioChurn}},
	} {
		t.Run(c.workload, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			res, err := Run(ctx, smallOptions(t, c.workload, c.services, c.scenarios...))
			logResult(t, res)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range res.Servers {
				if s.Change == nil || s.Change.Convergence.Count != 2*20 {
					t.Errorf("%s: change %+v", s.Server, s.Change)
				}
			}
		})
	}
}

// TestScenarioInProcessClient runs loadgen in the test process: the
// figures include the clients, and the result says so.
func TestScenarioInProcessClient(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	o := smallOptions(t, "http", 5, ScenarioChange)
	o.Client = Client{}
	o.Servers = []string{Pilotfish, Linear}
	res, err := Run(ctx, o)
	logResult(t, res)
	if err != nil {
		t.Fatal(err)
	}
	if !res.ClientInProcess || len(res.Servers) != 2 {
		t.Fatalf("in process %v, %d servers", res.ClientInProcess, len(res.Servers))
	}
	if _, ok := res.Ratio(ScenarioChange, "convergence max", Linear); !ok {
		t.Error("no change ratio against linear")
	}
	if _, ok := res.Ratio(ScenarioChange, "convergence max", Snapshot); ok {
		t.Error("a ratio against a server that did not run")
	}
}

func logResult(t *testing.T, res *Result) {
	t.Helper()
	if res == nil {
		return
	}
	var b strings.Builder
	res.WriteTable(&b)
	t.Log("\n" + b.String())
}

// TestScenariosH2CTransport: the simulated proxies on loadgen's own
// transport (--transport h2c) reach full config, converge on changes,
// endpoint churn and a reconnect storm (the server cuts every connection;
// each proxy dials again), against pilotfish and a go-control-plane
// baseline, in both protocol variants.
func TestScenariosH2CTransport(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers and a client process")
	}
	for _, mode := range []loadgen.Mode{loadgen.SotW, loadgen.Delta} {
		t.Run(string(mode), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			o := smallOptions(t, "http", 10, ScenarioConnect, ScenarioChange, ScenarioChurn, ScenarioReconnect)
			o.Servers, o.Mode, o.Transport = []string{Pilotfish, Linear}, mode, loadgen.TransportH2C
			res, err := Run(ctx, o)
			logResult(t, res)
			if err != nil {
				t.Fatal(err)
			}
			if res.Transport != loadgen.TransportH2C {
				t.Errorf("result transport %q", res.Transport)
			}
			for _, s := range res.Servers {
				if len(s.Errors) > 0 || s.Change == nil || s.Churn == nil || s.Reconnect == nil {
					t.Fatalf("%s: errors %v, change %v, churn %v, reconnect %v", s.Server, s.Errors, s.Change, s.Churn, s.Reconnect)
				}
				if s.Change.Convergence.Count != o.Changes*o.Proxies || s.Reconnect.Convergence.Count != o.Proxies {
					t.Errorf("%s: %d change and %d reconnect convergences", s.Server, s.Change.Convergence.Count, s.Reconnect.Convergence.Count)
				}
			}
		})
	}
}

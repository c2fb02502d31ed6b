package bench

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// gateEnv enables TestGate: `make bench-gate` (and so `make test`) sets it.
// Plain go test skips the gate, which needs a quiet-ish machine for a
// minute; TestScenariosEndToEnd covers the same code at a small size.
const gateEnv = "PILOTFISH_BENCH_GATE"

// gateOptions is the gate's run: istio-bench http at 100 services, 200
// sidecars, every scenario, against pilotfish and both baselines, with
// loadgen in a child process. 20–25 s on two shared cores (twice that
// when a check needs its second chance).
func gateOptions(t *testing.T) Options {
	return Options{
		Workload: "http", Services: 100, Proxies: 200, Changes: 5,
		ChurnRate: 10, ChurnDuration: 2 * time.Second, Settle: 300 * time.Millisecond,
		Timeout: 3 * time.Minute, ChangeTimeout: time.Minute,
		Client: childClient(t),
	}
}

// gateFloor is a same-run ratio pilotfish must keep: the baseline's value
// over pilotfish's (how many times faster, smaller or leaner pilotfish is)
// must be at least floor. The floors sit well below the measured values
// (docs/benchmarks.md records both) so that noise never fails a good
// change, while a real regression — pilotfish losing its edge over a
// baseline — does.
type gateFloor struct {
	scenario, metric, baseline string
	floor                      float64
}

var gateFloors = []gateFloor{
	// Wall-clock convergence against SnapshotCache: measured 2.8–7.7×
	// (config change) and 3.5–7.3× (endpoint churn). Against LinearCache
	// the wall-clock ratio at this size is within the noise of a shared
	// machine (0.8–2.0× over the same runs: a convergence of 100–200 ms
	// where the client shares the cores), so the gate holds pilotfish to
	// the server's CPU time there instead.
	{ScenarioChange, "convergence p50", Snapshot, 1.5},
	{ScenarioChurn, "convergence p50", Snapshot, 1.5},
	{ScenarioConnect, "all proxies at full config", Snapshot, 1.0}, // 0.95–4.3×
	// The server's CPU time per proxy (this process's, the client runs in a
	// child): steadier than wall clock.
	{ScenarioChange, "server CPU per proxy per change", Snapshot, 2.5}, // 4.7–12.5×
	{ScenarioChange, "server CPU per proxy per change", Linear, 1.0},   // 1.2–2.5×
	{ScenarioChurn, "server CPU per proxy per change", Snapshot, 2.0},  // 4.0–7.8×
	{ScenarioChurn, "server CPU per proxy per change", Linear, 1.0},    // 1.3–2.6×
	{ScenarioConnect, "server CPU per proxy", Snapshot, 1.8},           // 2.8–5.1×
	// Allocations per proxy: stable to a few percent.
	{ScenarioChange, "server allocs per proxy per change", Snapshot, 12}, // 19.7–20.4×
	{ScenarioChange, "server allocs per proxy per change", Linear, 1.3},  // 1.65–1.71×
	{ScenarioChurn, "server allocs per proxy per change", Snapshot, 12},  // 21.3–21.5×
	{ScenarioConnect, "server allocs per proxy", Snapshot, 6},            // 9.2–9.6×
	// Idle heap per proxy (1.37× SnapshotCache's, 1.54× LinearCache's;
	// stable to 1%): what gRPC's transport costs per connection, the same
	// in every server, is most of each figure at this size, so the floors guard against
	// pilotfish growing per-stream state rather than demand the 5× it
	// reaches at 1,000 services.
	{ScenarioMemory, "heap per proxy", Snapshot, 1.1},
	{ScenarioMemory, "heap per proxy", Linear, 1.2},
}

// gateBudget is an allocation budget: pilotfish's server allocations per
// proxy (end to end: gRPC transport, request decoding, push assembly,
// generation amortized over the class) must not exceed it.
type gateBudget struct {
	scenario, metric string
	budget           float64
}

var gateBudgets = []gateBudget{
	{ScenarioConnect, "server allocs per proxy", 1050},          // 684–710
	{ScenarioChange, "server allocs per proxy per change", 470}, // 310–321
	{ScenarioChurn, "server allocs per proxy per change", 200},  // 130–134
}

// TestGate is `make bench-gate`: one scenario run, then every floor and
// budget. Timing noise on a shared machine is the enemy of a gate, so the
// run is repeated once when a check fails and each check passes if it
// passes in either run; allocation budgets are stable and need no second
// chance, but get it all the same.
func TestGate(t *testing.T) {
	if os.Getenv(gateEnv) != "1" {
		t.Skipf("set %s=1 (make bench-gate) to run the regression gate", gateEnv)
	}
	if raceEnabled {
		t.Skip("ratios and allocations are not meaningful under the race detector")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	var failures map[string]string
	for attempt := 1; attempt <= 2; attempt++ {
		res, err := Run(ctx, gateOptions(t))
		logResult(t, res)
		if err != nil {
			t.Fatalf("attempt %d: %v", attempt, err)
		}
		got := gateCheck(res)
		t.Logf("attempt %d:\n%s", attempt, strings.Join(got.lines, "\n"))
		if failures == nil {
			failures = got.failed
		} else {
			for k := range failures {
				if _, still := got.failed[k]; !still {
					delete(failures, k)
				}
			}
		}
		if len(failures) == 0 {
			return
		}
	}
	for _, msg := range failures {
		t.Error(msg)
	}
}

type gateOutcome struct {
	lines  []string
	failed map[string]string // check → message
}

// gateCheck evaluates every floor and budget against res.
func gateCheck(res *Result) gateOutcome {
	out := gateOutcome{failed: map[string]string{}}
	for _, f := range gateFloors {
		key := fmt.Sprintf("%s %s vs %s", f.scenario, f.metric, f.baseline)
		r, ok := res.Ratio(f.scenario, f.metric, f.baseline)
		if !ok {
			out.failed[key] = key + ": not measured"
			continue
		}
		status := "ok"
		if r.Speedup() < f.floor {
			status = "FAIL"
			out.failed[key] = fmt.Sprintf("%s: pilotfish is %.2f× the baseline, floor %.2f× (pilotfish/%s = %.3f)",
				key, r.Speedup(), f.floor, f.baseline, r.Value)
		}
		out.lines = append(out.lines, fmt.Sprintf("  %-4s %-60s %6.2f× (floor %.2f×)", status, key, r.Speedup(), f.floor))
	}
	pf := res.Server(Pilotfish)
	for _, b := range gateBudgets {
		key := fmt.Sprintf("%s %s", b.scenario, b.metric)
		var v float64
		var ok bool
		for _, m := range metrics {
			if m.scenario == b.scenario && m.name == b.metric && pf != nil {
				v, ok = m.get(pf)
			}
		}
		if !ok {
			out.failed[key] = key + ": not measured"
			continue
		}
		status := "ok"
		if v > b.budget {
			status = "FAIL"
			out.failed[key] = fmt.Sprintf("%s: %.0f, budget %.0f", key, v, b.budget)
		}
		out.lines = append(out.lines, fmt.Sprintf("  %-4s %-60s %7.0f (budget %.0f)", status, key, v, b.budget))
	}
	return out
}

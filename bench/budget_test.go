package bench

import (
	"context"
	"fmt"
	"testing"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/engine"
)

// warmConfigBudgets are the allocation budgets of a warm proxy's full
// config (CDS, EDS, LDS, RDS for a second proxy of a class whose first
// proxy already has it: the per-class memo and the bytes cache answer
// everything). Measured: 1 allocation at every size (the result slice of
// the first Generate of each call); the budget allows one more, never one
// per resource. docs/benchmarks.md records the values.
var warmConfigBudgets = []struct {
	wc     workloadCase
	budget float64
}{
	{workloadCase{"http", 100}, 2},
	{workloadCase{"http", 1000}, 2},
	{workloadCase{"virtualservice", 100}, 2},
}

// TestWarmProxyConfigAllocs: the allocations of BenchmarkProxyConfigWarm
// are a hard budget in plain go test (and `make bench-gate`).
func TestWarmProxyConfigAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under the race detector")
	}
	for _, c := range warmConfigBudgets {
		t.Run(fmt.Sprintf("%s/services=%d", c.wc.name, c.wc.services), func(t *testing.T) {
			w, eds, rds := setup(t, c.wc)
			cache := encode.NewCache()
			cache.SetVerify(false)
			e := engine.New(w, engine.Options{Cache: cache})
			first, err := e.Connect(context.Background(), node("10.0.0.1", "pod-0"), "")
			if err != nil {
				t.Fatal(err)
			}
			fullConfig(t, first, eds, rds)
			second, err := e.Connect(context.Background(), node("10.0.0.2", "pod-1"), "")
			if err != nil {
				t.Fatal(err)
			}
			var n int
			allocs := testing.AllocsPerRun(20, func() { n, _ = fullConfig(t, second, eds, rds) })
			t.Logf("warm full config: %d resources, %.0f allocs (budget %.0f)", n, allocs, c.budget)
			if allocs > c.budget {
				t.Errorf("warm full config of %d resources: %.0f allocs, budget %.0f", n, allocs, c.budget)
			}
		})
	}
}

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/engine"
	"github.com/pilotfish-mesh/pilotfish/index"
)

// The Grafana dashboard (deploy/grafana/pilotfish-dashboard.json) queries
// only metrics pilotfish exports: every name in every panel's PromQL is
// checked against the registry serve uses, each metric touched once so
// that labelled families show up.

// exportedMetricNames returns every series name pilotfish's registry
// exposes, histogram and summary suffixes included.
func exportedMetricNames(t *testing.T) map[string]bool {
	t.Helper()
	m := newMetrics(index.NewWriter())
	m.watchCache(encode.NewCache())
	x, e := m.xds(), m.engine()
	for _, typ := range []string{engine.TypeCluster, engine.TypeEndpoint, engine.TypeListener, engine.TypeRoute} {
		x.Pushed(typ, 100)
		x.Rejected(typ)
		x.PushTime(typ, time.Millisecond)
		x.PushError(typ, "timeout")
	}
	e.Proxies(1)
	e.PushQueued("config", 1)
	e.QueueTime(time.Millisecond)
	e.Converged(engine.TypeCluster, time.Millisecond)
	e.Debounced(time.Millisecond, true)
	fams, err := m.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, f := range fams {
		n := f.GetName()
		names[n] = true
		if f.GetMetric()[0].GetHistogram() != nil || f.GetMetric()[0].GetSummary() != nil {
			names[n+"_bucket"], names[n+"_sum"], names[n+"_count"] = true, true, true
		}
	}
	return names
}

// promQLKeywords are the identifiers of PromQL that are not metric names.
var promQLKeywords = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
	"and": true, "or": true, "unless": true, "bool": true, "offset": true,
}

// metricNamesIn extracts the metric names a PromQL expression reads.
func metricNamesIn(expr string) []string {
	expr = regexp.MustCompile(`"(\\.|[^"])*"`).ReplaceAllString(expr, `""`)                        // strings
	expr = regexp.MustCompile(`\{[^}]*\}`).ReplaceAllString(expr, "")                              // label matchers
	expr = regexp.MustCompile(`\[[^\]]*\]`).ReplaceAllString(expr, "")                             // ranges
	expr = regexp.MustCompile(`\b(by|without|on|ignoring)\s*\([^)]*\)`).ReplaceAllString(expr, "") // grouping labels
	var out []string
	for _, m := range regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*(\s*\()?`).FindAllString(expr, -1) {
		if strings.HasSuffix(m, "(") || promQLKeywords[m] {
			continue // a function, or a keyword
		}
		out = append(out, m)
	}
	return out
}

func TestGrafanaDashboardQueriesExportedMetrics(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "deploy", "grafana", "pilotfish-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Title  string `json:"title"`
		Panels []struct {
			Title   string `json:"title"`
			Type    string `json:"type"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("dashboard: %v", err)
	}
	exported := exportedMetricNames(t)
	used := map[string]bool{}
	queries := 0
	for _, p := range dash.Panels {
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			queries++
			names := metricNamesIn(tg.Expr)
			if len(names) == 0 {
				t.Errorf("panel %q: no metric in %q", p.Title, tg.Expr)
			}
			for _, n := range names {
				used[n] = true
				if !exported[n] {
					t.Errorf("panel %q queries %s, which pilotfish does not export (expr %q)", p.Title, n, tg.Expr)
				}
			}
		}
	}
	// The istiod metrics the issue names are all on the dashboard.
	for _, n := range []string{"pilot_xds", "pilot_xds_pushes", "pilot_xds_push_time_bucket", "pilot_proxy_convergence_time_bucket",
		"pilot_proxy_queue_time_bucket", "pilot_xds_push_errors", "pilot_total_xds_rejects", "pilot_debounce_time_bucket",
		"pilot_services", "pilot_xds_config_size_bytes_bucket", "go_goroutines", "process_resident_memory_bytes",
		"pilotfish_cache_hits_total", "pilotfish_pushes_total"} {
		if !used[n] {
			t.Errorf("the dashboard does not show %s", n)
		}
	}
	if t.Failed() {
		var all []string
		for n := range exported {
			all = append(all, n)
		}
		sort.Strings(all)
		t.Logf("exported: %v", all)
	}
	t.Logf("%d queries over %d metrics", queries, len(used))
}

func TestMetricNamesIn(t *testing.T) {
	for _, c := range []struct{ expr, want string }{
		{`sum(pilot_xds{job=~"$job"})`, "pilot_xds"},
		{`histogram_quantile(0.99, sum by (le, type) (rate(pilot_xds_push_time_bucket{job=~"a"}[$__rate_interval])))`, "pilot_xds_push_time_bucket"},
		{`sum by (kind) (rate(a_total[5m])) / (sum by (kind) (rate(a_total[5m])) + sum without (x) (b))`, "a_total a_total b"},
		{`rate(process_cpu_seconds_total[1m]) * 60`, "process_cpu_seconds_total"},
	} {
		if got := strings.Join(metricNamesIn(c.expr), " "); got != c.want {
			t.Errorf("metricNamesIn(%q) = %q, want %q", c.expr, got, c.want)
		}
	}
}

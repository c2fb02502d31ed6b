package bench

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Ratio is pilotfish's value of a metric over a baseline's, measured in the
// same run: below 1 pilotfish is faster or smaller.
type Ratio struct {
	Scenario string  `json:"scenario"`
	Metric   string  `json:"metric"`
	Baseline string  `json:"baseline"`
	Value    float64 `json:"pilotfish_over_baseline"`
}

// Speedup is the inverse: how many times faster (or smaller) pilotfish is.
func (r Ratio) Speedup() float64 {
	if r.Value <= 0 {
		return 0
	}
	return 1 / r.Value
}

// unit says how a metric prints.
type unit int

const (
	unitMS unit = iota
	unitBytes
	unitCount
	unitRate
)

// metric is one row of the table.
type metric struct {
	scenario, name string
	unit           unit
	get            func(*ServerResult) (float64, bool)
}

func connectMetric(name string, u unit, f func(*ConnectResult) float64) metric {
	return metric{ScenarioConnect, name, u, func(s *ServerResult) (float64, bool) {
		if s.Connect == nil {
			return 0, false
		}
		return f(s.Connect), true
	}}
}

func convMetric(scenario, name string, u unit, pick func(*ServerResult) *ConvergenceResult, f func(*ConvergenceResult) float64) metric {
	return metric{scenario, name, u, func(s *ServerResult) (float64, bool) {
		c := pick(s)
		if c == nil {
			return 0, false
		}
		v := f(c)
		return v, v != 0 || u == unitMS
	}}
}

func memMetric(name string, u unit, f func(*MemoryResult) float64) metric {
	return metric{ScenarioMemory, name, u, func(s *ServerResult) (float64, bool) {
		if s.Memory == nil {
			return 0, false
		}
		return f(s.Memory), true
	}}
}

// metrics are the table's rows, in order; ratios are computed for each.
var metrics = func() []metric {
	m := []metric{
		connectMetric("all proxies at full config", unitMS, func(c *ConnectResult) float64 { return c.AllFullConfigMS }),
		connectMetric("time to full config p50", unitMS, func(c *ConnectResult) float64 { return c.TimeToFullConfig.P50MS }),
		connectMetric("time to full config p99", unitMS, func(c *ConnectResult) float64 { return c.TimeToFullConfig.P99MS }),
		connectMetric("server CPU per proxy", unitMS, func(c *ConnectResult) float64 { return c.CPUPerProxyMS }),
		connectMetric("server allocs per proxy", unitCount, func(c *ConnectResult) float64 { return c.AllocsPerProxy }),
		connectMetric("bytes per proxy", unitBytes, func(c *ConnectResult) float64 { return c.BytesPerProxy }),
	}
	for _, sc := range []struct {
		name string
		pick func(*ServerResult) *ConvergenceResult
	}{
		{ScenarioChange, func(s *ServerResult) *ConvergenceResult { return s.Change }},
		{ScenarioChurn, func(s *ServerResult) *ConvergenceResult { return s.Churn }},
		{ScenarioReconnect, func(s *ServerResult) *ConvergenceResult { return s.Reconnect }},
	} {
		m = append(m,
			convMetric(sc.name, "convergence p50", unitMS, sc.pick, func(c *ConvergenceResult) float64 { return c.Convergence.P50MS }),
			convMetric(sc.name, "convergence p99", unitMS, sc.pick, func(c *ConvergenceResult) float64 { return c.Convergence.P99MS }),
			convMetric(sc.name, "convergence max", unitMS, sc.pick, func(c *ConvergenceResult) float64 { return c.Convergence.MaxMS }),
		)
		if sc.name != ScenarioReconnect {
			m = append(m,
				convMetric(sc.name, "server CPU per proxy per change", unitMS, sc.pick, func(c *ConvergenceResult) float64 { return c.CPUPerProxyMS }),
				convMetric(sc.name, "server allocs per proxy per change", unitCount, sc.pick, func(c *ConvergenceResult) float64 { return c.AllocsPerProxy }),
			)
		}
		m = append(m, convMetric(sc.name, "bytes per proxy per change", unitBytes, sc.pick, func(c *ConvergenceResult) float64 { return c.BytesPerProxy }))
		if sc.name == ScenarioChurn {
			m = append(m, convMetric(sc.name, "changes per second achieved", unitRate, sc.pick, func(c *ConvergenceResult) float64 { return c.RatePerSecond }))
		}
	}
	return append(m,
		memMetric("heap per proxy", unitBytes, func(m *MemoryResult) float64 { return m.HeapPerProxy }),
		memMetric("stacks per proxy", unitBytes, func(m *MemoryResult) float64 { return m.StackPerProxy }),
		memMetric("RSS per proxy", unitBytes, func(m *MemoryResult) float64 { return m.RSSPerProxy }),
		memMetric("goroutines per proxy", unitCount, func(m *MemoryResult) float64 { return m.GoroutinesPerProxy }),
		memMetric("config heap (no proxy)", unitBytes, func(m *MemoryResult) float64 { return m.ConfigHeap }),
	)
}()

// ratios computes pilotfish over each baseline for every metric both have.
func ratios(res *Result) []Ratio {
	pf := res.Server(Pilotfish)
	if pf == nil {
		return nil
	}
	var out []Ratio
	for _, m := range metrics {
		if m.unit == unitRate {
			continue
		}
		v, ok := m.get(pf)
		if !ok {
			continue
		}
		for _, s := range res.Servers {
			if s.Server == Pilotfish {
				continue
			}
			b, ok := m.get(s)
			if !ok || b <= 0 || v < 0 {
				continue
			}
			out = append(out, Ratio{Scenario: m.scenario, Metric: m.name, Baseline: s.Server, Value: v / b})
		}
	}
	return out
}

// Server returns the result of server kind, nil if it did not run.
func (r *Result) Server(kind string) *ServerResult {
	for _, s := range r.Servers {
		if s.Server == kind {
			return s
		}
	}
	return nil
}

// Ratio returns pilotfish over baseline for a metric of a scenario.
func (r *Result) Ratio(scenario, metric, baseline string) (Ratio, bool) {
	for _, x := range r.Ratios {
		if x.Scenario == scenario && x.Metric == metric && x.Baseline == baseline {
			return x, true
		}
	}
	return Ratio{}, false
}

// WriteJSON writes the result as indented JSON.
func (r *Result) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteTable writes the result as a table: each metric's absolute value per
// server, then pilotfish over each baseline.
func (r *Result) WriteTable(w io.Writer) error {
	var b strings.Builder
	name := r.Workload
	if r.Services > 0 {
		name = fmt.Sprintf("%s, %d services", r.Workload, r.Services)
	}
	client := "a child process"
	if r.ClientInProcess {
		client = "this process (server CPU, heap and RSS include the clients)"
	}
	fmt.Fprintf(&b, "pilotfish bench: %s; %d proxies (%s, %s transport); loadgen in %s; pilotfish debounce %s\n", name, r.Proxies, orDash(r.Mode), cmp.Or(r.Transport, "grpc"), client, fmtMS(r.DebounceMS))
	fmt.Fprintf(&b, "full config per proxy: %d clusters, %d endpoints, %d listeners, %d routes, %s\n",
		r.FullConfig.Clusters, r.FullConfig.Endpoints, r.FullConfig.Listeners, r.FullConfig.Routes, fmtBytes(float64(r.FullConfig.Bytes)))
	fmt.Fprintf(&b, "GOMAXPROCS %d of %d CPUs; load average %s before, %s after; %s\n\n",
		r.GOMAXPROCS, r.NumCPU, orDash(r.LoadBefore), orDash(r.LoadAfter), fmtMS(r.ElapsedMS))

	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	header := []string{"scenario", "metric"}
	var baselines []string
	for _, s := range r.Servers {
		header = append(header, s.Server)
		if s.Server != Pilotfish {
			baselines = append(baselines, s.Server)
		}
	}
	if r.Server(Pilotfish) != nil {
		for _, bl := range baselines {
			header = append(header, "pf/"+bl)
		}
	}
	fmt.Fprintln(tw, strings.Join(header, "\t")+"\t")
	for _, m := range metrics {
		row := []string{m.scenario, m.name}
		any := false
		for _, s := range r.Servers {
			v, ok := m.get(s)
			if !ok {
				row = append(row, "–")
				continue
			}
			any = true
			row = append(row, m.format(v))
		}
		if !any {
			continue
		}
		if r.Server(Pilotfish) != nil {
			for _, bl := range baselines {
				if x, ok := r.Ratio(m.scenario, m.name, bl); ok {
					row = append(row, fmtRatio(x.Value))
				} else {
					row = append(row, "–")
				}
			}
		}
		fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
	}
	tw.Flush()
	for _, s := range r.Servers {
		for _, e := range s.Errors {
			fmt.Fprintf(&b, "\n%s: ERROR: %s", s.Server, e)
		}
	}
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func (m metric) format(v float64) string {
	switch m.unit {
	case unitMS:
		return fmtMS(v)
	case unitBytes:
		return fmtBytes(v)
	case unitRate:
		if v < 1 {
			return fmt.Sprintf("%.2f/s", v)
		}
		return fmt.Sprintf("%.1f/s", v)
	}
	if v >= 100 || v == float64(int64(v)) {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

func fmtRatio(v float64) string {
	switch {
	case v >= 10:
		return fmt.Sprintf("%.0f", v)
	case v >= 0.1:
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.3f", v)
}

func fmtMS(v float64) string {
	switch {
	case v >= 10_000:
		return fmt.Sprintf("%.1fs", v/1000)
	case v >= 1000:
		return fmt.Sprintf("%.2fs", v/1000)
	case v >= 10:
		return fmt.Sprintf("%.0fms", v)
	case v >= 0.1:
		return fmt.Sprintf("%.2fms", v)
	case v == 0:
		return "0"
	}
	return fmt.Sprintf("%.0fµs", v*1000)
}

func fmtBytes(v float64) string {
	neg := ""
	if v < 0 {
		neg, v = "-", -v
	}
	switch {
	case v >= 1<<30:
		return fmt.Sprintf("%s%.2f GiB", neg, v/(1<<30))
	case v >= 1<<20:
		return fmt.Sprintf("%s%.1f MiB", neg, v/(1<<20))
	case v >= 1<<10:
		return fmt.Sprintf("%s%.1f KiB", neg, v/(1<<10))
	}
	return fmt.Sprintf("%s%.0f B", neg, v)
}

func orDash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}

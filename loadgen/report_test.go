package loadgen

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// sampleReport is a report with every section filled.
func sampleReport() *Report {
	lat := func(base float64) Latency {
		l := Latency{Count: 100, MinMS: base, MeanMS: base * 2, P50MS: base * 2, P90MS: base * 3, P99MS: base * 4, MaxMS: base * 5}
		for q := range 101 {
			l.CDFMS = append(l.CDFMS, base+float64(q)*base*4/100)
		}
		return l
	}
	r := &Report{
		Target: "127.0.0.1:15010", ProxyType: "sidecar", Mode: "sotw", Decode: "lazy", Proxies: 100,
		StreamsPerConn: 1, Connections: 100, StartedAt: time.Unix(1700000000, 0), ElapsedMS: 5000, Complete: true,
		Launched: 100, Connected: 100, FullConfig: 100, AllFullConfigMS: 2500, TimeToFullConfig: lat(500),
		BytesToFullConfig: 100 << 20,
		Changes: []ChangeStats{{Index: 1, Expect: "cds/outbound|80||new.example.com", AtMS: 3000, Converged: 100,
			Convergence: lat(100), Responses: 200, Bytes: 50 << 20}},
		Errors:  ErrorStats{Last: "proxy 3: receive: <boom> & \"quoted\""},
		Process: ProcessStats{CPUUserSeconds: 1, MaxRSSBytes: 50 << 20, RSSAtFullConfigBytes: 40 << 20},
	}
	for i, name := range typeNames {
		r.Types = append(r.Types, TypeStats{Type: name, Responses: int64(100 * (i + 1)), Bytes: int64(i+1) << 20, ACKs: 100,
			ResponseLatency: lat(10)})
	}
	for i := range 20 {
		r.Timeline = append(r.Timeline, Sample{AtMS: float64(i) * 250, Launched: 100, Connected: min(100, i*20),
			FullConfig: min(100, i*8), Bytes: int64(i) << 20, CPUSeconds: float64(i) / 10, RSSBytes: 40 << 20})
	}
	return r
}

func TestWriteHTML(t *testing.T) {
	var b bytes.Buffer
	if err := sampleReport().WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{"<svg", "Proxies over time", "Time to full config (CDF)", "Convergence after each change",
		"Bytes received per type", "cds/outbound|80||new.example.com", "&lt;boom&gt;", "data-chart="} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	// Self-contained: nothing loaded from elsewhere.
	if m := regexp.MustCompile(`(?i)(src|href)\s*=|@import|url\(`).FindString(page); m != "" {
		t.Errorf("page loads an external resource: %q", m)
	}
	if strings.Contains(page, "<boom>") {
		t.Error("error text not escaped")
	}
}

func TestWriteHTMLEmpty(t *testing.T) {
	// A run that got nowhere still renders.
	r := &Report{Target: "x:1", Proxies: 3, Types: []TypeStats{{Type: "cds"}}}
	var b bytes.Buffer
	if err := r.WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "incomplete") {
		t.Error("no incomplete badge")
	}
}

func TestWriteJSONAndTable(t *testing.T) {
	r := sampleReport()
	var b bytes.Buffer
	if err := r.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	// The documented, stable field names.
	for _, k := range []string{"target", "proxy_type", "mode", "proxies", "complete", "full_config", "all_full_config_ms",
		"time_to_full_config", "bytes_to_full_config", "types", "changes", "errors", "process", "timeline"} {
		if _, ok := m[k]; !ok {
			t.Errorf("JSON lacks %q", k)
		}
	}
	ttfc := m["time_to_full_config"].(map[string]any)
	for _, k := range []string{"count", "p50_ms", "p90_ms", "p99_ms", "max_ms", "cdf_ms"} {
		if _, ok := ttfc[k]; !ok {
			t.Errorf("latency lacks %q", k)
		}
	}
	var back Report
	if err := json.Unmarshal(b.Bytes(), &back); err != nil || back.Changes[0].Convergence.P99MS != r.Changes[0].Convergence.P99MS {
		t.Errorf("round trip: %v", err)
	}

	b.Reset()
	if err := r.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"time to full config", "change 1 convergence", "cds", "converged on 100/100", "RSS"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}

func TestNiceTicks(t *testing.T) {
	for _, c := range []struct {
		lo, hi float64
		want   []float64
	}{
		{0, 100, []float64{0, 20, 40, 60, 80, 100}},
		{0, 7, []float64{0, 2, 4, 6}},
		{40, 46, []float64{40, 42, 44, 46}},
	} {
		got := niceTicks(c.lo, c.hi, 5)
		if len(got) != len(c.want) {
			t.Errorf("niceTicks(%v, %v) = %v, want %v", c.lo, c.hi, got, c.want)
			continue
		}
		for i := range got {
			if d := got[i] - c.want[i]; d > 1e-9 || d < -1e-9 {
				t.Errorf("niceTicks(%v, %v) = %v, want %v", c.lo, c.hi, got, c.want)
				break
			}
		}
	}
	for v, want := range map[float64]float64{87: 90, 0: 1, 302: 350, 300: 300, 10.1: 12, 0.9: 0.9} {
		if got := niceMax(v); got < want-1e-9 || got > want+1e-9 {
			t.Errorf("niceMax(%v) = %v, want %v", v, got, want)
		}
	}
	// The axis ends at most ~20% past the data.
	for v := 0.01; v < 1e7; v *= 1.07 {
		if got := niceMax(v); got < v || got > 1.21*v {
			t.Fatalf("niceMax(%v) = %v", v, got)
		}
	}
}

// TestTimelineCompaction: a long run's timeline stays under 2,000 samples
// at a coarser resolution.
func TestTimelineCompaction(t *testing.T) {
	cfg, err := Config{XDS: "x:1", Proxies: 1}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	r := newRunner(cfg)
	r.start = time.Now()
	r.sampleEvery.Store(int64(250 * time.Millisecond))
	for range 5000 {
		r.addSample()
	}
	if n := len(r.timeline); n > 2000 || n < 1000 {
		t.Errorf("%d samples", n)
	}
	if got := time.Duration(r.sampleEvery.Load()); got != 2*time.Second {
		t.Errorf("sampling every %v, want 2s after three compactions", got)
	}
}

// nackCounts reads the NACK totals each output shows: the table's total
// row and NACKs line, the JSON's nacks.total and per-type sum, and the
// HTML's card, per-type total row and NACK table.
func nackCounts(t *testing.T, rep *Report) map[string]int64 {
	t.Helper()
	got := map[string]int64{}
	atoi := func(what, s string) int64 {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("%s: %q: %v", what, s, err)
		}
		return n
	}
	var b bytes.Buffer
	if err := rep.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	text := b.String()
	if m := regexp.MustCompile(`(?m)^\s*total\s+\d+\s+\d+\s+\S+ \S+\s+\d+\s+(\d+)`).FindStringSubmatch(text); m != nil {
		got["table total row"] = atoi("table", m[1])
	}
	if m := regexp.MustCompile(`(?m)^NACKs: (\d+) \(`).FindStringSubmatch(text); m != nil {
		got["table NACKs line"] = atoi("table", m[1])
	}
	b.Reset()
	if err := rep.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var j struct {
		NACKs struct {
			Total int64 `json:"total"`
		} `json:"nacks"`
		Types []struct {
			NACKs int64 `json:"nacks"`
		} `json:"types"`
	}
	if err := json.Unmarshal(b.Bytes(), &j); err != nil {
		t.Fatal(err)
	}
	got["json nacks.total"] = j.NACKs.Total
	for _, ty := range j.Types {
		got["json types sum"] += ty.NACKs
	}
	b.Reset()
	if err := rep.WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	if m := regexp.MustCompile(`<div class="label">NACKs</div><div class="value">(\d+)</div>`).FindStringSubmatch(page); m != nil {
		got["html card"] = atoi("html", m[1])
	}
	if m := regexp.MustCompile(`<tr><td>total</td>(?:<td>[^<]*</td>){4}<td>(\d+)</td>`).FindStringSubmatch(page); m != nil {
		got["html total row"] = atoi("html", m[1])
	}
	if m := regexp.MustCompile(`<tr><td>NACKs sent</td><td>(\d+)</td>`).FindStringSubmatch(page); m != nil {
		got["html NACK table"] = atoi("html", m[1])
	}
	if len(got) != 7 {
		t.Fatalf("NACK counts found in %d places, want 7: %v", len(got), got)
	}
	return got
}

// TestNACKCountsAgree: the table, the JSON and the HTML show one NACK
// count, that of the NACKs sent (at the rate and by the NACKing proxies).
func TestNACKCountsAgree(t *testing.T) {
	srv := startXDS(t, baseMesh("v1").snapshot(t))
	cfg := testConfig(srv.addr, 12, Delta)
	cfg.NackRate = 0.5
	cfg.NackingProxies = 2
	rep := run(t, cfg)
	_, server := srv.counts()
	var sent int64
	for _, n := range server {
		sent += int64(n)
	}
	n := rep.NACKs
	if n.Total != sent || n.AtRate+n.ByNackingProxies != n.Total || n.ByNackingProxies != rep.Faults.NackingReceived || n.AtRate == 0 {
		t.Errorf("NACKs %+v; the server saw %d; the NACKing proxies received %d", n, sent, rep.Faults.NackingReceived)
	}
	for where, got := range nackCounts(t, rep) {
		if got != sent {
			t.Errorf("%s: %d NACKs, the server saw %d", where, got, sent)
		}
	}
}

// TestChartAxesFitData: every time chart's axes hold its data and end
// close to it; memory, a level far from 0, gets an axis spanning its range
// (server RSS 300-320 MiB, loadgen's 40 MiB) rather than starting at 0.
func TestChartAxesFitData(t *testing.T) {
	r := sampleReport()
	r.Server = &ServerStats{MetricsURL: "http://127.0.0.1:15014/metrics", IntervalMS: 1000, Rejects: 5,
		Measures: []string{"cpu_seconds", "rss_bytes", "pushes", "rejects"}}
	for i := range 6 {
		r.Server.Samples = append(r.Server.Samples, ServerSample{AtMS: float64(i) * 1000, CPUSeconds: float64(i) * 0.5,
			RSSBytes: (300 + int64(i)*4) << 20, Pushes: int64(i) * 100, Rejects: int64(i)})
	}
	for i := range r.Timeline {
		r.Timeline[i].RSSBytes = (100 + int64(i)) << 20
	}
	var b bytes.Buffer
	if err := r.WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	charts := chartsOf(t, b.String())
	for _, title := range []string{"Proxies over time", "Receive rate", "Pushes: sent by the server, received by loadgen",
		"CPU: server and loadgen", "Memory: server and loadgen", "NACKs: sent by loadgen, counted by the server"} {
		c, ok := charts[title]
		if !ok {
			t.Errorf("no chart %q (have %v)", title, keys(charts))
			continue
		}
		c.checkAxes(t, title)
	}
	mem := charts["Memory: server and loadgen"]
	if mem.Y0 != 100 || mem.Y1 != 350 {
		t.Errorf("memory axis %v..%v MiB, want 100..350 for data 100..320", mem.Y0, mem.Y1)
	}
	if cpu := charts["CPU: server and loadgen"]; cpu.Y0 != 0 || cpu.X1 != 5000 {
		t.Errorf("CPU axes x %v..%v y %v..%v; want x to 5s, y from 0", cpu.X0, cpu.X1, cpu.Y0, cpu.Y1)
	}
	// Server pushes: 100 per second.
	for _, p := range charts["Pushes: sent by the server, received by loadgen"].series("server sent") {
		if p[1] < 99.9 || p[1] > 100.1 {
			t.Errorf("server pushes %v/s at %vms, want 100", p[1], p[0])
		}
	}
}

package loadgen

import (
	"bytes"
	"encoding/json"
	"regexp"
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
	if niceMax(87) != 100 || niceMax(0) != 1 {
		t.Errorf("niceMax: %v %v", niceMax(87), niceMax(0))
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

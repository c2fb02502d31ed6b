package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// metricsServer serves pilotfish's captured /metrics page with
// pilot_xds_pushes{type="cds"} and pilot_total_xds_rejects{type="cds"}
// raised by 10 and 1 at each scrape: a server that pushes as it is watched.
func metricsServer(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	page := capturedMetrics(t)
	var scrapes atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := scrapes.Add(1) - 1
		b := bytes.Replace(page, []byte(`pilot_xds_pushes{type="cds"} 20`), fmt.Appendf(nil, `pilot_xds_pushes{type="cds"} %d`, 20+10*n), 1)
		b = bytes.Replace(b, []byte(`pilot_total_xds_rejects{type="cds"} 3`), fmt.Appendf(nil, `pilot_total_xds_rejects{type="cds"} %d`, 3+n), 1)
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		w.Write(b)
	}))
	t.Cleanup(srv.Close)
	return srv, &scrapes
}

// TestServerSampled: a run given a metrics URL and a PID samples both from
// before the first proxy until every stream has ended; the report carries
// the samples (JSON), the totals (table) and the server's series (HTML).
func TestServerSampled(t *testing.T) {
	xds := startXDS(t, baseMesh("v1").snapshot(t))
	metrics, scrapes := metricsServer(t)
	cfg := testConfig(xds.addr, 5, SotW)
	cfg.ServerMetrics = metrics.URL + "/metrics"
	cfg.ServerPID = os.Getpid() // /proc of this process: CPU and RSS
	cfg.ServerSampleInterval = 20 * time.Millisecond
	cfg.Duration = 300 * time.Millisecond // a few samples
	rep := run(t, cfg)
	s := rep.Server
	if s == nil {
		t.Fatal("no server stats")
	}
	// A scrape cut short as the sampler stops is not an attempt.
	n, k := len(s.Samples), int(scrapes.Load())
	if n < 3 || s.Attempts != n || s.Errors != 0 || k < n || k > n+1 {
		t.Fatalf("%d samples of %d attempts, %d errors (%s), %d scrapes", n, s.Attempts, s.Errors, s.LastError, k)
	}
	if want := "cpu_seconds rss_bytes heap_bytes pushes rejects proxies"; strings.Join(s.Measures, " ") != want {
		t.Errorf("measures %v, want %s", s.Measures, want)
	}
	// Counters over the run: the last scrape's minus the first's.
	if s.Pushes != int64(10*(k-1)) || s.Rejects != int64(k-1) {
		t.Errorf("pushes %d, rejects %d over %d scrapes; want %d and %d", s.Pushes, s.Rejects, k, 10*(k-1), k-1)
	}
	first, last := s.Samples[0], s.Samples[n-1]
	if first.AtMS != 0 || last.AtMS < rep.ElapsedMS || last.Pushes != 72+int64(10*(k-1)) || last.HeapBytes != 8871280 {
		t.Errorf("first %+v, last %+v (run of %vms)", first, last, rep.ElapsedMS)
	}
	// CPU and RSS come from /proc (the page says 0.08s and 61.9 MiB).
	for i, x := range s.Samples {
		if x.RSSBytes <= 0 || x.RSSBytes == 64888832 || i > 0 && x.CPUSeconds < s.Samples[i-1].CPUSeconds || x.AtMS < s.Samples[max(i-1, 0)].AtMS {
			t.Fatalf("sample %d: %+v", i, x)
		}
	}
	if s.MaxRSSBytes < last.RSSBytes || s.CPUSeconds != round3(last.CPUSeconds-first.CPUSeconds) {
		t.Errorf("max RSS %d, CPU %v; samples %+v .. %+v", s.MaxRSSBytes, s.CPUSeconds, first, last)
	}

	var b bytes.Buffer
	if err := rep.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("%d pushes, %d rejects; %d samples, 0 failed", s.Pushes, s.Rejects, n); !strings.Contains(b.String(), want) {
		t.Errorf("table lacks %q:\n%s", want, b.String())
	}
	b.Reset()
	if err := rep.WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	charts := chartsOf(t, b.String())
	for title, series := range map[string][]string{
		"Pushes: sent by the server, received by loadgen": {"server sent", "loadgen received"},
		"CPU: server and loadgen":                         {"server", "loadgen"},
		"Memory: server and loadgen":                      {"server RSS", "loadgen RSS"},
		"NACKs: sent by loadgen, counted by the server":   {"loadgen NACKs", "server rejects"},
	} {
		c, ok := charts[title]
		if !ok {
			t.Errorf("no chart %q (have %v)", title, keys(charts))
			continue
		}
		for _, name := range series {
			if !c.has(name) {
				t.Errorf("%s: no series %q", title, name)
			}
		}
		c.checkAxes(t, title)
	}
	// The rejects series is the server's count since the first sample.
	if c := charts["NACKs: sent by loadgen, counted by the server"]; c.series("server rejects") != nil {
		pts := c.series("server rejects")
		if pts[0][1] != 0 || pts[len(pts)-1][1] != float64(k-1) {
			t.Errorf("server rejects from %v to %v, want 0 to %d", pts[0][1], pts[len(pts)-1][1], k-1)
		}
	}
	if !strings.Contains(b.String(), `id="server"`) || !strings.Contains(b.String(), cfg.ServerMetrics) {
		t.Error("no server table")
	}
}

func round3(v float64) float64 { return float64(int64(v*1e3+0.5)) / 1e3 }

// TestServerSampleErrors: a sample that fails is counted with its reason,
// and the run goes on; a bad URL or PID is a config error.
func TestServerSampleErrors(t *testing.T) {
	huge := strings.Repeat("a 1\n", maxMetricsBytes/4+1)
	for _, c := range []struct {
		name    string
		handler http.HandlerFunc
		want    string
	}{
		{"status", func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "no", http.StatusServiceUnavailable) }, "503"},
		{"malformed", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "a 1\nb{c=d} 2\n") }, "line 2: label value not quoted"},
		{"too large", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, huge) }, "larger than 16 MiB"},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(c.handler)
			defer srv.Close()
			cfg, err := Config{XDS: "x:1", Proxies: 1, ServerMetrics: srv.URL}.withDefaults()
			if err != nil {
				t.Fatal(err)
			}
			s := newServerSampler(cfg)
			s.setStart(time.Now())
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			s.sample(ctx)
			s.sample(ctx)
			st := s.stats()
			if st.Attempts != 2 || st.Errors != 2 || len(st.Samples) != 0 || !strings.Contains(st.LastError, c.want) {
				t.Errorf("stats %+v, want 2 errors naming %q", st, c.want)
			}
		})
	}
	for name, cfg := range map[string]Config{
		"url scheme": {XDS: "x:1", Proxies: 1, ServerMetrics: "127.0.0.1:15014/metrics"},
		"url host":   {XDS: "x:1", Proxies: 1, ServerMetrics: "http:///metrics"},
		"pid":        {XDS: "x:1", Proxies: 1, ServerPID: -1},
		"interval":   {XDS: "x:1", Proxies: 1, ServerSampleInterval: -time.Second},
	} {
		if _, err := cfg.withDefaults(); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: err = %v, want ErrConfig", name, err)
		}
	}
	// A PID that does not exist (beyond Linux's pid_max).
	_, err := Run(context.Background(), Config{XDS: "x:1", Proxies: 1, ServerPID: 1 << 30})
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "/proc/1073741824/stat") {
		t.Errorf("err = %v, want ErrConfig naming /proc/PID/stat", err)
	}
}

func TestParseProc(t *testing.T) {
	stat := "1234 (a (weird) name) S 1 1234 1234 0 -1 4194560 5163 0 0 0 250 75 0 0 20 0 9 0 12345 1000 200 18446744073709551615\n"
	if cpu, err := parseProcStat([]byte(stat)); err != nil || cpu != 3.25 {
		t.Errorf("parseProcStat = %v, %v; want 3.25s", cpu, err)
	}
	for _, bad := range []string{"", "1234 no parens S 1", "1 (x) S 1 2 3", "1 (x) S 1 1 1 0 -1 0 0 0 0 0 ten 75 0"} {
		if _, err := parseProcStat([]byte(bad)); err == nil {
			t.Errorf("parseProcStat(%q) accepted", bad)
		}
	}
	status := "Name:\tpilotfish\nVmPeak:\t  200000 kB\nVmRSS:\t   61234 kB\nThreads:\t9\n"
	if rss, err := parseProcRSS([]byte(status)); err != nil || rss != 61234<<10 {
		t.Errorf("parseProcRSS = %v, %v", rss, err)
	}
	for _, bad := range []string{"Name:\tkthreadd\n", "VmRSS:\t12 MB\n", "VmRSS:\t-1 kB\n", "VmRSS:\n"} {
		if _, err := parseProcRSS([]byte(bad)); err == nil {
			t.Errorf("parseProcRSS(%q) accepted", bad)
		}
	}
	// This process, read as a server.
	cpu, rss, err := readProc(os.Getpid())
	if err != nil || cpu < 0 || rss <= 0 {
		t.Errorf("readProc(self) = %v, %v, %v", cpu, rss, err)
	}
}

// chart is one line chart of an HTML report, from its data-chart attribute.
type chart struct {
	X0, X1, Y0, Y1 float64
	Series         []struct {
		Name string       `json:"name"`
		Pts  [][2]float64 `json:"pts"`
	}
}

func (c chart) series(name string) [][2]float64 {
	for _, s := range c.Series {
		if s.Name == name {
			return s.Pts
		}
	}
	return nil
}

func (c chart) has(name string) bool { return len(c.series(name)) > 0 }

// checkAxes checks that the axes hold every point, and fit them: the y axis
// of a chart whose data do not start near 0 spans at most twice the data's
// range; the x axis ends within 25% past the last point.
func (c chart) checkAxes(t *testing.T, title string) {
	t.Helper()
	xlo, xhi, ylo, yhi := 1e300, -1e300, 1e300, -1e300
	for _, s := range c.Series {
		for _, p := range s.Pts {
			xlo, xhi = min(xlo, p[0]), max(xhi, p[0])
			ylo, yhi = min(ylo, p[1]), max(yhi, p[1])
		}
	}
	if xlo > xhi {
		return
	}
	if xlo < c.X0 || xhi > c.X1 || ylo < c.Y0 || yhi > c.Y1 {
		t.Errorf("%s: data x %v..%v y %v..%v outside the axes x %v..%v y %v..%v", title, xlo, xhi, ylo, yhi, c.X0, c.X1, c.Y0, c.Y1)
	}
	if c.X1-c.X0 > 1.25*max(xhi-c.X0, 1) {
		t.Errorf("%s: x axis %v..%v for data up to %v", title, c.X0, c.X1, xhi)
	}
	if c.Y0 > 0 && c.Y1-c.Y0 > 2*max(yhi-ylo, 1e-9) {
		t.Errorf("%s: y axis %v..%v for data %v..%v", title, c.Y0, c.Y1, ylo, yhi)
	}
}

var chartRE = regexp.MustCompile(`<h2>([^<]*)</h2><p class="note">[^<]*</p><svg class="chart" [^>]*data-chart="([^"]*)"`)

func jsonUnmarshalHTML(attr string, v any) error {
	return json.Unmarshal([]byte(html.UnescapeString(attr)), v)
}

// chartsOf returns the line charts of an HTML report by title.
func chartsOf(t *testing.T, page string) map[string]chart {
	t.Helper()
	out := map[string]chart{}
	for _, m := range chartRE.FindAllStringSubmatch(page, -1) {
		var c chart
		if err := jsonUnmarshalHTML(m[2], &c); err != nil {
			t.Fatalf("chart %q: %v", m[1], err)
		}
		out[m[1]] = c
	}
	return out
}

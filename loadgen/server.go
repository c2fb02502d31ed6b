package loadgen

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"sync"
	"time"
)

// The server under test, sampled during the run (Config.ServerMetrics and
// Config.ServerPID) so that the report shows what the load cost it next to
// what it cost loadgen. A sampler goroutine scrapes the metrics URL and
// reads /proc every ServerSampleInterval; a sample that fails is counted
// and skipped, never the end of the run. The first sample is taken before
// any proxy starts and the last once every stream has ended, so that the
// counters' differences cover the whole run.

// maxMetricsBytes bounds one metrics page (after decompression): a larger
// one is an error, not an unbounded read.
const maxMetricsBytes = 16 << 20

// The metric names read, as pilotfish and istiod name them (a _total
// suffix, as OpenMetrics adds it, is accepted on counters).
const (
	metricPushes     = "pilot_xds_pushes"
	metricRejects    = "pilot_total_xds_rejects"
	metricPushErrors = "pilot_xds_push_errors"
	metricProxies    = "pilot_xds"
	metricCPU        = "process_cpu_seconds_total"
	metricRSS        = "process_resident_memory_bytes"
	metricHeap       = "go_memstats_heap_alloc_bytes"
)

// ServerStats are what was sampled of the server under test.
type ServerStats struct {
	MetricsURL string  `json:"metrics_url,omitempty"`
	PID        int     `json:"pid,omitempty"`
	IntervalMS float64 `json:"interval_ms"` // between samples, at the end (doubles as the samples are compacted)
	// Measures names the ServerSample fields measured (cpu_seconds,
	// rss_bytes, heap_bytes, pushes, rejects, push_errors, proxies); the
	// others are 0. CPU and RSS come from /proc with a PID, else from the
	// metrics' process_cpu_seconds_total and process_resident_memory_bytes.
	Measures  []string `json:"measures"`
	Attempts  int      `json:"attempts"`
	Errors    int      `json:"errors"` // samples that failed
	LastError string   `json:"last_error,omitempty"`
	// Over the run: the last sample minus the first (counters), or the
	// maximum (RSS).
	CPUSeconds  float64 `json:"cpu_seconds"`
	MaxRSSBytes int64   `json:"max_rss_bytes"`
	Pushes      int64   `json:"pushes"`
	Rejects     int64   `json:"rejects"`
	PushErrors  int64   `json:"push_errors"`
	// Samples are the server's values as it reports them (counters since
	// it started), at most 2,000 (halved, and the interval doubled, past
	// that).
	Samples []ServerSample `json:"samples"`
}

// ServerSample is one sample of the server.
type ServerSample struct {
	AtMS       float64 `json:"t_ms"`        // from the start of the run
	CPUSeconds float64 `json:"cpu_seconds"` // CPU time used since it started
	RSSBytes   int64   `json:"rss_bytes"`
	HeapBytes  int64   `json:"heap_bytes"`  // go_memstats_heap_alloc_bytes
	Pushes     int64   `json:"pushes"`      // pilot_xds_pushes, all types
	Rejects    int64   `json:"rejects"`     // pilot_total_xds_rejects, all types
	PushErrors int64   `json:"push_errors"` // pilot_xds_push_errors, all types and reasons
	Proxies    int64   `json:"proxies"`     // pilot_xds: connected xDS clients
}

// The bits of serverSampler.measures, in ServerStats.Measures order.
const (
	hasCPU = 1 << iota
	hasRSS
	hasHeap
	hasPushes
	hasRejects
	hasPushErrors
	hasProxies
)

var measureNames = []string{"cpu_seconds", "rss_bytes", "heap_bytes", "pushes", "rejects", "push_errors", "proxies"}

// serverSampler samples the server under test.
type serverSampler struct {
	url    string
	pid    int
	client *http.Client
	start  time.Time
	log    func(msg string, args ...any)

	mu       sync.Mutex
	every    time.Duration  // guarded by mu
	samples  []ServerSample // guarded by mu
	measures int            // guarded by mu
	attempts int            // guarded by mu
	errors   int            // guarded by mu
	lastErr  string         // guarded by mu
}

func newServerSampler(cfg Config) *serverSampler {
	return &serverSampler{
		url: cfg.ServerMetrics,
		pid: cfg.ServerPID,
		// A scrape may take up to an interval (at least 2s), so that a busy
		// server is still sampled, if less often.
		client: &http.Client{Timeout: max(cfg.ServerSampleInterval, 2*time.Second)},
		every:  cfg.ServerSampleInterval,
		log:    cfg.Logger.Warn,
	}
}

// loop samples every interval until ctx ends.
func (s *serverSampler) loop(ctx context.Context) {
	s.mu.Lock()
	every := s.every
	s.mu.Unlock()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.sample(ctx)
		s.mu.Lock()
		if s.every != every {
			every = s.every
			t.Reset(every)
		}
		s.mu.Unlock()
	}
}

// sample takes one sample (the time is the middle of the reading) and
// appends it, or counts its error.
func (s *serverSampler) sample(ctx context.Context) {
	before := time.Now()
	v, has, err := s.read(ctx)
	at := before.Add(time.Since(before) / 2)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil && ctx.Err() != nil {
		return // the run is ending: not the server's failure
	}
	s.attempts++
	if err != nil {
		s.errors++
		if s.errors == 1 {
			s.log("sampling the server failed", "err", err)
		}
		s.lastErr = err.Error()
		return
	}
	v.AtMS = 0
	if !s.start.IsZero() && at.After(s.start) {
		v.AtMS = ms(at.Sub(s.start))
	}
	s.measures |= has
	s.samples = append(s.samples, v)
	if len(s.samples) > 2000 {
		kept := s.samples[:0]
		for i, x := range s.samples {
			if i%2 == 0 || i == len(s.samples)-1 {
				kept = append(kept, x)
			}
		}
		s.samples = kept
		s.every *= 2
	}
}

// setStart sets the start of the run, after the baseline sample.
func (s *serverSampler) setStart(t time.Time) {
	s.mu.Lock()
	s.start = t
	s.mu.Unlock()
}

// read reads /proc (with a PID) and the metrics (with a URL).
func (s *serverSampler) read(ctx context.Context) (v ServerSample, has int, err error) {
	if s.url != "" {
		if v, has, err = s.scrape(ctx); err != nil {
			return v, 0, err
		}
	}
	if s.pid > 0 {
		cpu, rss, err := readProc(s.pid)
		if err != nil {
			return v, 0, err
		}
		v.CPUSeconds, v.RSSBytes = cpu, rss
		has |= hasCPU | hasRSS
	}
	return v, has, nil
}

// scrape reads the metrics page.
func (s *serverSampler) scrape(ctx context.Context) (v ServerSample, has int, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
	if err != nil {
		return v, 0, fmt.Errorf("%w: %v", ErrMetrics, err)
	}
	// The classic text format, not OpenMetrics or protobuf.
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := s.client.Do(req)
	if err != nil {
		return v, 0, fmt.Errorf("%w: %v", ErrMetrics, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return v, 0, fmt.Errorf("%w: %s: %s", ErrMetrics, s.url, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxMetricsBytes+1))
	if err != nil {
		return v, 0, fmt.Errorf("%w: %s: %v", ErrMetrics, s.url, err)
	}
	if len(body) > maxMetricsBytes {
		return v, 0, fmt.Errorf("%w: %s: larger than %d MiB", ErrMetrics, s.url, maxMetricsBytes>>20)
	}
	var m promValues
	if err := parseProm(body, m.add); err != nil {
		return v, 0, fmt.Errorf("%s: %w", s.url, err)
	}
	return m.sample(), m.has, nil
}

// promValues sums the samples of the metrics read, over their labels.
type promValues struct {
	cpu, rss, heap, pushes, rejects, pushErrors, proxies float64
	has                                                  int
}

func (m *promValues) add(name []byte, v float64) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return
	}
	switch string(name) {
	case metricCPU:
		m.cpu, m.has = m.cpu+v, m.has|hasCPU
	case metricRSS:
		m.rss, m.has = m.rss+v, m.has|hasRSS
	case metricHeap:
		m.heap, m.has = m.heap+v, m.has|hasHeap
	case metricPushes, metricPushes + "_total":
		m.pushes, m.has = m.pushes+v, m.has|hasPushes
	case metricRejects, metricRejects + "_total":
		m.rejects, m.has = m.rejects+v, m.has|hasRejects
	case metricPushErrors, metricPushErrors + "_total":
		m.pushErrors, m.has = m.pushErrors+v, m.has|hasPushErrors
	case metricProxies:
		m.proxies, m.has = m.proxies+v, m.has|hasProxies
	}
}

func (m *promValues) sample() ServerSample {
	return ServerSample{
		CPUSeconds: m.cpu,
		RSSBytes:   int64(m.rss),
		HeapBytes:  int64(m.heap),
		Pushes:     int64(math.Round(m.pushes)),
		Rejects:    int64(math.Round(m.rejects)),
		PushErrors: int64(math.Round(m.pushErrors)),
		Proxies:    int64(math.Round(m.proxies)),
	}
}

// stats returns what was sampled.
func (s *serverSampler) stats() *ServerStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := &ServerStats{MetricsURL: s.url, PID: s.pid, IntervalMS: ms(s.every), Attempts: s.attempts,
		Errors: s.errors, LastError: s.lastErr, Samples: append([]ServerSample(nil), s.samples...), Measures: []string{}}
	for i, name := range measureNames {
		if s.measures&(1<<i) != 0 {
			st.Measures = append(st.Measures, name)
		}
	}
	if n := len(s.samples); n > 0 {
		first, last := s.samples[0], s.samples[n-1]
		st.CPUSeconds = math.Round((last.CPUSeconds-first.CPUSeconds)*1e3) / 1e3
		st.Pushes = last.Pushes - first.Pushes
		st.Rejects = last.Rejects - first.Rejects
		st.PushErrors = last.PushErrors - first.PushErrors
		for _, x := range s.samples {
			st.MaxRSSBytes = max(st.MaxRSSBytes, x.RSSBytes)
		}
	}
	return st
}

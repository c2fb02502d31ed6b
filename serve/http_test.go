package serve_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pilotfish-mesh/pilotfish/serve"
)

// startHTTP starts s on a free loopback port and shuts it down at the end of
// the test. It returns the base URL.
func startHTTP(t *testing.T, s *serve.HTTPServer) (string, net.Addr) {
	t.Helper()
	addr, err := s.Start()
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return "http://" + addr.String(), addr
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: reading body: %v", url, err)
	}
	return resp.StatusCode, string(body)
}

func TestHTTPReady(t *testing.T) {
	var ready atomic.Bool
	base, _ := startHTTP(t, serve.NewHTTPServer(serve.HTTPOptions{
		Addr:     "127.0.0.1:0",
		Ready:    ready.Load,
		Gatherer: prometheus.NewRegistry(),
	}))

	if code, _ := get(t, base+"/ready"); code != http.StatusServiceUnavailable {
		t.Errorf("/ready before ready: got %d, want 503", code)
	}
	ready.Store(true)
	code, body := get(t, base+"/ready")
	if code != http.StatusOK || strings.TrimSpace(body) != "ready" {
		t.Errorf("/ready after ready: got %d %q, want 200 \"ready\"", code, body)
	}
	ready.Store(false)
	if code, _ := get(t, base+"/ready"); code != http.StatusServiceUnavailable {
		t.Errorf("/ready after not ready again: got %d, want 503", code)
	}
}

func TestHTTPReadyNilMeansReady(t *testing.T) {
	base, _ := startHTTP(t, serve.NewHTTPServer(serve.HTTPOptions{Addr: "127.0.0.1:0", Gatherer: prometheus.NewRegistry()}))
	if code, _ := get(t, base+"/ready"); code != http.StatusOK {
		t.Errorf("/ready with nil Ready: got %d, want 200", code)
	}
}

func TestHTTPMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "pilotfish_test_events_total",
		Help: "Events counted by the HTTP server test.",
	})
	reg.MustRegister(c)
	c.Add(3)
	base, _ := startHTTP(t, serve.NewHTTPServer(serve.HTTPOptions{Addr: "127.0.0.1:0", Gatherer: reg}))

	code, body := get(t, base+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: got %d, want 200", code)
	}
	if !strings.Contains(body, "pilotfish_test_events_total 3") {
		t.Errorf("/metrics does not expose the test counter:\n%s", body)
	}
}

func TestHTTPEndpoints(t *testing.T) {
	s := serve.NewHTTPServer(serve.HTTPOptions{Addr: "127.0.0.1:0", Gatherer: prometheus.NewRegistry()})
	s.Handle("/debug/registryz", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "registry dump")
	}))
	s.Handle("GET /debug/configz", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "config dump")
	}))
	base, _ := startHTTP(t, s)

	tests := []struct {
		name     string
		path     string
		code     int
		contains string
	}{
		{"pprof index", "/debug/pprof/", 200, "goroutine"},
		{"pprof goroutine", "/debug/pprof/goroutine?debug=1", 200, "goroutine profile:"},
		{"pprof cmdline", "/debug/pprof/cmdline", 200, ""},
		{"pprof unknown profile", "/debug/pprof/nosuchprofile", 404, ""},
		{"registered handler", "/debug/registryz", 200, "registry dump"},
		{"registered with method", "/debug/configz", 200, "config dump"},
		{"debug index", "/debug", 200, "/debug/registryz"},
		{"debug index slash", "/debug/", 200, "/debug/pprof/"},
		{"unknown debug path", "/debug/nosuchz", 404, ""},
		{"root", "/", 404, ""},
		{"unknown", "/nosuch", 404, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := get(t, base+tt.path)
			if code != tt.code {
				t.Errorf("GET %s: got %d, want %d; body:\n%s", tt.path, code, tt.code, body)
			}
			if !strings.Contains(body, tt.contains) {
				t.Errorf("GET %s: body does not contain %q:\n%s", tt.path, tt.contains, body)
			}
		})
	}
}

func TestHTTPDebugIndex(t *testing.T) {
	s := serve.NewHTTPServer(serve.HTTPOptions{Addr: "127.0.0.1:0", Gatherer: prometheus.NewRegistry()})
	noop := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	s.Handle("/debug/syncz", noop)
	s.Handle("/debug/registryz", noop)
	s.Handle("/healthz/extra", noop) // not a debug path: not listed
	base, _ := startHTTP(t, s)

	code, body := get(t, base+"/debug")
	if code != http.StatusOK {
		t.Fatalf("/debug: got %d, want 200", code)
	}
	var paths []string
	if err := json.Unmarshal([]byte(body), &paths); err != nil {
		t.Fatalf("/debug is not a JSON list of strings: %v\n%s", err, body)
	}
	for _, want := range []string{"/debug/pprof/", "/debug/pprof/profile", "/debug/registryz", "/debug/syncz"} {
		if !slices.Contains(paths, want) {
			t.Errorf("/debug index lacks %s: %v", want, paths)
		}
	}
	if slices.Contains(paths, "/healthz/extra") {
		t.Errorf("/debug index lists a non-debug path: %v", paths)
	}
	if !slices.IsSorted(paths) {
		t.Errorf("/debug index is not sorted: %v", paths)
	}
}

func TestHTTPShutdown(t *testing.T) {
	s := serve.NewHTTPServer(serve.HTTPOptions{Addr: "127.0.0.1:0", Gatherer: prometheus.NewRegistry()})
	addr, err := s.Start()
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if code, _ := get(t, "http://"+addr.String()+"/ready"); code != http.StatusOK {
		t.Fatalf("/ready before Shutdown: got %d", code)
	}
	if _, err := s.Start(); err == nil {
		t.Errorf("second Start: got nil error")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	conn, err := net.DialTimeout("tcp", addr.String(), time.Second)
	if err == nil {
		conn.Close()
		t.Fatalf("connect to %s after Shutdown succeeded", addr)
	}
	if err := s.Shutdown(ctx); err != nil {
		t.Errorf("second Shutdown: %v", err)
	}
}

func TestHTTPShutdownBeforeStart(t *testing.T) {
	s := serve.NewHTTPServer(serve.HTTPOptions{Addr: "127.0.0.1:0"})
	if err := s.Shutdown(context.Background()); err != nil {
		t.Errorf("Shutdown before Start: %v", err)
	}
}

func TestHTTPStartListenError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	s := serve.NewHTTPServer(serve.HTTPOptions{Addr: ln.Addr().String()})
	if _, err := s.Start(); err == nil {
		t.Fatalf("Start on a taken port %s: got nil error", ln.Addr())
	}
}

// A request that outlives Shutdown's context (a long pprof profile, say) must
// not keep the server up: Shutdown closes it and reports the deadline.
func TestHTTPShutdownDeadlineClosesSlowRequests(t *testing.T) {
	s := serve.NewHTTPServer(serve.HTTPOptions{Addr: "127.0.0.1:0", Gatherer: prometheus.NewRegistry()})
	entered := make(chan struct{})
	s.Handle("/debug/slowz", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		select {
		case <-r.Context().Done():
		case <-time.After(30 * time.Second):
		}
	}))
	addr, err := s.Start()
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	go func() {
		resp, err := http.Get("http://" + addr.String() + "/debug/slowz")
		if err == nil {
			resp.Body.Close()
		}
	}()
	<-entered

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := s.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Shutdown with a request in flight: got %v, want context.DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Shutdown took %v; it should end soon after its deadline", d)
	}
	if conn, err := net.DialTimeout("tcp", addr.String(), time.Second); err == nil {
		conn.Close()
		t.Errorf("connect to %s after Shutdown succeeded", addr)
	}
}

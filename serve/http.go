package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	rpprof "runtime/pprof"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// DefaultHTTPAddr is istiod's monitoring port: metrics, /ready, /debug/...
const DefaultHTTPAddr = ":15014"

// HTTPOptions configures an HTTPServer. Zero values are usable.
type HTTPOptions struct {
	// Addr is the listen address, e.g. "127.0.0.1:15014"; "" means
	// DefaultHTTPAddr. Port 0 picks a free port (see Start).
	Addr string
	// Ready reports readiness: /ready answers 200 "ready" when it returns
	// true and 503 otherwise. Nil means ready as soon as the server serves.
	Ready func() bool
	// Gatherer is exposed on /metrics. Nil means prometheus.DefaultGatherer.
	Gatherer prometheus.Gatherer
	// Logger receives server errors. Nil discards them.
	Logger *slog.Logger
}

// HTTPServer serves pilotfish's monitoring and debug HTTP endpoints:
// /ready, /metrics, /debug (a JSON index of the debug paths), /debug/pprof/
// and the handlers registered with Handle. Anything else answers 404.
type HTTPServer struct {
	opts HTTPOptions
	log  *slog.Logger
	mux  *http.ServeMux // safe for concurrent Handle and ServeHTTP
	srv  *http.Server

	mu         sync.Mutex
	debugPaths []string      // guarded by mu; sorted
	started    bool          // guarded by mu
	done       chan struct{} // guarded by mu; closed when Serve returns
}

// NewHTTPServer returns a server configured by o. It does not listen until
// Start.
func NewHTTPServer(o HTTPOptions) *HTTPServer {
	if o.Addr == "" {
		o.Addr = DefaultHTTPAddr
	}
	if o.Gatherer == nil {
		o.Gatherer = prometheus.DefaultGatherer
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &HTTPServer{opts: o, log: log, mux: http.NewServeMux()}
	s.srv = &http.Server{
		Handler: s.mux,
		// Bound what a slow or idle client can hold: headers must arrive
		// promptly, and the endpoints take no request bodies worth waiting
		// for.
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		// No WriteTimeout: /debug/pprof/profile and /debug/pprof/trace
		// stream for as long as the caller's ?seconds= asks (30s by
		// default, often more), and pprof refuses any duration longer than
		// the server's WriteTimeout. Large /metrics or debug dumps on a big
		// mesh may also take a while to write. Slow readers are bounded by
		// TCP flow control and end at Shutdown.
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}

	s.mux.HandleFunc("/ready", s.serveReady)
	s.mux.Handle("/metrics", promhttp.HandlerFor(o.Gatherer, promhttp.HandlerOpts{
		ErrorLog:      promLogger{log},
		ErrorHandling: promhttp.ContinueOnError,
	}))
	// The index answers on both /debug and /debug/; other /debug/... paths
	// are the registered handlers'.
	s.mux.HandleFunc("/debug", s.serveDebugIndex)
	s.mux.HandleFunc("/debug/{$}", s.serveDebugIndex)
	// net/http/pprof also registers these on http.DefaultServeMux when
	// imported; that mux is never served here.
	s.Handle("/debug/pprof/", http.HandlerFunc(pprof.Index))
	s.Handle("/debug/pprof/cmdline", http.HandlerFunc(pprof.Cmdline))
	s.Handle("/debug/pprof/profile", http.HandlerFunc(pprof.Profile))
	s.Handle("/debug/pprof/symbol", http.HandlerFunc(pprof.Symbol))
	s.Handle("/debug/pprof/trace", http.HandlerFunc(pprof.Trace))
	return s
}

// Handle registers h for pattern (http.ServeMux syntax, e.g.
// "/debug/registryz" or "GET /debug/configz"). Patterns under /debug/ are
// listed by the /debug index. Call it before Start; it is safe afterwards
// too. Like http.ServeMux.Handle, it panics on a conflicting pattern.
func (s *HTTPServer) Handle(pattern string, h http.Handler) {
	s.mux.Handle(pattern, h)
	path := pattern
	if i := strings.IndexByte(path, ' '); i >= 0 {
		path = strings.TrimSpace(path[i+1:]) // drop a "METHOD " prefix
	}
	if i := strings.IndexByte(path, '/'); i > 0 {
		path = path[i:] // drop a host
	}
	if !strings.HasPrefix(path, "/debug/") {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if i, found := slices.BinarySearch(s.debugPaths, path); !found {
		s.debugPaths = slices.Insert(s.debugPaths, i, path)
	}
}

// Start listens on the configured address and serves in the background. It
// returns the bound address, so an Addr with port 0 tells the caller which
// port it got. Start may be called once.
func (s *HTTPServer) Start() (net.Addr, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return nil, errors.New("serve: HTTP server already started")
	}
	ln, err := net.Listen("tcp", s.opts.Addr)
	if err != nil {
		return nil, fmt.Errorf("serve: HTTP listen on %s: %w", s.opts.Addr, err)
	}
	s.started = true
	s.done = make(chan struct{})
	done := s.done
	go rpprof.Do(context.Background(), rpprof.Labels("goroutine", "serve-http"), func(context.Context) {
		defer close(done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("HTTP server stopped", "addr", ln.Addr().String(), "err", err)
		}
	})
	s.log.Info("HTTP server listening", "addr", ln.Addr().String())
	return ln.Addr(), nil
}

// Shutdown stops the listener and waits for in-flight requests to finish.
// When ctx ends first (a long pprof profile, say), it closes the remaining
// connections and returns ctx's error. Shutdown before Start is a no-op.
func (s *HTTPServer) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	done := s.done
	s.mu.Unlock()
	if done == nil {
		return nil
	}
	err := s.srv.Shutdown(ctx)
	if err != nil {
		_ = s.srv.Close()
	}
	<-done // Serve returns as soon as its listener is closed
	return err
}

func (s *HTTPServer) serveReady(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if s.opts.Ready != nil && !s.opts.Ready() {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, "not ready\n")
		return
	}
	_, _ = io.WriteString(w, "ready\n")
}

func (s *HTTPServer) serveDebugIndex(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	paths := slices.Clone(s.debugPaths)
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(paths)
}

// promLogger adapts slog to promhttp.Logger.
type promLogger struct{ log *slog.Logger }

func (l promLogger) Println(v ...any) {
	l.log.Error("serving /metrics", "err", strings.TrimSuffix(fmt.Sprintln(v...), "\n"))
}

package loadgen

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// Run simulates cfg.Proxies proxies against the ADS server at cfg.XDS until
// every proxy has full config and every change has converged (or
// cfg.Duration, cfg.Timeout or ctx ends the run), and reports what it
// measured. It always returns a report once the config is valid, even with
// an error: ErrIncomplete (wrapping ctx's error if ctx ended the run) when a
// proxy never reached full config or a change did not converge everywhere,
// ErrChange when a change failed.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if cfg.ServerPID > 0 {
		if _, _, err := readProc(cfg.ServerPID); err != nil {
			return nil, fmt.Errorf("%w: server pid %d: %w", ErrConfig, cfg.ServerPID, err)
		}
	}
	r := newRunner(cfg)
	return r.run(ctx)
}

// runner is the state of one Run shared by its proxies.
type runner struct {
	cfg     Config
	syms    *symtab
	dec     decoder
	targets []uint32 // GRPCTargets, interned and sorted
	start   time.Time

	types    [numTypes + 1]typeCounters
	versions [numTypes]atomic.Pointer[string] // versionString's last version per type

	launched      atomic.Int64
	connectedNow  atomic.Int64
	everConnected atomic.Int64
	fullCount     atomic.Int64
	ttfc          []atomic.Int64 // per proxy, ns from its launch to full config; 0: not yet
	lastFull      atomic.Int64   // ns from the start to the latest first full config
	allFull       chan struct{}  // closed when every proxy has had full config

	change   atomic.Pointer[changeState]
	stopping atomic.Bool  // the run is ending: streams close, errors are not counted
	handling atomic.Int64 // responses being handled (proxy.handle)

	connectErrors atomic.Int64
	streamErrors  atomic.Int64
	decodeErrors  atomic.Int64
	errMu         sync.Mutex
	lastErr       string // guarded by errMu
	lastInvalid   string // guarded by errMu

	// Written by the launcher goroutine; read by others only after
	// launchDone is closed.
	proxies    []*proxy
	conns      []*grpc.ClientConn
	launchErr  error
	launchDone chan struct{}

	// Set by the run goroutine.
	changes     []*changeState
	atFull      ProcessStats
	bytesAtFull int64
	userAtStart time.Duration
	sysAtStart  time.Duration
	end         time.Time // when measuring ended, before streams close
	userAtEnd   time.Duration
	sysAtEnd    time.Duration
	sampleEvery atomic.Int64 // ns between timeline samples; doubles as the timeline is compacted
	timelineMu  sync.Mutex
	timeline    []Sample // guarded by timelineMu

	server          *serverSampler // nil: no server to sample
	roles           []fault        // per proxy (fault.go); nil: all healthy
	nackingReceived atomic.Int64   // responses received by NACKing proxies
	faultNACKs      atomic.Int64   // NACKs sent by NACKing proxies (the rest are NackRate's)
	nackingNow      atomic.Int64   // proxies whose last response of some type was NACKed
	stalledNow      atomic.Int64   // stalled proxies not reading their stream now
}

func newRunner(cfg Config) *runner {
	r := &runner{
		cfg:        cfg,
		syms:       newSymtab(),
		ttfc:       make([]atomic.Int64, cfg.Proxies),
		allFull:    make(chan struct{}),
		proxies:    make([]*proxy, cfg.Proxies),
		launchDone: make(chan struct{}),
		roles:      faultRoles(cfg.Proxies, cfg.StalledProxies, cfg.NackingProxies),
	}
	r.dec = decoder{syms: r.syms, routeClusters: cfg.Type == GRPC, full: cfg.Decode == Full}
	for _, t := range cfg.GRPCTargets {
		r.targets = append(r.targets, r.syms.idString(t))
	}
	slices.Sort(r.targets)
	r.targets = slices.Compact(r.targets)
	return r
}

// stopGrace is how long streams may take to end after the half-close.
const stopGrace = 2 * time.Second

// changeState tracks one change while proxies converge on it.
type changeState struct {
	index    int
	start    time.Time
	expect   *expectation // nil: a version bump
	expectID uint32
	base     []uint32       // per proxy bumps at the start (no expectation)
	conv     []atomic.Int64 // per proxy, ns from start to convergence; 0: not yet
	count    atomic.Int64
	n        int64
	done     chan struct{}

	end                   time.Time
	err                   error
	respStart, bytesStart int64
	respEnd, bytesEnd     int64
	nackingStart          int64 // nackingReceived at the start and end
	nackingEnd            int64
}

func (c *changeState) record(idx int, now time.Time) {
	d := max(now.Sub(c.start), 1)
	c.conv[idx].Store(int64(d))
	if c.count.Add(1) == c.n {
		close(c.done)
	}
}

func (r *runner) run(parent context.Context) (*Report, error) {
	if cfg := r.cfg; cfg.ServerMetrics != "" || cfg.ServerPID > 0 {
		// The baseline, before any proxy starts.
		r.server = newServerSampler(cfg)
		r.server.sample(parent)
	}
	r.start = time.Now()
	if r.server != nil {
		r.server.setStart(r.start)
	}
	r.userAtStart, r.sysAtStart = cpuTimes()
	cfg := r.cfg

	// stop ends the waiting: the caller, Duration or Timeout.
	stop, cancelStop := parent, context.CancelFunc(func() {})
	if limit := minPositive(cfg.Duration, cfg.Timeout); limit > 0 {
		stop, cancelStop = context.WithTimeout(parent, limit)
	}
	defer cancelStop()
	proxyCtx, stopProxies := context.WithCancel(context.WithoutCancel(parent))
	defer stopProxies()
	launchCtx, stopLaunch := context.WithCancel(proxyCtx)
	defer stopLaunch()

	var wg sync.WaitGroup
	go r.launch(launchCtx, proxyCtx, &wg)
	samplerCtx, stopSampler := context.WithCancel(context.Background())
	samplerDone := make(chan struct{})
	go func() {
		defer close(samplerDone)
		pprof.Do(samplerCtx, pprof.Labels("loadgen", "sampler"), r.sample)
	}()
	serverDone := make(chan struct{})
	go func() {
		defer close(serverDone)
		if r.server != nil {
			pprof.Do(samplerCtx, pprof.Labels("loadgen", "server-sampler"), r.server.loop)
		}
	}()

	var changeErr error
	allFull := r.wait(stop, r.allFull, nil)
	if allFull {
		r.atFullConfig()
		if !r.wait(stop, r.launchDone, nil) {
			allFull = false
		}
	}
	for i := 1; allFull && i <= cfg.Changes; i++ {
		if !r.sleep(stop, cfg.ChangeInterval) {
			break
		}
		ch := r.makeChange(stop, i)
		r.changes = append(r.changes, ch)
		if ch.err != nil {
			changeErr = ch.err
			cfg.Logger.Warn("change failed", "change", i, "err", ch.err)
			break
		}
	}
	if cfg.Duration > 0 {
		<-stop.Done()
	}
	stopSampler()
	<-samplerDone
	<-serverDone
	// Measuring ends: responses from now on are not counted (handle), so
	// that the last sample agrees with the report.
	r.stopping.Store(true)
	r.waitHandled(time.Second)
	r.addSample() // the last one before streams close
	r.progress(true)
	r.end = time.Now()
	r.userAtEnd, r.sysAtEnd = cpuTimes()

	// Stop: half-close every stream so the server receives every request
	// sent and ends the stream; cut what remains after a grace period.
	stopLaunch()
	<-r.launchDone
	for _, p := range r.proxies {
		if p != nil {
			p.closeSend()
		}
	}
	proxiesDone := make(chan struct{})
	go func() { wg.Wait(); close(proxiesDone) }()
	select {
	case <-proxiesDone:
	case <-time.After(stopGrace):
	}
	stopProxies()
	select {
	case <-proxiesDone:
	case <-time.After(10 * time.Second):
		cfg.Logger.Warn("proxies did not stop within 10s")
	}
	for _, c := range r.conns {
		c.Close()
	}
	if r.server != nil {
		// The last sample, once the server has read every request (the
		// streams have ended): its counters cover the whole run.
		r.server.sample(context.WithoutCancel(parent))
	}

	rep := r.report()
	switch {
	case r.launchErr != nil:
		return rep, r.launchErr
	case changeErr != nil:
		return rep, changeErr
	case !rep.Complete && parent.Err() != nil:
		return rep, fmt.Errorf("%w: %w", ErrIncomplete, parent.Err())
	case !rep.Complete:
		return rep, fmt.Errorf("%w: %d of %d proxies reached full config%s", ErrIncomplete,
			rep.FullConfig, rep.Proxies, changeSummary(rep))
	}
	return rep, nil
}

func minPositive(a, b time.Duration) time.Duration {
	switch {
	case a <= 0:
		return b
	case b <= 0:
		return a
	}
	return min(a, b)
}

// wait waits for ch to close; false if stop ends first or timeout fires.
func (r *runner) wait(stop context.Context, ch <-chan struct{}, timeout <-chan time.Time) bool {
	select {
	case <-ch:
		return true
	case <-stop.Done():
		return false
	case <-timeout:
		return false
	}
}

func (r *runner) sleep(stop context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-stop.Done():
		return false
	}
}

// envoyWindow is Envoy's default HTTP/2 stream and connection window.
const envoyWindow = 256 << 20

// launch starts the proxies, at cfg.Ramp per second, and the connections
// they share (StreamsPerConn proxies per connection).
func (r *runner) launch(ctx, proxyCtx context.Context, wg *sync.WaitGroup) {
	defer close(r.launchDone)
	cfg := r.cfg
	target := cfg.XDS
	if !strings.Contains(target, ":///") {
		target = "passthrough:///" + target
	}
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(math.MaxInt32)),
		grpc.WithSharedWriteBuffer(true),
		// Envoy's HTTP/2 flow-control windows (initial_stream_window_size
		// and initial_connection_window_size default to 256 MiB), not
		// grpc-go's 64 KiB: with those a 400 KiB route config takes
		// several window updates, a round trip each, and the simulated
		// proxies would measure grpc-go's flow control, not the server.
		grpc.WithInitialWindowSize(envoyWindow),
		grpc.WithInitialConnWindowSize(envoyWindow),
	}
	if cfg.Dialer != nil {
		opts = append(opts, grpc.WithContextDialer(cfg.Dialer))
	}
	opts = append(opts, cfg.DialOptions...)

	var conn *grpc.ClientConn
	for i := range cfg.Proxies {
		if cfg.Ramp > 0 {
			due := r.start.Add(time.Duration(float64(i) / cfg.Ramp * float64(time.Second)))
			if d := time.Until(due); d > 0 && !r.sleep(ctx, d) {
				return
			}
		}
		if ctx.Err() != nil {
			return
		}
		if i%cfg.StreamsPerConn == 0 && cfg.Transport == TransportGRPC { // h2c dials per stream
			var err error
			conn, err = grpc.NewClient(target, opts...)
			if err != nil {
				r.launchErr = fmt.Errorf("%w: xDS address %q: %v", ErrConfig, cfg.XDS, err)
				return
			}
			r.conns = append(r.conns, conn)
		}
		p := &proxy{run: r, idx: i, start: time.Now(), rng: *rand.NewPCG(cfg.Seed, uint64(i))}
		r.proxies[i] = p
		r.launched.Add(1)
		wg.Add(1)
		go func(conn *grpc.ClientConn) {
			defer wg.Done()
			pprof.Do(proxyCtx, pprof.Labels("loadgen", "proxy"), func(ctx context.Context) { p.loop(ctx, conn) })
		}(conn)
	}
}

// loop runs sessions until ctx ends, reconnecting with jittered backoff.
func (p *proxy) loop(ctx context.Context, conn *grpc.ClientConn) {
	backoff := 100 * time.Millisecond
	for {
		err := p.session(ctx, conn)
		if ctx.Err() != nil || p.run.stopping.Load() {
			return
		}
		p.run.noteError(&p.run.lastErr, err.Error())
		p.run.cfg.Logger.Debug("stream ended", "proxy", p.idx, "err", err)
		sleep := time.Duration(float64(backoff) * (0.5 + p.float()))
		t := time.NewTimer(sleep)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// connected tracks open streams.
func (r *runner) connected(p *proxy, delta int64) {
	r.connectedNow.Add(delta)
	if delta > 0 && !p.connectedOnce {
		p.connectedOnce = true
		r.everConnected.Add(1)
	}
}

func (r *runner) recordFull(p *proxy, now time.Time) {
	r.ttfc[p.idx].Store(int64(max(now.Sub(p.start), 1)))
	r.lastFull.Store(int64(now.Sub(r.start)))
	if r.fullCount.Add(1) == int64(r.cfg.expectFull()) {
		close(r.allFull)
	}
}

func (r *runner) noteError(field *string, msg string) {
	r.errMu.Lock()
	*field = msg
	r.errMu.Unlock()
}

// atFullConfig records the process's state once every proxy has full
// config: after two GCs (the second empties sync.Pools' victim caches of
// receive buffers) that return free memory to the OS, so that RSS and heap
// are what the proxies keep, not the garbage of their first pushes.
func (r *runner) atFullConfig() {
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	r.atFull = ProcessStats{
		RSSAtFullConfigBytes:   currentRSS(),
		HeapAtFullConfigBytes:  int64(ms.HeapAlloc),
		GoroutinesAtFullConfig: runtime.NumGoroutine(),
	}
	r.bytesAtFull = r.totalBytes()
	r.addSample()
}

func (r *runner) totals() (responses, bytes int64) {
	for t := range r.types {
		responses += r.types[t].responses.Load()
		bytes += r.types[t].bytes.Load()
	}
	return responses, bytes
}

func (r *runner) totalBytes() int64 {
	_, b := r.totals()
	return b
}

// makeChange makes change i and waits for it to converge on every proxy (or
// ChangeTimeout, or stop).
func (r *runner) makeChange(stop context.Context, i int) *changeState {
	cfg := r.cfg
	n := cfg.Proxies
	ch := &changeState{index: i, conv: make([]atomic.Int64, n), n: int64(cfg.healthyProxies()), done: make(chan struct{})}
	if cfg.ExpectResource != "" {
		e, _ := parseExpect(cfg.ExpectResource, i) // checked by withDefaults
		ch.expect, ch.expectID = &e, r.syms.idString(e.name)
	} else {
		ch.base = make([]uint32, n)
		for j, p := range r.proxies {
			ch.base[j] = p.bumps.Load()
		}
	}
	ch.respStart, ch.bytesStart = r.totals()
	ch.nackingStart = r.nackingReceived.Load()
	ch.start = time.Now()
	r.change.Store(ch)

	if err := r.runChange(stop, i); err != nil {
		ch.err = err
	} else {
		timeout := time.NewTimer(cfg.ChangeTimeout - time.Since(ch.start))
		r.wait(stop, ch.done, timeout.C)
		timeout.Stop()
	}
	ch.end = time.Now()
	ch.respEnd, ch.bytesEnd = r.totals()
	ch.nackingEnd = r.nackingReceived.Load()
	return ch
}

// runChange runs ChangeFunc or ChangeCmd for change i.
func (r *runner) runChange(ctx context.Context, i int) error {
	if r.cfg.ChangeFunc != nil {
		if err := r.cfg.ChangeFunc(ctx); err != nil {
			return fmt.Errorf("%w: change %d: %w", ErrChange, i, err)
		}
		return nil
	}
	line := strings.ReplaceAll(r.cfg.ChangeCmd, "{i}", strconv.Itoa(i))
	cmd := exec.CommandContext(ctx, "sh", "-c", line)
	cmd.Env = append(os.Environ(), "LOADGEN_CHANGE="+strconv.Itoa(i))
	out, err := cmd.CombinedOutput()
	if err != nil {
		msg := strings.TrimSpace(string(out))
		if len(msg) > 500 {
			msg = msg[:500] + "..."
		}
		return fmt.Errorf("%w: change %d: %q: %w: %s", ErrChange, i, line, err, msg)
	}
	return nil
}

// waitHandled waits, at most max, for the responses being handled when
// stopping was set to finish (their ACK or NACK sent and counted).
func (r *runner) waitHandled(max time.Duration) {
	deadline := time.Now().Add(max)
	for r.handling.Load() > 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
}

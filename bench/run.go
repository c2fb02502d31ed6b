package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/pilotfish-mesh/pilotfish/loadgen"
)

// The scenarios. Each runs against every server in one process run.
const (
	// ScenarioConnect: N proxies connect at once; time until every one has
	// full config, per-proxy time to full config, server CPU and allocations
	// per proxy.
	ScenarioConnect = "connect"
	// ScenarioChange: a service is added (pilotfish: a ServiceEntry through
	// its config input; baselines: the CDS, EDS and RDS changes pilotfish's
	// output shows, published as a control plane would); convergence on
	// every proxy.
	ScenarioChange = "change"
	// ScenarioChurn: endpoint changes at a steady pace for a while;
	// convergence of each on every proxy.
	ScenarioChurn = "churn"
	// ScenarioReconnect: every connection is cut at once; time until every
	// proxy has full config again.
	ScenarioReconnect = "reconnect"
	// ScenarioMemory: the server's live heap (and stacks, RSS) per idle
	// connected proxy.
	ScenarioMemory = "memory"
)

// Scenarios lists every scenario.
var Scenarios = []string{ScenarioConnect, ScenarioChange, ScenarioChurn, ScenarioReconnect, ScenarioMemory}

// Options configure a Run. Zero values take the defaults in brackets.
type Options struct {
	// Workload is an istiobench workload name or a directory of manifests
	// ["http"].
	Workload string
	// Services sizes an istiobench workload [100].
	Services int
	// Proxies is the number of simulated sidecars [200].
	Proxies int
	// Scenarios to run [all].
	Scenarios []string
	// Servers to run them against [pilotfish, snapshot, linear]; floor
	// only when listed.
	Servers []string
	// Mode is the xDS variant every simulated proxy speaks, with every
	// server: loadgen.SotW [default] or loadgen.Delta.
	Mode loadgen.Mode
	// Transport is the simulated proxies' client transport
	// (loadgen.TransportGRPC, the default, or loadgen.TransportH2C).
	Transport string
	// Changes is the number of services added, one after the other, in the
	// change scenario [3].
	Changes int
	// ChurnRate is the pace of endpoint changes per second [10]; each is
	// made 1/ChurnRate after the previous one converged everywhere.
	ChurnRate float64
	// ChurnDuration is how long the churn lasts at that pace [3s].
	ChurnDuration time.Duration
	// ChurnTargets is how many services' endpoints churn, round robin [8].
	ChurnTargets int
	// Settle is the pause between full config and the first change [500ms].
	Settle time.Duration
	// Debounce is pilotfish's engine debounce [1ms]. The baselines publish
	// without one, so the default measures the push machinery; istiod's
	// default is 100ms.
	Debounce time.Duration
	// Timeout bounds each loadgen run [10m]; ChangeTimeout each change [2m].
	Timeout       time.Duration
	ChangeTimeout time.Duration
	// Client is where loadgen runs [this process].
	Client Client
	// Progress receives a line per step (nil: none); ClientProgress adds
	// loadgen's own progress lines.
	Progress       io.Writer
	ClientProgress bool
	// VerifyCache turns pilotfish's cache verification on (tests).
	VerifyCache bool
	// ProfileDir, when set, receives CPU profiles of this process per server
	// and scenario (SERVER-SCENARIO.cpu.pprof: with the client in a child
	// process, the server's work alone) and a heap profile of each server
	// with every proxy idle (SERVER-idle.heap.pprof).
	ProfileDir string
}

func (o Options) withDefaults() (Options, error) {
	if o.Workload == "" {
		o.Workload = "http"
	}
	if o.Services == 0 {
		o.Services = 100
	}
	if o.Proxies == 0 {
		o.Proxies = 200
	}
	if len(o.Scenarios) == 0 {
		o.Scenarios = Scenarios
	}
	for _, s := range o.Scenarios {
		if !slices.Contains(Scenarios, s) {
			return o, fmt.Errorf("bench: unknown scenario %q (want %s)", s, strings.Join(Scenarios, ", "))
		}
	}
	if len(o.Servers) == 0 {
		o.Servers = Servers
	}
	for _, s := range o.Servers {
		if !slices.Contains(KnownServers, s) {
			return o, fmt.Errorf("bench: unknown server %q (want %s)", s, strings.Join(KnownServers, ", "))
		}
	}
	if o.Changes == 0 {
		o.Changes = 3
	}
	if o.ChurnRate == 0 {
		o.ChurnRate = 10
	}
	if o.ChurnDuration == 0 {
		o.ChurnDuration = 3 * time.Second
	}
	if o.ChurnTargets == 0 {
		o.ChurnTargets = 8
	}
	if o.Settle == 0 {
		o.Settle = 500 * time.Millisecond
	}
	if o.Debounce == 0 {
		o.Debounce = time.Millisecond
	}
	if o.Timeout == 0 {
		o.Timeout = 10 * time.Minute
	}
	if o.ChangeTimeout == 0 {
		o.ChangeTimeout = 2 * time.Minute
	}
	if o.Proxies < 0 || o.Services < 0 || o.Changes < 0 || o.ChurnRate < 0 || o.ChurnDuration < 0 {
		return o, errors.New("bench: sizes, rates and durations must not be negative")
	}
	return o, nil
}

func (o Options) wants(s string) bool { return slices.Contains(o.Scenarios, s) }

func (o Options) churnChanges() int {
	if !o.wants(ScenarioChurn) {
		return 0
	}
	return max(1, int(math.Round(o.ChurnRate*o.ChurnDuration.Seconds())))
}

// Result is what a Run measured. Its JSON form is `pilotfish bench --json`.
type Result struct {
	Workload   string   `json:"workload"`
	Services   int      `json:"services,omitempty"`
	Proxies    int      `json:"proxies"`
	Scenarios  []string `json:"scenarios"`
	FullConfig Counts   `json:"full_config"` // per proxy, before any change
	// ClientInProcess: loadgen ran in the servers' process, so CPU, heap
	// and RSS figures include the clients'.
	ClientInProcess bool            `json:"client_in_process"`
	DebounceMS      float64         `json:"debounce_ms"`
	Mode            string          `json:"mode"`                // sotw or delta
	Transport       string          `json:"transport,omitempty"` // the clients' transport: grpc or h2c
	GOMAXPROCS      int             `json:"gomaxprocs"`
	NumCPU          int             `json:"num_cpu"`
	LoadBefore      string          `json:"load_before,omitempty"` // /proc/loadavg
	LoadAfter       string          `json:"load_after,omitempty"`
	StartedAt       time.Time       `json:"started_at"`
	ElapsedMS       float64         `json:"elapsed_ms"`
	Servers         []*ServerResult `json:"servers"`
	Ratios          []Ratio         `json:"ratios"`
}

// ServerResult is one server's measurements; a scenario not run is nil.
type ServerResult struct {
	Server    string             `json:"server"`
	Connect   *ConnectResult     `json:"connect,omitempty"`
	Change    *ConvergenceResult `json:"change,omitempty"`
	Churn     *ConvergenceResult `json:"churn,omitempty"`
	Reconnect *ConvergenceResult `json:"reconnect,omitempty"`
	Memory    *MemoryResult      `json:"memory,omitempty"`
	Errors    []string           `json:"errors,omitempty"`
}

// ConnectResult measures N proxies connecting at once.
type ConnectResult struct {
	AllFullConfigMS  float64 `json:"all_full_config_ms"`
	TimeToFullConfig Latency `json:"time_to_full_config"`
	// Server CPU time and heap allocations from the start until every
	// proxy had full config (plus the settle pause), per proxy.
	CPUPerProxyMS  float64 `json:"cpu_per_proxy_ms"`
	AllocsPerProxy float64 `json:"allocs_per_proxy"`
	// BytesPerProxy is what each proxy received until all had full config.
	BytesPerProxy float64 `json:"bytes_per_proxy"`
}

// ConvergenceResult measures changes (or a reconnect storm) reaching every
// proxy.
type ConvergenceResult struct {
	Changes int `json:"changes"`
	// Convergence pools every change's per-proxy convergence, from the
	// moment the change began until the proxy ACKed it with full config.
	Convergence Latency `json:"convergence"`
	// Per change and proxy: server CPU and allocations from the change
	// until the next one began (only changes followed by another), and
	// bytes received.
	CPUPerProxyMS  float64 `json:"cpu_per_proxy_ms,omitempty"`
	AllocsPerProxy float64 `json:"allocs_per_proxy,omitempty"`
	BytesPerProxy  float64 `json:"bytes_per_proxy"`
	// RatePerSecond is the pace achieved (churn).
	RatePerSecond float64 `json:"rate_per_second,omitempty"`
}

// MemoryResult is the server's memory per idle connected proxy: the
// difference between the process with the server holding its config and no
// proxy, and with every proxy connected and idle, after a GC, over the
// number of proxies. All servers share this process (only one has proxies
// at a time), so these are deltas around each server's connected period:
// runtime.ReadMemStats, and RSS after returning free pages to the OS.
type MemoryResult struct {
	HeapPerProxy       float64 `json:"heap_per_proxy"`
	StackPerProxy      float64 `json:"stack_per_proxy"`
	RSSPerProxy        float64 `json:"rss_per_proxy,omitempty"`
	GoroutinesPerProxy float64 `json:"goroutines_per_proxy"`
	// ConfigHeap is the live heap the server holds for the config with no
	// proxy connected. The baselines' resources were decoded before they
	// started, so theirs excludes the protos.
	ConfigHeap float64 `json:"config_heap"`
}

// Latency summarises a distribution in milliseconds.
type Latency struct {
	Count  int     `json:"count"`
	MeanMS float64 `json:"mean_ms"`
	P50MS  float64 `json:"p50_ms"`
	P99MS  float64 `json:"p99_ms"`
	MaxMS  float64 `json:"max_ms"`
}

func latencyOf(l loadgen.Latency) Latency {
	return Latency{Count: l.Count, MeanMS: l.MeanMS, P50MS: l.P50MS, P99MS: l.P99MS, MaxMS: l.MaxMS}
}

// pool merges the convergence of several changes, each shifted back by its
// offset (the time between loadgen starting it and the change beginning).
// One change is exact; several are pooled from each one's 101-point CDF
// (every change has one sample per proxy, so the points weigh the same).
func pool(changes []loadgen.ChangeStats, offsets []time.Duration) Latency {
	off := func(i int) float64 {
		if i < len(offsets) {
			return float64(offsets[i]) / float64(time.Millisecond)
		}
		return 0
	}
	sub := func(v, o float64) float64 { return max(v-o, 0) }
	if len(changes) == 1 {
		c, o := changes[0].Convergence, off(0)
		return Latency{Count: c.Count, MeanMS: sub(c.MeanMS, o), P50MS: sub(c.P50MS, o), P99MS: sub(c.P99MS, o), MaxMS: sub(c.MaxMS, o)}
	}
	var out Latency
	var points []float64
	var sum float64
	for i, ch := range changes {
		c, o := ch.Convergence, off(i)
		if c.Count == 0 {
			continue
		}
		out.Count += c.Count
		sum += sub(c.MeanMS, o) * float64(c.Count)
		out.MaxMS = max(out.MaxMS, sub(c.MaxMS, o))
		for _, p := range c.CDFMS {
			points = append(points, sub(p, o))
		}
	}
	if out.Count == 0 {
		return out
	}
	out.MeanMS = sum / float64(out.Count)
	slices.Sort(points)
	out.P50MS = percentile(points, 50)
	out.P99MS = percentile(points, 99)
	return out
}

// percentile returns the p-th percentile of sorted (nearest rank).
func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// Run runs the scenarios against each server in turn and returns what they
// measured. It returns an error, with the result so far, when a server
// could not run a scenario to completion (every proxy at full config with
// the expected resources, every change converged everywhere).
func Run(ctx context.Context, o Options) (*Result, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	if o.ProfileDir != "" {
		if err := os.MkdirAll(o.ProfileDir, 0o755); err != nil {
			return nil, fmt.Errorf("profile directory: %w", err)
		}
	}
	start := time.Now()
	res := &Result{
		Proxies: o.Proxies, Scenarios: o.Scenarios, ClientInProcess: o.Client.inProcess(),
		DebounceMS: float64(o.Debounce) / float64(time.Millisecond),
		Mode:       string(cmp.Or(o.Mode, loadgen.SotW)),
		Transport:  cmp.Or(o.Transport, loadgen.TransportGRPC),
		GOMAXPROCS: runtime.GOMAXPROCS(0), NumCPU: runtime.NumCPU(),
		LoadBefore: loadAverage(), StartedAt: start,
	}
	wl, err := LoadWorkload(o.Workload, o.Services)
	if err != nil {
		return nil, err
	}
	res.Workload, res.Services = wl.Name, wl.Services
	o.progressf("bench: %s, %d proxies: computing the plan (%d config changes, %d endpoint changes)",
		wl, o.Proxies, o.changeCount(), o.churnChanges())
	p, err := newPlan(wl, planOptions{changes: o.changeCount(), churn: o.churnChanges(), churnTargets: o.ChurnTargets})
	if err != nil {
		return nil, err
	}
	res.FullConfig = p.counts
	errs := runServers(ctx, o, p, res)
	res.Ratios = ratios(res)
	res.LoadAfter = loadAverage()
	res.ElapsedMS = ms(time.Since(start))
	return res, errors.Join(errs...)
}

// runServers starts every server (each with its config, no proxy), then
// runs each scenario against all of them back to back, so that a metric's
// values for the servers are measured minutes apart at most on a machine
// whose load drifts. The order rotates from one scenario to the next, so no
// server always goes first.
func runServers(ctx context.Context, o Options, p *plan, res *Result) []error {
	var errs []error
	var runs []*serverRun
	for _, kind := range o.Servers {
		sr := &ServerResult{Server: kind}
		res.Servers = append(res.Servers, sr)
		before := settledSample()
		srv, err := startServer(kind, p, serverOptions{debounce: o.Debounce, verifyCache: o.VerifyCache})
		if err != nil {
			sr.Errors = append(sr.Errors, err.Error())
			errs = append(errs, fmt.Errorf("%s: %w", kind, err))
			continue
		}
		defer srv.stop()
		loaded := settledSample()
		runs = append(runs, &serverRun{o: o, p: p, kind: kind, srv: srv, sr: sr,
			configHeap: float64(loaded.heap) - float64(before.heap)})
	}
	// quiesce waits (up to 10s) until no server has a connection left from
	// the previous run, so that a memory baseline holds none of its state.
	quiesce := func() {
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			open := 0
			for _, r := range runs {
				open += r.srv.open()
			}
			if open == 0 {
				return
			}
		}
	}
	for _, r := range runs {
		r.quiesce = quiesce
	}
	scenarios := []struct {
		want bool
		run  func(*serverRun, context.Context) error
	}{
		{o.wants(ScenarioConnect) || o.wants(ScenarioReconnect) || o.wants(ScenarioMemory), (*serverRun).connect},
		{o.wants(ScenarioChange), (*serverRun).change},
		{o.wants(ScenarioChurn), (*serverRun).churn},
	}
	k := 0
	for _, sc := range scenarios {
		if !sc.want {
			continue
		}
		for i := range runs {
			r := runs[(i+k)%len(runs)]
			if ctx.Err() != nil {
				return append(errs, ctx.Err())
			}
			if err := sc.run(r, ctx); err != nil {
				r.sr.Errors = append(r.sr.Errors, err.Error())
				errs = append(errs, fmt.Errorf("%s: %w", r.kind, err))
			}
		}
		k++
	}
	return errs
}

func (o Options) changeCount() int {
	if !o.wants(ScenarioChange) {
		return 0
	}
	return o.Changes
}

func (o Options) progressf(format string, args ...any) {
	if o.Progress != nil {
		fmt.Fprintf(o.Progress, format+"\n", args...)
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// serverRun is the state of one server's scenarios.
type serverRun struct {
	o             Options
	p             *plan
	kind          string
	srv           server
	sr            *ServerResult
	configHeap    float64  // live heap the server added with its config
	quiesce       func()   // waits for every server's connections to close
	configChanges int      // config changes applied so far
	profile       *os.File // the CPU profile running, if any
}

func (r *serverRun) config(changes int, interval time.Duration, expect string) runConfig {
	return runConfig{
		XDS: r.srv.addr(), Proxies: r.o.Proxies, Changes: changes,
		ChangeInterval: interval, ChangeTimeout: r.o.ChangeTimeout, Timeout: r.o.Timeout,
		Expect: expect, Progress: r.o.ClientProgress, Mode: string(r.o.Mode), Transport: r.o.Transport,
	}
}

// connect runs the connect scenario and, on the same connected proxies,
// the memory measurement and the reconnect storm: loadgen's one change cuts
// every connection.
func (r *serverRun) connect(ctx context.Context) error {
	n := r.o.Proxies
	storm := r.o.wants(ScenarioReconnect) || r.o.wants(ScenarioMemory)
	changes := 0
	if storm {
		changes = 1
	}
	r.o.progressf("bench: %s: %d proxies connect", r.kind, n)
	r.quiesce()
	loaded := settledSample() // the server with its config and no proxy
	start := sample()
	var atFull, idle procSample
	var dropped int
	r.startCPUProfile("connect")
	rep, offsets, err := r.run(ctx, r.config(changes, r.o.Settle, ""), func(int, time.Time) (time.Time, error) {
		atFull = sample()
		r.stopCPUProfile()
		if r.o.wants(ScenarioMemory) {
			idle = settledSample()
			r.heapProfile()
		}
		r.startCPUProfile("reconnect")
		began := time.Now()
		dropped = r.srv.dropAll()
		return began, nil
	})
	if !storm {
		atFull = sample()
	}
	if rep != nil && rep.AllFullConfigMS > 0 {
		r.sr.Connect = &ConnectResult{
			AllFullConfigMS:  rep.AllFullConfigMS,
			TimeToFullConfig: latencyOf(rep.TimeToFullConfig),
			CPUPerProxyMS:    ms(atFull.cpu-start.cpu) / float64(n),
			AllocsPerProxy:   perProxy(start.mallocs, atFull.mallocs, n),
			BytesPerProxy:    float64(rep.BytesToFullConfig) / float64(n),
		}
	}
	if r.o.wants(ScenarioMemory) && !idle.at.IsZero() {
		r.sr.Memory = &MemoryResult{
			HeapPerProxy:       perProxy(loaded.heap, idle.heap, n),
			StackPerProxy:      perProxy(loaded.stack, idle.stack, n),
			GoroutinesPerProxy: float64(idle.goroutines-loaded.goroutines) / float64(n),
			ConfigHeap:         r.configHeap,
		}
		if idle.rss > 0 {
			r.sr.Memory.RSSPerProxy = float64(idle.rss-loaded.rss) / float64(n)
		}
	}
	if storm && rep != nil && len(rep.Changes) > 0 {
		r.sr.Reconnect = &ConvergenceResult{
			Changes:       1,
			Convergence:   pool(rep.Changes, offsets),
			BytesPerProxy: float64(rep.Changes[0].Bytes) / float64(n),
		}
	}
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	if storm && dropped < n {
		return fmt.Errorf("reconnect: cut %d connections, want %d", dropped, n)
	}
	return r.check("connect", rep, r.p.countsAfter(r.configChanges))
}

// change runs the config change scenario.
func (r *serverRun) change(ctx context.Context) error {
	n := r.o.Proxies
	r.o.progressf("bench: %s: %d services added, one by one, to %d proxies", r.kind, len(r.p.changes), n)
	w := windows{}
	rep, offsets, err := r.run(ctx, r.config(len(r.p.changes), r.o.Settle, addedExpect), func(i int, _ time.Time) (time.Time, error) {
		if i == 1 {
			r.startCPUProfile("change")
		}
		began := w.next()
		if i > len(r.p.changes) {
			return began, fmt.Errorf("change %d: the plan has %d", i, len(r.p.changes))
		}
		r.configChanges = i
		return began, r.srv.apply(ctx, &r.p.changes[i-1])
	})
	if rep != nil && len(rep.Changes) > 0 {
		r.sr.Change = w.result(rep, offsets, n)
	}
	if err != nil {
		return fmt.Errorf("change: %w", err)
	}
	return r.check("change", rep, r.p.countsAfter(r.configChanges))
}

// churn runs the endpoint churn scenario.
func (r *serverRun) churn(ctx context.Context) error {
	n := r.o.Proxies
	interval := time.Duration(float64(time.Second) / r.o.ChurnRate)
	r.o.progressf("bench: %s: %d endpoint changes, %s apart, to %d proxies", r.kind, len(r.p.churn), interval, n)
	w := windows{}
	rep, offsets, err := r.run(ctx, r.config(len(r.p.churn), interval, ""), func(i int, _ time.Time) (time.Time, error) {
		if i == 1 {
			r.startCPUProfile("churn")
		}
		began := w.next()
		if i > len(r.p.churn) {
			return began, fmt.Errorf("endpoint change %d: the plan has %d", i, len(r.p.churn))
		}
		return began, r.srv.apply(ctx, &r.p.churn[i-1])
	})
	if rep != nil && len(rep.Changes) > 0 {
		cr := w.result(rep, offsets, n)
		if k := len(rep.Changes); k > 1 {
			first, last := rep.Changes[0], rep.Changes[k-1]
			if span := last.AtMS + last.Convergence.MaxMS - first.AtMS; span > 0 {
				cr.RatePerSecond = float64(k) / (span / 1000)
			}
		}
		r.sr.Churn = cr
	}
	if err != nil {
		return fmt.Errorf("churn: %w", err)
	}
	return r.check("churn", rep, r.p.countsAfter(r.configChanges))
}

// run runs loadgen once; a CPU profile left running (ProfileDir) stops
// with it.
func (r *serverRun) run(ctx context.Context, rc runConfig, fn changeFunc) (*loadgen.Report, []time.Duration, error) {
	defer r.stopCPUProfile()
	return r.o.Client.run(ctx, rc, r.o.Progress, fn)
}

// startCPUProfile starts a CPU profile named SERVER-NAME with ProfileDir.
// The profiles cover the measured part of each scenario: the connect storm
// until full config, the reconnect storm, the changes (not the connect
// before them).
func (r *serverRun) startCPUProfile(name string) {
	r.stopCPUProfile()
	if r.o.ProfileDir == "" {
		return
	}
	f, err := os.Create(filepath.Join(r.o.ProfileDir, r.kind+"-"+name+".cpu.pprof"))
	if err == nil {
		if err = pprof.StartCPUProfile(f); err != nil {
			f.Close()
		}
	}
	if err != nil {
		r.sr.Errors = append(r.sr.Errors, err.Error())
		return
	}
	r.profile = f
}

func (r *serverRun) stopCPUProfile() {
	if r.profile != nil {
		pprof.StopCPUProfile()
		r.profile.Close()
		r.profile = nil
	}
}

// heapProfile writes the server's heap profile with ProfileDir.
func (r *serverRun) heapProfile() {
	if r.o.ProfileDir == "" {
		return
	}
	f, err := os.Create(filepath.Join(r.o.ProfileDir, r.kind+"-idle.heap.pprof"))
	if err != nil {
		r.sr.Errors = append(r.sr.Errors, err.Error())
		return
	}
	defer f.Close()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		r.sr.Errors = append(r.sr.Errors, err.Error())
	}
}

// windows measures the server's CPU and allocations between the start of
// one change and the start of the next.
type windows struct {
	starts []procSample
	cpu    time.Duration
	allocs uint64
	closed int
}

// next closes the current window (if any) and opens one for the change
// about to begin, returning when it began.
func (w *windows) next() time.Time {
	s := sample()
	if k := len(w.starts); k > 0 {
		w.cpu += s.cpu - w.starts[k-1].cpu
		w.allocs += s.mallocs - w.starts[k-1].mallocs
		w.closed++
	}
	w.starts = append(w.starts, s)
	return s.at
}

func (w *windows) result(rep *loadgen.Report, offsets []time.Duration, n int) *ConvergenceResult {
	cr := &ConvergenceResult{Changes: len(rep.Changes), Convergence: pool(rep.Changes, offsets)}
	var bytes int64
	for _, c := range rep.Changes {
		bytes += c.Bytes
	}
	cr.BytesPerProxy = float64(bytes) / float64(len(rep.Changes)) / float64(n)
	if w.closed > 0 {
		cr.CPUPerProxyMS = ms(w.cpu) / float64(w.closed) / float64(n)
		cr.AllocsPerProxy = float64(w.allocs) / float64(w.closed) / float64(n)
	}
	return cr
}

// check verifies a run: every proxy reached full config with the plan's
// resource counts, nothing was NACKed or malformed.
func (r *serverRun) check(scenario string, rep *loadgen.Report, want Counts) error {
	if rep == nil {
		return fmt.Errorf("%s: no report", scenario)
	}
	if !rep.Complete || rep.FullConfig != r.o.Proxies {
		return fmt.Errorf("%s: incomplete: %d of %d proxies at full config", scenario, rep.FullConfig, r.o.Proxies)
	}
	if rep.Errors.Decode > 0 {
		return fmt.Errorf("%s: %d malformed responses: %s", scenario, rep.Errors.Decode, rep.Errors.Last)
	}
	for _, typ := range xdsTypes {
		ts := rep.Type(typeShort(typ))
		if ts.NACKs > 0 {
			return fmt.Errorf("%s: %d %s NACKs", scenario, ts.NACKs, ts.Type)
		}
		if w := want.of(typ); ts.HeldMin != w || ts.HeldMax != w {
			return fmt.Errorf("%s: proxies hold %d–%d %s resources, want %d", scenario, ts.HeldMin, ts.HeldMax, ts.Type, w)
		}
	}
	return nil
}

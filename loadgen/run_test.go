package loadgen

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// baseMesh is the brief's snapshot: 20 EDS clusters and their CLAs, one
// STATIC cluster, 2 listeners each naming a route configuration, 2 route
// configurations.
func baseMesh(version string) mesh {
	return mesh{version: version, services: 20, static: 1, ports: []int{80, 8080}}
}

func testConfig(addr string, proxies int, mode Mode) Config {
	return Config{
		XDS:            addr,
		Proxies:        proxies,
		Mode:           mode,
		Timeout:        30 * time.Second,
		ChangeInterval: 10 * time.Millisecond,
		ChangeTimeout:  20 * time.Second,
	}
}

func run(t *testing.T, cfg Config) *Report {
	t.Helper()
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		if rep != nil {
			var b strings.Builder
			rep.WriteTable(&b)
			t.Log("\n" + b.String())
		}
		t.Fatalf("Run: %v", err)
	}
	return rep
}

// checkHeld checks the resources every proxy holds at the end, per type.
func checkHeld(t *testing.T, rep *Report, want map[string]int) {
	t.Helper()
	for typ, n := range want {
		ts := rep.Type(typ)
		if ts.HeldMin != n || ts.HeldMax != n {
			t.Errorf("%s held per proxy = %d..%d, want %d", typ, ts.HeldMin, ts.HeldMax, n)
		}
	}
}

// checkConsistent checks the report's numbers against each other.
func checkConsistent(t *testing.T, rep *Report) {
	t.Helper()
	if rep.Launched != rep.Proxies || rep.Connected != rep.Proxies || rep.FullConfig != rep.Proxies {
		t.Errorf("launched %d, connected %d, full config %d; want %d each", rep.Launched, rep.Connected, rep.FullConfig, rep.Proxies)
	}
	if !rep.Complete {
		t.Error("report not complete")
	}
	checkLatency(t, "time to full config", rep.TimeToFullConfig, rep.Proxies)
	if rep.AllFullConfigMS <= 0 || rep.AllFullConfigMS > rep.ElapsedMS {
		t.Errorf("all full config at %vms of %vms", rep.AllFullConfigMS, rep.ElapsedMS)
	}
	var bytes int64
	for _, ts := range rep.Types {
		bytes += ts.Bytes
		if ts.Type == "other" {
			continue
		}
		if ts.Responses == 0 || ts.Bytes <= 0 || ts.Resources == 0 {
			t.Errorf("%s: %d responses, %d bytes, %d resources; want > 0", ts.Type, ts.Responses, ts.Bytes, ts.Resources)
		}
		if ts.ACKs+ts.NACKs != ts.Responses {
			t.Errorf("%s: %d ACKs + %d NACKs != %d responses", ts.Type, ts.ACKs, ts.NACKs, ts.Responses)
		}
		if ts.Responses < int64(rep.Proxies) {
			t.Errorf("%s: %d responses for %d proxies", ts.Type, ts.Responses, rep.Proxies)
		}
		checkLatency(t, ts.Type+" response latency", ts.ResponseLatency, -1)
	}
	if rep.BytesToFullConfig <= 0 || rep.BytesToFullConfig > bytes {
		t.Errorf("bytes to full config %d, total %d", rep.BytesToFullConfig, bytes)
	}
	for _, c := range rep.Changes {
		if c.Error != "" || c.NotConverged != 0 || c.Converged != rep.Proxies {
			t.Errorf("change %d: converged %d, not %d, error %q", c.Index, c.Converged, c.NotConverged, c.Error)
		}
		checkLatency(t, "convergence", c.Convergence, rep.Proxies)
		if c.Responses <= 0 || c.Bytes <= 0 {
			t.Errorf("change %d: %d responses, %d bytes", c.Index, c.Responses, c.Bytes)
		}
	}
	if rep.Errors.Decode != 0 {
		t.Errorf("decode errors: %d (%s)", rep.Errors.Decode, rep.Errors.Last)
	}
	if rep.Process.CPUUserSeconds < 0 || rep.Process.MaxRSSBytes <= 0 || rep.Process.RSSAtFullConfigBytes <= 0 {
		t.Errorf("process stats missing: %+v", rep.Process)
	}
	if len(rep.Timeline) < 2 {
		t.Errorf("timeline has %d samples", len(rep.Timeline))
	}
}

// checkLatency checks count (unless negative) and ordering.
func checkLatency(t *testing.T, name string, l Latency, count int) {
	t.Helper()
	if count >= 0 && l.Count != count {
		t.Errorf("%s: count %d, want %d", name, l.Count, count)
	}
	if l.Count == 0 {
		return
	}
	if !(0 < l.MinMS && l.MinMS <= l.P50MS && l.P50MS <= l.P90MS && l.P90MS <= l.P99MS && l.P99MS <= l.MaxMS) {
		t.Errorf("%s: percentiles out of order: %+v", name, l)
	}
	if l.MeanMS < l.MinMS || l.MeanMS > l.MaxMS {
		t.Errorf("%s: mean %v outside [%v, %v]", name, l.MeanMS, l.MinMS, l.MaxMS)
	}
	if len(l.CDFMS) != 101 || l.CDFMS[0] != l.MinMS || l.CDFMS[100] != l.MaxMS {
		t.Errorf("%s: CDF has %d points, ends %v..%v", name, len(l.CDFMS), l.CDFMS[0], l.CDFMS[len(l.CDFMS)-1])
	}
}

func TestRunFullConfig(t *testing.T) {
	for _, mode := range []Mode{SotW, Delta} {
		for _, transport := range []string{TransportGRPC, TransportH2C} {
			t.Run(string(mode)+"/"+transport, func(t *testing.T) {
				srv := startXDS(t, baseMesh("v1").snapshot(t))
				const n = 10
				cfg := testConfig(srv.addr, n, mode)
				cfg.Transport = transport
				cfg.Transport = transport
				rep := run(t, cfg)
				checkConsistent(t, rep)
				checkHeld(t, rep, map[string]int{"cds": 21, "eds": 20, "lds": 2, "rds": 2})
				if got := rep.Type("other").Responses; got != 0 {
					t.Errorf("other responses: %d", got)
				}
				// Each proxy got each type once, and with a SotW server once
				// more at most; every response was ACKed and the server saw
				// every ACK.
				acks, nacks := srv.counts()
				for _, typ := range []string{"cds", "eds", "lds", "rds"} {
					ts := rep.Type(typ)
					if ts.NACKs != 0 {
						t.Errorf("%s: %d NACKs", typ, ts.NACKs)
					}
					url := typeURLs[mustType(t, typ)]
					if acks[url] < int(ts.ACKs) {
						t.Errorf("%s: server saw %d ACKs, loadgen sent %d", typ, acks[url], ts.ACKs)
					}
					if nacks[url] != 0 {
						t.Errorf("%s: server saw %d NACKs", typ, nacks[url])
					}
				}
				if got := rep.Type("cds").Resources; got != 21*n {
					t.Errorf("cds resources received %d, want %d", got, 21*n)
				}
				srv.mu.Lock()
				defer srv.mu.Unlock()
				if len(srv.nodes) != n {
					t.Errorf("server saw %d distinct nodes, want %d", len(srv.nodes), n)
				}
				node := srv.nodes["sidecar~10.10.0.1~pod-0.load-0~load-0.svc.cluster.local"]
				if node == nil {
					t.Fatalf("node of proxy 0 not seen; nodes: %v", keys(srv.nodes))
				}
				md := node.GetMetadata().GetFields()
				if md["NAMESPACE"].GetStringValue() != "load-0" || md["ISTIO_VERSION"].GetStringValue() != "1.31.0" ||
					md["LABELS"].GetStructValue().GetFields()["app"].GetStringValue() != "load-0" {
					t.Errorf("node metadata: %v", md)
				}
			})
		}
	}
}

func mustType(t *testing.T, name string) xtype {
	typ, ok := typeOfName(name)
	if !ok {
		t.Fatalf("type %q", name)
	}
	return typ
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestChangeConverges: a change made through ChangeFunc (a new snapshot
// version adding a cluster) converges on every proxy, recognised by
// ExpectResource; a second change removes it (negated expectation).
func TestChangeConverges(t *testing.T) {
	for _, mode := range []Mode{SotW, Delta} {
		for _, transport := range []string{TransportGRPC, TransportH2C} {
			t.Run(string(mode)+"/"+transport, func(t *testing.T) {
				srv := startXDS(t, baseMesh("v1").snapshot(t))
				added := clusterName("new.example.com")
				calls := 0
				cfg := testConfig(srv.addr, 10, mode)
				cfg.Transport = transport
				cfg.ChangeFunc = func(context.Context) error {
					calls++
					m := baseMesh("v1")
					if calls == 1 {
						m.version, m.extra = "v2", []string{added}
					} else {
						m.version = "v3"
					}
					srv.set(t, m.snapshot(t))
					return nil
				}
				// First run: the change adds the cluster.
				cfg.ExpectResource = "cds/" + added
				rep := run(t, cfg)
				checkConsistent(t, rep)
				if len(rep.Changes) != 1 || rep.Changes[0].Expect != "cds/"+added {
					t.Fatalf("changes: %+v", rep.Changes)
				}
				checkHeld(t, rep, map[string]int{"cds": 22, "eds": 21, "lds": 2, "rds": 2})

				// Then the removal, against the same server, with new proxies
				// that start from v2.
				cfg.ExpectResource = "!cds/" + added
				rep = run(t, cfg)
				checkConsistent(t, rep)
				checkHeld(t, rep, map[string]int{"cds": 21, "eds": 20, "lds": 2, "rds": 2})
				if calls != 2 {
					t.Errorf("ChangeFunc called %d times", calls)
				}
			})
		}
	}
}

// TestChangeVersionBump: without ExpectResource any version bump counts;
// several changes in a row, made by a shell command that the test's server
// watches for ({i} and LOADGEN_CHANGE substituted).
func TestChangeVersionBump(t *testing.T) {
	srv := startXDS(t, baseMesh("v1").snapshot(t))
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for i := 1; ctx.Err() == nil; {
			if _, err := os.Stat(filepath.Join(dir, "change-"+itoa(i)+"-"+itoa(i))); err == nil {
				m := baseMesh("v1")
				m.version, m.salt = "v"+itoa(i+1), i
				srv.set(t, m.snapshot(t))
				i++
				continue
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
	cfg := testConfig(srv.addr, 8, SotW)
	cfg.ChangeCmd = `touch "` + dir + `/change-{i}-$LOADGEN_CHANGE"`
	cfg.Changes = 3
	rep := run(t, cfg)
	checkConsistent(t, rep)
	if len(rep.Changes) != 3 {
		t.Fatalf("%d changes", len(rep.Changes))
	}
	for _, c := range rep.Changes {
		if c.Expect != "" {
			t.Errorf("change %d expect %q", c.Index, c.Expect)
		}
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func TestChangeCmdFails(t *testing.T) {
	srv := startXDS(t, baseMesh("v1").snapshot(t))
	cfg := testConfig(srv.addr, 2, SotW)
	cfg.ChangeCmd = "echo boom >&2; exit 3"
	rep, err := Run(context.Background(), cfg)
	if !errors.Is(err, ErrChange) || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("err = %v, want ErrChange with the command's output", err)
	}
	if rep == nil || len(rep.Changes) != 1 || rep.Changes[0].Error == "" || rep.Complete {
		t.Fatalf("report: %+v", rep)
	}
}

// TestNack: with NackRate 1 every response is NACKed once, then the next is
// ACKed, and a NACKed response counts as delivered (nack.go): every proxy
// reaches full config and every change converges, whether or not the server
// resends what was rejected (go-control-plane resends in SotW, not in
// Delta). The server sees exactly the NACKs loadgen counts. Each change
// publishes a new version, every resource changed, so that updates are
// NACKed too.
func TestNack(t *testing.T) {
	for _, mode := range []Mode{SotW, Delta} {
		for _, transport := range []string{TransportGRPC, TransportH2C} {
			t.Run(string(mode)+"/"+transport, func(t *testing.T) {
				srv := startXDS(t, baseMesh("v1").snapshot(t))
				const n = 5
				cfg := testConfig(srv.addr, n, mode)
				cfg.Transport = transport
				cfg.NackRate = 1
				cfg.Changes = 3
				v := 1
				cfg.ChangeFunc = func(context.Context) error {
					v++
					m := baseMesh("v" + itoa(v))
					m.salt = v
					srv.set(t, m.snapshot(t))
					return nil
				}
				rep := run(t, cfg)
				if !rep.Complete || rep.FullConfig != n || len(rep.Changes) != 3 {
					t.Fatalf("complete %v, full config %d, %d changes", rep.Complete, rep.FullConfig, len(rep.Changes))
				}
				for _, c := range rep.Changes {
					if c.Converged != n {
						t.Errorf("change %d converged on %d of %d", c.Index, c.Converged, n)
					}
				}
				_, nacks := srv.counts()
				var total int64
				for _, typ := range []string{"cds", "eds", "lds", "rds"} {
					ts := rep.Type(typ)
					total += ts.NACKs
					url := typeURLs[mustType(t, typ)]
					if int64(nacks[url]) != ts.NACKs {
						t.Errorf("%s: server saw %d NACKs, loadgen sent %d", typ, nacks[url], ts.NACKs)
					}
					// Never two NACKs in a row: ACKs at least NACKs minus one
					// per proxy (a proxy may end on a NACK).
					if ts.ACKs < ts.NACKs-n {
						t.Errorf("%s: %d ACKs, %d NACKs", typ, ts.ACKs, ts.NACKs)
					}
				}
				// Every proxy NACKs its first CDS and LDS response, and with
				// three changes it receives at least two of each.
				for _, typ := range []string{"cds", "lds"} {
					if ts := rep.Type(typ); ts.NACKs < n || ts.ACKs < n {
						t.Errorf("%s: %d NACKs and %d ACKs, want at least %d of each", typ, ts.NACKs, ts.ACKs, n)
					}
				}
				if rep.NACKs.Total != total || rep.NACKs.AtRate != total || rep.NACKs.ByNackingProxies != 0 {
					t.Errorf("NACKs %+v, want %d in all, at the rate", rep.NACKs, total)
				}
				// The last sample is taken once measuring has ended: a
				// response being handled then may still be NACKed.
				if last := rep.Timeline[len(rep.Timeline)-1]; last.NACKs > total || last.NACKs < total-n || last.Nacking > n {
					t.Errorf("last sample: %d NACKs, %d NACKing; report: %d NACKs", last.NACKs, last.Nacking, total)
				}
			})
		}
	}
}

// TestGRPCProxy: proxyless gRPC clients request their target listeners by
// name, then the route configurations, clusters and endpoints they
// reference, and nothing else.
func TestGRPCProxy(t *testing.T) {
	for _, mode := range []Mode{SotW, Delta} {
		t.Run(string(mode), func(t *testing.T) {
			// go-control-plane's ADS SnapshotCache answers a SotW request by
			// name only if it names every resource of the type in the
			// snapshot, so the snapshot holds exactly what the clients ask.
			m := mesh{version: "v1", services: 3, grpcTargets: 3}
			srv := startXDS(t, m.snapshot(t))
			cfg := testConfig(srv.addr, 4, mode)
			cfg.Type = GRPC
			cfg.GRPCTargets = []string{host(0) + ":80", host(1) + ":80", host(2) + ":80"}
			rep := run(t, cfg)
			checkConsistent(t, rep)
			checkHeld(t, rep, map[string]int{"lds": 3, "rds": 3, "cds": 3, "eds": 3})
			srv.mu.Lock()
			defer srv.mu.Unlock()
			for _, node := range srv.nodes {
				if g := node.GetMetadata().GetFields()["GENERATOR"].GetStringValue(); g != "grpc" {
					t.Errorf("node %s GENERATOR %q", node.GetId(), g)
				}
			}
		})
	}
}

// TestManyProxies: 500 proxies in one process reach full config.
func TestManyProxies(t *testing.T) {
	if testing.Short() {
		t.Skip("500 proxies")
	}
	srv := startXDS(t, baseMesh("v1").snapshot(t))
	cfg := testConfig(srv.addr, 500, SotW)
	cfg.Timeout = 60 * time.Second
	rep := run(t, cfg)
	checkConsistent(t, rep)
	checkHeld(t, rep, map[string]int{"cds": 21, "eds": 20, "lds": 2, "rds": 2})
	t.Logf("500 proxies: all full config in %s, p50 %s p99 %s", fmtMS(rep.AllFullConfigMS),
		fmtMS(rep.TimeToFullConfig.P50MS), fmtMS(rep.TimeToFullConfig.P99MS))
}

// TestStreamsPerConn: proxies multiplexed on shared connections, connected
// at a ramp.
func TestStreamsPerConn(t *testing.T) {
	srv := startXDS(t, baseMesh("v1").snapshot(t))
	cfg := testConfig(srv.addr, 20, Delta)
	cfg.StreamsPerConn = 8
	cfg.Ramp = 200
	rep := run(t, cfg)
	checkConsistent(t, rep)
	if rep.Connections != 3 {
		t.Errorf("%d connections, want 3", rep.Connections)
	}
	// 20 proxies at 200/s take at least 95ms to launch.
	if rep.AllFullConfigMS < 95 {
		t.Errorf("all full config at %vms with a 200/s ramp", rep.AllFullConfigMS)
	}
}

// TestTimeout: a server without a snapshot never answers; Run gives up at
// Timeout and reports what it saw.
func TestTimeout(t *testing.T) {
	srv := startXDS(t, nil)
	cfg := testConfig(srv.addr, 3, SotW)
	cfg.Timeout = 300 * time.Millisecond
	start := time.Now()
	rep, err := Run(context.Background(), cfg)
	if !errors.Is(err, ErrIncomplete) {
		t.Fatalf("err = %v, want ErrIncomplete", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Run took %v", d)
	}
	if rep.Complete || rep.FullConfig != 0 || rep.Connected != 3 {
		t.Errorf("report: complete %v, full %d, connected %d", rep.Complete, rep.FullConfig, rep.Connected)
	}
}

// TestDuration: with Duration the run lasts that long even when done
// early, and the context can end it sooner.
func TestDuration(t *testing.T) {
	srv := startXDS(t, baseMesh("v1").snapshot(t))
	cfg := testConfig(srv.addr, 3, SotW)
	cfg.Timeout = 0
	cfg.Duration = 400 * time.Millisecond
	rep := run(t, cfg)
	if rep.ElapsedMS < 400 {
		t.Errorf("elapsed %vms, want at least the duration", rep.ElapsedMS)
	}
	checkConsistent(t, rep)

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	cfg.Duration = time.Hour
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatalf("cancelled run after full config: %v", err)
	}
	if rep.ElapsedMS > 5000 {
		t.Errorf("elapsed %vms after cancel", rep.ElapsedMS)
	}
}

// TestDialer: a Go caller's Dialer replaces net.Dialer for every
// connection.
func TestDialer(t *testing.T) {
	srv := startXDS(t, baseMesh("v1").snapshot(t))
	var dials atomic.Int32
	cfg := testConfig("in-memory-name:1", 6, SotW)
	cfg.StreamsPerConn = 2
	cfg.Dialer = func(ctx context.Context, addr string) (net.Conn, error) {
		if addr != "in-memory-name:1" {
			t.Errorf("dialer got %q", addr)
		}
		dials.Add(1)
		var d net.Dialer
		return d.DialContext(ctx, "tcp", srv.addr)
	}
	rep := run(t, cfg)
	checkConsistent(t, rep)
	if dials.Load() != 3 {
		t.Errorf("%d dials, want 3", dials.Load())
	}

	// h2c dials once per proxy, through the same Dialer, and refuses to
	// multiplex.
	dials.Store(0)
	cfg.Transport = TransportH2C
	if _, err := Run(context.Background(), cfg); !errors.Is(err, ErrConfig) {
		t.Fatalf("h2c with 2 streams per connection: %v, want ErrConfig", err)
	}
	cfg.StreamsPerConn = 1
	rep = run(t, cfg)
	checkConsistent(t, rep)
	if dials.Load() != 6 || rep.Connections != 6 || rep.Transport != TransportH2C {
		t.Errorf("h2c: %d dials, %d connections reported (%s), want 6", dials.Load(), rep.Connections, rep.Transport)
	}
}

// TestCancelIncomplete: cancelling the context before full config returns
// the report with ErrIncomplete wrapping the context's error.
func TestCancelIncomplete(t *testing.T) {
	srv := startXDS(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	cfg := testConfig(srv.addr, 2, Delta)
	rep, err := Run(ctx, cfg)
	if !errors.Is(err, ErrIncomplete) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v", err)
	}
	if rep == nil || rep.Complete || rep.Connected != 2 {
		t.Fatalf("report %+v", rep)
	}
}

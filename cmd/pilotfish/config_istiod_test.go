package main

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pilotfish-mesh/pilotfish/bench"
	"github.com/pilotfish-mesh/pilotfish/internal/kubetest"
	"github.com/pilotfish-mesh/pilotfish/loadgen"
)

// configVsIstiodEnv runs TestFullConfigVersusIstiod: real istiod and
// pilotfish against one loopback kube-apiserver, minutes of CPU, so on
// request (`make bench-config-istiod`).
const configVsIstiodEnv = "PILOTFISH_CONFIG_VS_ISTIOD"

// TestFullConfigVersusIstiod measures what one sidecar's full config
// (CDS, EDS, LDS, RDS over ADS, every response ACKed) costs istiod
// (pilot-discovery built from the pinned istio) and pilotfish, in one run
// on this machine: istio-bench http at CONFIG_SERVICES services (1,000),
// with testdata/config-vs-istiod's ten EnvoyFilters and mesh-wide
// Telemetry unless CONFIG_EXTRAS=0, and the mesh config of istiod's chart.
// Each of CONFIG_ROUNDS rounds (3) starts both servers afresh, then per
// server: one sidecar (cold: nothing generated yet), then CONFIG_WARM (50)
// sidecars of the same class one after another (warm). Server CPU is read
// from /proc around each phase, less the server's idle rate measured just
// before; the figures go to the log (docs/benchmarks.md). It asserts that
// both servers give every proxy full config.
func TestFullConfigVersusIstiod(t *testing.T) {
	if os.Getenv(configVsIstiodEnv) != "1" {
		t.Skip("set " + configVsIstiodEnv + "=1 (make bench-config-istiod) to compare with istiod")
	}
	root, err := kubetest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	istiod := filepath.Join(root, ".cache", "bin", "pilot-discovery")
	if _, err := os.Stat(istiod); err != nil {
		t.Fatalf("istiod binary: %v (make pilot-discovery)", err)
	}
	services := envInt("CONFIG_SERVICES", 1000)
	rounds := envInt("CONFIG_ROUNDS", 3)
	warm := envInt("CONFIG_WARM", 50)
	extras := os.Getenv("CONFIG_EXTRAS") != "0"

	c := kubetest.Start(t, kubetest.Options{IstioCRDs: true})
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	for _, ns := range []string{"istio-system", "load-0"} {
		if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	w, err := bench.LoadWorkload("http", services)
	if err != nil {
		t.Fatal(err)
	}
	files := []string{filepath.Join(dir, "http.yaml")}
	if err := os.WriteFile(files[0], w.Files[0].Data, 0o644); err != nil {
		t.Fatal(err)
	}
	if extras {
		for _, f := range []string{"envoyfilters.yaml", "telemetry.yaml"} {
			files = append(files, filepath.Join("testdata", "config-vs-istiod", f))
		}
	}
	for _, f := range files {
		if out, err := c.Kubectl(t, "apply", "--server-side", "-f", f); err != nil {
			t.Fatalf("applying %s: %v\n%s", f, err, out)
		}
	}
	mesh, err := filepath.Abs(filepath.Join(chartDir, "default", "mesh.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	pf := filepath.Join(dir, "pilotfish")
	if out, err := exec.CommandContext(ctx, "go", "build", "-tags", "vtprotobuf", "-o", pf, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	var results []configPhase
	for round := 1; round <= rounds; round++ {
		for _, name := range []string{"istiod", "pilotfish"} {
			rctx, rcancel := context.WithCancel(ctx)
			rdir := filepath.Join(dir, fmt.Sprintf("%s-%d", name, round))
			if err := os.MkdirAll(rdir, 0o755); err != nil {
				t.Fatal(err)
			}
			var pid int
			var xds string
			ports := freeTCPPorts(t, 8)
			switch name {
			case "istiod":
				pid = startChild(t, rctx, rdir, name, []string{istiod, "discovery", "--kubeconfig", c.Kubeconfig,
					"--meshConfig", mesh, "--networksConfig", filepath.Join(rdir, "missing"),
					"--domain", "cluster.local", "--grpcAddr", addrOf(ports[0]), "--secureGRPCAddr", addrOf(ports[1]),
					"--httpAddr", addrOf(ports[2]), "--httpsAddr", addrOf(ports[3]), "--monitoringAddr", addrOf(ports[4]),
					"--ctrlz_address", "127.0.0.1", "--ctrlz_port", strconv.Itoa(ports[5]), "--keepaliveMaxServerConnectionAge", "1000h"},
					"POD_NAMESPACE=istio-system", "POD_NAME=istiod-local", "REVISION=default", "CLUSTER_ID=Kubernetes",
					"INJECTION_WEBHOOK_CONFIG_NAME=", "VALIDATION_WEBHOOK_CONFIG_NAME=", "ISTIOD_CUSTOM_HOST=localhost",
					"ROOT_CA_DIR="+rdir, "PILOT_ENABLE_GATEWAY_API=false", "GOMAXPROCS=2")
				waitHTTP(t, rctx, "http://"+addrOf(ports[2])+"/ready")
				xds = addrOf(ports[0])
			case "pilotfish":
				pid = startChild(t, rctx, rdir, name, []string{pf, "serve", "--kubeconfig", c.Kubeconfig,
					"--mesh-config", mesh, "--grpc-addr", addrOf(ports[0]), "--grpc-tls-addr", "",
					"--http-addr", addrOf(ports[1]), "--webhook-addr", "", "--log-level", "error"},
					"POD_NAMESPACE=istio-system", "POD_NAME=pilotfish-0", "GOMAXPROCS=2")
				waitHTTP(t, rctx, "http://"+addrOf(ports[1])+"/ready")
				xds = addrOf(ports[0])
			}
			// Let start-up work (informer lists, the first push context)
			// settle, then take the idle rate.
			time.Sleep(5 * time.Second)
			idle := idleCPURate(t, pid, 3*time.Second)
			base := netip.MustParseAddr("10.20.0.0")
			for _, phase := range []struct {
				name    string
				proxies int
			}{{"cold", 1}, {"warm", warm}} {
				cpu0, t0 := procCPU(t, pid), time.Now()
				rep, err := loadgen.Run(rctx, loadgen.Config{XDS: xds, Proxies: phase.proxies, Ramp: 20,
					IPBase: base, Transport: loadgen.TransportH2C, Timeout: 2 * time.Minute})
				if err != nil {
					t.Fatalf("%s round %d %s: %v", name, round, phase.name, err)
				}
				elapsed := time.Since(t0)
				cpu := procCPU(t, pid) - cpu0 - time.Duration(float64(elapsed)*idle)
				if rep.FullConfig != phase.proxies {
					t.Errorf("%s round %d %s: %d of %d proxies got full config", name, round, phase.name, rep.FullConfig, phase.proxies)
				}
				results = append(results, configPhase{server: name, round: round, phase: phase.name, proxies: phase.proxies,
					cpu: cpu, bytes: rep.BytesToFullConfig, types: rep.Types})
				for range phase.proxies + 1 { // the next phase's proxies: new IPs, same class
					base = base.Next()
				}
			}
			rcancel()
		}
	}
	t.Logf("load average %s; http@%d, extras %v, %d warm proxies\n%s", loadavg(), services, extras, warm, configTable(results))
}

// configPhase is one measured phase of one server in one round.
type configPhase struct {
	server, phase  string
	round, proxies int
	cpu            time.Duration
	bytes          int64
	types          []loadgen.TypeStats
}

// configTable prints the phases and, per phase, istiod's median CPU per
// proxy over pilotfish's.
func configTable(rs []configPhase) string {
	var sb strings.Builder
	tw := tabwriter.NewWriter(&sb, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "server\tround\tphase\tproxies\tCPU/proxy\tbytes/proxy\tresources (cds/eds/lds/rds)\t")
	median := map[string][]time.Duration{}
	for _, r := range rs {
		per := r.cpu / time.Duration(r.proxies)
		median[r.server+"/"+r.phase] = append(median[r.server+"/"+r.phase], per)
		var res []string
		for _, ty := range r.types {
			if ty.Type != "other" {
				res = append(res, strconv.Itoa(ty.HeldMax))
			}
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%.3f ms\t%d\t%s\t\n", r.server, r.round, r.phase, r.proxies,
			float64(per)/1e6, r.bytes/int64(r.proxies), strings.Join(res, "/"))
	}
	_ = tw.Flush()
	for _, phase := range []string{"cold", "warm"} {
		i, p := medianOf(median["istiod/"+phase]), medianOf(median["pilotfish/"+phase])
		if p > 0 {
			fmt.Fprintf(&sb, "%s: istiod %.3f ms, pilotfish %.3f ms per proxy (medians): istiod/pilotfish %.1fx\n",
				phase, float64(i)/1e6, float64(p)/1e6, float64(i)/float64(p))
		}
	}
	return sb.String()
}

func medianOf(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	return s[len(s)/2]
}

// procCPU is pid's CPU time: the sum of its threads' run time from
// /proc/PID/task/*/schedstat (nanoseconds; /proc/PID/stat counts 10 ms
// ticks, too coarse for one proxy). Go's threads live as long as the
// process, so no exited thread's time is lost.
func procCPU(t *testing.T, pid int) time.Duration {
	t.Helper()
	tasks, err := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/schedstat")
	if err != nil || len(tasks) == 0 {
		t.Fatalf("reading %d's threads: %v", pid, err)
	}
	var total time.Duration
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // a thread that just exited
		}
		fields := strings.Fields(string(b))
		if len(fields) == 0 {
			continue
		}
		ns, _ := strconv.ParseInt(fields[0], 10, 64)
		total += time.Duration(ns)
	}
	return total
}

// idleCPURate is pid's CPU seconds per second over d, doing nothing.
func idleCPURate(t *testing.T, pid int, d time.Duration) float64 {
	c0, t0 := procCPU(t, pid), time.Now()
	time.Sleep(d)
	return float64(procCPU(t, pid)-c0) / float64(time.Since(t0))
}

package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pilotfish-mesh/pilotfish/bench"
	"github.com/pilotfish-mesh/pilotfish/internal/kubetest"
)

// injectVsIstiodEnv runs TestInjectVersusIstiod: it builds pilotfish,
// starts real istiod (.cache/bin/pilot-discovery) against a loopback
// kube-apiserver and drives both injectors; minutes of CPU, so on request
// (`make bench-inject`).
const injectVsIstiodEnv = "PILOTFISH_INJECT_VS_ISTIOD"

// TestInjectVersusIstiod measures sidecar injection in pilotfish and in
// istiod's own webhook (pilot-discovery built from the pinned istio) in
// one run on this machine: both servers get the chart's injector
// ConfigMap and mesh config and the same AdmissionReviews of inject's
// corpus, 100 in flight, rounds interleaved (docs/benchmarks.md,
// "Sidecar injection"). It asserts that both answer every review and
// agree on which pods are injected, allowed unpatched or denied; the
// figures (CPU per injection from /proc, p50/p99, RSS) go to the log.
// INJECT_REQUESTS and INJECT_ROUNDS size it (2,000 and 3).
func TestInjectVersusIstiod(t *testing.T) {
	if os.Getenv(injectVsIstiodEnv) != "1" {
		t.Skip("set " + injectVsIstiodEnv + "=1 (make bench-inject) to compare with istiod")
	}
	root, err := kubetest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	istiod := filepath.Join(root, ".cache", "bin", "pilot-discovery")
	if _, err := os.Stat(istiod); err != nil {
		t.Fatalf("istiod binary: %v (build it as /work/shared/notes/istiod-as-reference.md says)", err)
	}
	c := kubetest.Start(t, kubetest.Options{IstioCRDs: true})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	def, err := filepath.Abs(filepath.Join(chartDir, "default"))
	if err != nil {
		t.Fatal(err)
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(def, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	cms := []*corev1.ConfigMap{
		{ObjectMeta: metav1.ObjectMeta{Name: "istio", Namespace: "istio-system"}, Data: map[string]string{"mesh": read("mesh.yaml")}},
		{ObjectMeta: metav1.ObjectMeta{Name: "istio-sidecar-injector", Namespace: "istio-system"},
			Data: map[string]string{"config": read("config.yaml"), "values": read("values.json")}},
	}
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "istio-system"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, cm := range cms {
		if _, err := c.Client.CoreV1().ConfigMaps("istio-system").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	ports := freeTCPPorts(t, 8)
	dir := t.TempDir()
	iPID := startChild(t, ctx, dir, "istiod", []string{istiod, "discovery", "--kubeconfig", c.Kubeconfig,
		"--meshConfig", filepath.Join(def, "mesh.yaml"), "--networksConfig", filepath.Join(dir, "missing"),
		"--domain", "cluster.local", "--grpcAddr", addrOf(ports[0]), "--secureGRPCAddr", addrOf(ports[1]),
		"--httpAddr", addrOf(ports[2]), "--httpsAddr", addrOf(ports[3]), "--monitoringAddr", addrOf(ports[4]),
		"--ctrlz_address", "127.0.0.1", "--ctrlz_port", strconv.Itoa(ports[5]), "--keepaliveMaxServerConnectionAge", "1000h"},
		"POD_NAMESPACE=istio-system", "POD_NAME=istiod-local", "REVISION=default", "CLUSTER_ID=Kubernetes",
		"INJECTION_WEBHOOK_CONFIG_NAME=", "VALIDATION_WEBHOOK_CONFIG_NAME=", "ISTIOD_CUSTOM_HOST=localhost",
		"ROOT_CA_DIR="+dir, "PILOT_ENABLE_GATEWAY_API=false", "GOMAXPROCS=2")
	waitHTTP(t, ctx, "http://"+addrOf(ports[2])+"/ready")

	pf := filepath.Join(dir, "pilotfish")
	build := exec.CommandContext(ctx, "go", "build", "-tags", "vtprotobuf", "-o", pf, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	empty := t.TempDir()
	pPID := startChild(t, ctx, dir, "pilotfish", []string{pf, "serve", "--config-dir", empty,
		"--grpc-addr", "127.0.0.1:0", "--grpc-tls-addr", "", "--http-addr", addrOf(ports[6]), "--webhook-addr", addrOf(ports[7]),
		"--tls-san", "127.0.0.1", "--log-level", "error", "--inject-config", filepath.Join(def, "config.yaml"),
		"--inject-values", filepath.Join(def, "values.json"), "--inject-mesh-config", filepath.Join(def, "mesh.yaml")},
		"GOMAXPROCS=2")
	waitHTTP(t, ctx, "http://"+addrOf(ports[6])+"/ready")

	reviews, err := bench.InjectCorpus(filepath.Join("..", "..", "inject", "testdata", "corpus"))
	if err != nil {
		t.Fatal(err)
	}
	o := bench.InjectOptions{Reviews: reviews, Concurrency: 100, Requests: envInt("INJECT_REQUESTS", 2000),
		Rounds: envInt("INJECT_ROUNDS", 3), Warmup: 500, Targets: []bench.InjectTarget{
			{Name: "pilotfish", URL: "https://" + addrOf(ports[7]) + "/inject", PID: pPID},
			{Name: "istiod", URL: "https://" + addrOf(ports[3]) + "/inject", PID: iPID}}}
	// istiod serves /inject once its injector read the ConfigMap.
	waitInject(t, ctx, o.Targets[1].URL, reviews[0])
	res, err := bench.RunInject(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	printInjectResults(&sb, len(reviews), o, res)
	t.Logf("load average %s\n%s", loadavg(), sb.String())
	p, i := res[0], res[1]
	if p.Errors+i.Errors > 0 {
		t.Errorf("errors: pilotfish %d (%s), istiod %d (%s)", p.Errors, p.FirstError, i.Errors, i.FirstError)
	}
	if p.Patched != i.Patched || p.Allowed != i.Allowed || p.Denied != i.Denied {
		t.Errorf("the servers disagree: pilotfish patched/allowed/denied %d/%d/%d, istiod %d/%d/%d",
			p.Patched, p.Allowed, p.Denied, i.Patched, i.Allowed, i.Denied)
	}
	if p.Patched == 0 {
		t.Error("nothing was injected")
	}
	if p.CPUPerRequest > 0 {
		t.Logf("istiod CPU per injection over pilotfish's: %.2fx", float64(i.CPUPerRequest)/float64(p.CPUPerRequest))
	}
}

func addrOf(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	return strings.TrimSpace(string(b))
}

// freeTCPPorts returns n distinct free loopback ports.
func freeTCPPorts(t *testing.T, n int) []int {
	t.Helper()
	var ls []net.Listener
	var out []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		_ = l.Close()
	}
	return out
}

// startChild runs argv in dir with env added, output to dir/name.log
// (its tail logged if the test fails), and stops it at cleanup.
func startChild(t *testing.T, ctx context.Context, dir, name string, argv []string, env ...string) int {
	t.Helper()
	logf, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, logf, logf
	cmd.Env = append(os.Environ(), env...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			if len(b) > 4000 {
				b = b[len(b)-4000:]
			}
			t.Logf("%s log tail:\n%s", name, b)
		}
	})
	return cmd.Process.Pid
}

func waitHTTP(t *testing.T, ctx context.Context, url string) {
	t.Helper()
	eventuallyFor(t, 2*time.Minute, url, func() string {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err.Error()
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Sprint(resp.StatusCode)
		}
		return ""
	})
}

func waitInject(t *testing.T, ctx context.Context, url string, review []byte) {
	t.Helper()
	eventuallyFor(t, time.Minute, url, func() string {
		res, err := bench.RunInject(ctx, bench.InjectOptions{Reviews: [][]byte{review}, Concurrency: 1, Requests: 1,
			Targets: []bench.InjectTarget{{Name: "probe", URL: url, PID: os.Getpid()}}})
		if err != nil {
			return err.Error()
		}
		if res[0].Errors > 0 {
			return res[0].FirstError
		}
		return ""
	})
}

package istiodref

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"

	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/wasm/v3"    // ECDS resources, as JSON
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/wasm/v3" // ECDS resources, as JSON
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/anypb"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/pilotfish-mesh/pilotfish/internal/kubetest"
)

var (
	istiodBin = flag.String("istiod", "", "pilot-discovery binary: regenerate istiod's output (see doc.go)")
	onlyCase  = flag.String("case", "", "only this case")
	staleOnly = flag.Bool("stale-only", false, "with -istiod: only cases whose output is missing or older than their inputs")
	casesDir  = flag.String("cases", "", "the directory of the cases (default: this package's testdata)")
)

// TestProduce regenerates istiod's output with -istiod; without it, it
// checks that every case's output exists and matches its inputs.
func TestProduce(t *testing.T) {
	dir := Dir()
	if *casesDir != "" {
		dir = *casesDir
	}
	names, err := CasesIn(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(names) == 0 {
		t.Fatal("no cases under", dir)
	}
	for _, name := range names {
		if *onlyCase != "" && name != *onlyCase {
			continue
		}
		t.Run(name, func(t *testing.T) {
			c, err := LoadCaseIn(dir, name)
			if err != nil {
				t.Fatal(err)
			}
			if *istiodBin != "" && !(*staleOnly && upToDate(c)) {
				produce(t, c)
			}
			checkOutput(t, c)
		})
	}
}

// upToDate reports whether c's output was made from its current inputs.
func upToDate(c *Case) bool {
	got, err := os.ReadFile(c.DigestFile())
	return err == nil && strings.TrimSpace(string(got)) == c.InputDigest()
}

// checkOutput fails unless c's dumps were made from its current inputs.
func checkOutput(t *testing.T, c *Case) {
	got, err := os.ReadFile(c.DigestFile())
	if err != nil {
		t.Fatalf("no istiod output for case %s (run the producer, see doc.go): %v", c.Name, err)
	}
	if strings.TrimSpace(string(got)) != c.InputDigest() {
		t.Fatalf("case %s: its inputs changed since istiod's output was made: rerun the producer (see doc.go)", c.Name)
	}
	for _, p := range c.Proxies {
		d, err := ReadDump(c.DumpFile(p))
		if err != nil {
			t.Fatal(err)
		}
		if len(d.Clusters) == 0 || len(d.Listeners) == 0 {
			t.Errorf("%s: %d clusters, %d listeners: istiod sent the proxy no config", c.DumpFile(p), len(d.Clusters), len(d.Listeners))
		}
	}
}

// produce runs istiod on c and writes its dumps.
func produce(t *testing.T, c *Case) {
	cl := kubetest.Start(t, kubetest.Options{IstioCRDs: true})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir()
	for _, ns := range append([]string{"istio-system"}, caseNamespaces(t, c.Config)...) {
		_, err := cl.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	meshFile := filepath.Join(dir, "mesh.yaml") // absent: istiod's code defaults
	if c.Mesh != nil {
		if err := os.WriteFile(meshFile, c.Mesh, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := cl.Kubectl(t, "apply", "--server-side", "-f", filepath.Join(c.Dir, "config.yaml")); err != nil {
		t.Fatalf("applying %s/config.yaml: %v\n%s", c.Name, err, out)
	}
	// A Pod's status (its IP, phase, conditions) is a subresource: what
	// the kubelet would write.
	if pods := podDocs(t, c.Config); pods != nil {
		podFile := filepath.Join(dir, "pods.yaml")
		if err := os.WriteFile(podFile, pods, 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := cl.Kubectl(t, "apply", "--server-side", "--subresource=status", "-f", podFile); err != nil {
			t.Fatalf("applying the pods' status: %v\n%s", err, out)
		}
	}
	ports := freePorts(t, 6)
	addr := func(i int) string { return "127.0.0.1:" + strconv.Itoa(ports[i]) }
	logFile, err := os.Create(filepath.Join(dir, "istiod.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(*istiodBin, "discovery", "--kubeconfig", cl.Kubeconfig,
		"--meshConfig", meshFile, "--networksConfig", filepath.Join(dir, "absent-networks.yaml"),
		"--domain", "cluster.local", "--grpcAddr", addr(0), "--secureGRPCAddr", addr(1),
		"--httpAddr", addr(2), "--httpsAddr", addr(3), "--monitoringAddr", addr(4),
		"--ctrlz_address", "127.0.0.1", "--ctrlz_port", strconv.Itoa(ports[5]),
		"--keepaliveMaxServerConnectionAge", "1000h")
	cmd.Env = append(os.Environ(), "POD_NAMESPACE=istio-system", "POD_NAME=istiod-ref", "REVISION=default",
		"CLUSTER_ID=Kubernetes", "INJECTION_WEBHOOK_CONFIG_NAME=", "VALIDATION_WEBHOOK_CONFIG_NAME=",
		"ISTIOD_CUSTOM_HOST=localhost", "ROOT_CA_DIR="+dir, "PILOT_ENABLE_GATEWAY_API=false", "GOMAXPROCS=2")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		logFile.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logFile.Name())
			if len(b) > 8000 {
				b = b[len(b)-8000:]
			}
			t.Logf("istiod log tail:\n%s", b)
		}
	})
	httpBase := "http://" + addr(2)
	waitReady(ctx, t, httpBase+"/ready")
	if err := os.MkdirAll(filepath.Join(c.Dir, "istiod"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range c.Proxies {
		// Connected until its dump is taken: istiod dumps connected proxies only.
		stop, ecds := connectProxy(ctx, t, addr(0), p)
		writeExtensions(t, c, p, ecds)
		b := get(ctx, t, httpBase+"/debug/config_dump?proxyID="+p.DebugID()+"&include_eds=true")
		stop()
		var pretty bytes.Buffer
		if err := json.Indent(&pretty, b, "", "  "); err != nil {
			t.Fatalf("%s: config_dump: %v: %.300s", p.Name, err, b)
		}
		pretty.WriteByte('\n')
		if err := os.WriteFile(c.DumpFile(p), pretty.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(c.DigestFile(), []byte(c.InputDigest()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// caseNamespaces lists the namespaces config's objects live in.
func caseNamespaces(t *testing.T, config []byte) []string {
	var out []string
	for _, doc := range bytes.Split(config, []byte("\n---")) {
		var o struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal(doc, &o); err != nil {
			t.Fatalf("config.yaml: %v", err)
		}
		ns := o.Metadata.Namespace
		if o.Kind == "Namespace" {
			ns = o.Metadata.Name
		}
		if ns != "" && !slices.Contains(out, ns) {
			out = append(out, ns)
		}
	}
	return out
}

// podDocs returns config's Pod documents, nil if there are none.
func podDocs(t *testing.T, config []byte) []byte {
	var out []byte
	for _, doc := range bytes.Split(config, []byte("\n---")) {
		var o struct {
			Kind string `json:"kind"`
		}
		if err := yaml.Unmarshal(doc, &o); err != nil {
			t.Fatalf("config.yaml: %v", err)
		}
		if o.Kind == "Pod" {
			out = append(append(out, doc...), "\n---\n"...)
		}
	}
	return out
}

func waitReady(ctx context.Context, t *testing.T, url string) {
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("istiod not ready at %s: %v", url, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func get(ctx context.Context, t *testing.T, url string) []byte {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v: %.500s", url, resp.StatusCode, err, b)
	}
	return b
}

func freePorts(t *testing.T, n int) []int {
	var ls []net.Listener
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}

// writeExtensions saves the ECDS resources istiod sent p (none: no file)
// as a JSON list of TypedExtensionConfigs.
func writeExtensions(t *testing.T, c *Case, p Proxy, ecds []*anypb.Any) {
	if len(ecds) == 0 {
		return
	}
	var out bytes.Buffer
	out.WriteString("[\n")
	for i, a := range ecds {
		b, err := protojson.MarshalOptions{Multiline: true, Indent: "  "}.Marshal(a)
		if err != nil {
			t.Fatalf("%s: ECDS resource: %v", p.Name, err)
		}
		if i > 0 {
			out.WriteString(",\n")
		}
		out.Write(b)
	}
	out.WriteString("\n]\n")
	if err := os.WriteFile(c.ExtensionFile(p), out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

package inject_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/pilotfish-mesh/pilotfish/inject"
)

// The corpus: testdata/corpus/<case>.yaml is a Pod or a Deployment, and
// <case>.istioctl.yaml what `istioctl kube-inject` of the pinned istio
// made of it (or <case>.istioctl.err, its error), with the injector
// config, values and mesh config `istioctl manifest generate` renders
// from istio's own chart (testdata/chart/<variant>/). A case's leading
// comment lines may say "# variant: cni" (the chart rendered with
// istio-cni) and "# env: NAME=value" (istioctl's environment, e.g.
// ENABLE_NATIVE_SIDECARS=true, which pilotfish takes as a setting).
//
// `go test ./inject -run TestCorpus -update` regenerates the chart files
// and istioctl's outputs (it needs .cache/bin/istioctl); plain `go test`
// compares with the saved files only.

var update = flag.Bool("update", false, "regenerate testdata/chart and the istioctl outputs of testdata/corpus with .cache/bin/istioctl")

// variants are the chart renderings the corpus uses, with the
// `istioctl manifest generate` flags that make them.
var variants = map[string][]string{
	"default": nil,
	"cni":     {"--set", "components.cni.enabled=true"},
}

type corpusCase struct {
	name, variant string
	env           []string
	input         []byte
}

func loadCorpus(t testing.TB) []corpusCase {
	t.Helper()
	files, err := filepath.Glob("testdata/corpus/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var out []corpusCase
	for _, f := range files {
		if strings.HasSuffix(f, ".istioctl.yaml") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		c := corpusCase{name: strings.TrimSuffix(filepath.Base(f), ".yaml"), variant: "default", input: b}
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			line := sc.Text()
			if !strings.HasPrefix(line, "#") {
				break
			}
			if v, ok := strings.CutPrefix(line, "# variant: "); ok {
				c.variant = strings.TrimSpace(v)
			}
			if v, ok := strings.CutPrefix(line, "# env: "); ok {
				c.env = append(c.env, strings.TrimSpace(v))
			}
		}
		if _, ok := variants[c.variant]; !ok {
			t.Fatalf("%s: unknown variant %q", f, c.variant)
		}
		out = append(out, c)
	}
	if len(out) < 25 {
		t.Fatalf("corpus has %d cases, want at least 25", len(out))
	}
	return out
}

// settings reads a variant's chart files into injector settings.
func settings(t testing.TB, variant string, native bool) *inject.Settings {
	t.Helper()
	dir := filepath.Join("testdata", "chart", variant)
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	cfg, err := inject.ParseConfig(read("config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	vals, err := inject.ParseValues(read("values.json"))
	if err != nil {
		t.Fatal(err)
	}
	mesh, err := inject.ParseMesh(read("mesh.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return &inject.Settings{Config: cfg, Values: vals, Mesh: mesh, NativeSidecars: native}
}

// workload is a corpus input as the injector sees it: its pod (a
// Deployment's template) and the workload it belongs to.
type workload struct {
	pod       *corev1.Pod
	owner     types.NamespacedName
	ownerType metav1.TypeMeta
	deploy    *appsv1.Deployment
}

func parseWorkload(t testing.TB, b []byte) workload {
	t.Helper()
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(b, &tm); err != nil {
		t.Fatal(err)
	}
	switch tm.Kind {
	case "Pod":
		var p corev1.Pod
		if err := yaml.UnmarshalStrict(b, &p); err != nil {
			t.Fatal(err)
		}
		return workload{pod: &p}
	case "Deployment":
		var d appsv1.Deployment
		if err := yaml.UnmarshalStrict(b, &d); err != nil {
			t.Fatal(err)
		}
		p := &corev1.Pod{ObjectMeta: d.Spec.Template.ObjectMeta, Spec: d.Spec.Template.Spec}
		return workload{pod: p, deploy: &d, owner: types.NamespacedName{Namespace: d.Namespace, Name: d.Name}, ownerType: d.TypeMeta}
	}
	t.Fatalf("corpus input is a %s, want a Pod or a Deployment", tm.Kind)
	return workload{}
}

// TestCorpusMatchesIstioctl applies pilotfish's patch to each corpus
// input and compares the pod with istioctl's, field by field.
func TestCorpusMatchesIstioctl(t *testing.T) {
	if *update {
		produceCorpus(t)
	}
	for _, c := range loadCorpus(t) {
		t.Run(c.name, func(t *testing.T) {
			native := slices.Contains(c.env, "ENABLE_NATIVE_SIDECARS=true")
			in, err := inject.New(settings(t, c.variant, native), nil)
			if err != nil {
				t.Fatal(err)
			}
			w := parseWorkload(t, c.input)
			res, err := in.Inject(inject.Request{Pod: w.pod, Owner: w.owner, OwnerType: w.ownerType})
			base := filepath.Join("testdata", "corpus", c.name)
			if wantErr, rerr := os.ReadFile(base + ".istioctl.err"); rerr == nil {
				if err == nil {
					t.Fatalf("injected; istioctl refused it: %s", wantErr)
				}
				if !errors.Is(err, inject.ErrAnnotation) && !errors.Is(err, inject.ErrTemplate) {
					t.Fatalf("error %v is neither ErrAnnotation nor ErrTemplate", err)
				}
				t.Logf("denied: %v (istioctl: %s)", err, bytes.TrimSpace(wantErr))
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := w.pod
			if res.Injected {
				got = applyPatch(t, w.pod, res.Patch)
			}
			want := istioctlPod(t, base+".istioctl.yaml")
			g, wnt := normalize(t, got), normalize(t, want)
			if !reflect.DeepEqual(g, wnt) {
				gb, _ := yaml.Marshal(g)
				wb, _ := yaml.Marshal(wnt)
				t.Fatalf("pilotfish's pod differs from istioctl's:\n%s", lineDiff(string(wb), string(gb)))
			}
			if res.Injected && !reflect.DeepEqual(normalize(t, res.Pod), g) {
				t.Fatal("Result.Pod is not the patched pod")
			}
		})
	}
}

// applyPatch applies an RFC 6902 patch with an independent implementation
// (evanphx/json-patch, the API server's).
func applyPatch(t testing.TB, pod *corev1.Pod, patch []byte) *corev1.Pod {
	t.Helper()
	p, err := jsonpatch.DecodePatch(patch)
	if err != nil {
		t.Fatalf("patch %s: %v", patch, err)
	}
	doc, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	out, err := p.Apply(doc)
	if err != nil {
		t.Fatalf("applying the patch: %v", err)
	}
	var res corev1.Pod
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatal(err)
	}
	return &res
}

// istioctlPod reads istioctl's output: the pod, or the Deployment's pod
// template (kube-inject writes the object back with the injected
// template; its other fields are the input's).
func istioctlPod(t testing.TB, file string) *corev1.Pod {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	b, _, _ = bytes.Cut(b, []byte("\n---"))
	return parseWorkload(t, b).pod
}

// normalize is a pod's metadata and spec as generic JSON: quantities in
// canonical form, empty and absent fields alike. Nothing istioctl adds is
// ignored: kube-inject writes status: {} and creationTimestamp: null for
// a Pod, which are not fields of the patch, and the comparison covers
// metadata and spec only.
func normalize(t testing.TB, p *corev1.Pod) map[string]any {
	t.Helper()
	b, err := json.Marshal(corev1.Pod{ObjectMeta: p.ObjectMeta, Spec: p.Spec})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// lineDiff shows the lines only one side has (want "-", got "+").
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var out []string
	for _, l := range w {
		if !slices.Contains(g, l) {
			out = append(out, "- "+l)
		}
	}
	for _, l := range g {
		if !slices.Contains(w, l) {
			out = append(out, "+ "+l)
		}
	}
	if len(out) == 0 {
		return "(same lines, different order)\nwant:\n" + want + "\ngot:\n" + got
	}
	return strings.Join(out, "\n")
}

func istioctlBin(t testing.TB) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", ".cache", "bin", "istioctl"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("-update needs istioctl (make istioctl): %v", err)
	}
	return p
}

// runIstioctl runs istioctl with a kubeconfig that points nowhere and
// --revision default: kube-inject with every input given as a file needs
// no cluster (without --revision it looks the default revision up and
// waits for an API server).
func runIstioctl(t testing.TB, env []string, args ...string) (stdout, stderr []byte, err error) {
	t.Helper()
	home := t.TempDir()
	kc := filepath.Join(home, "kubeconfig")
	if err := os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters: [{name: none, cluster: {server: "https://127.0.0.1:1"}}]
contexts: [{name: none, context: {cluster: none, user: none}}]
users: [{name: none, user: {}}]
current-context: none
`), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, istioctlBin(t), append(args, "--kubeconfig", kc)...)
	cmd.Env = append(append(os.Environ(), "HOME="+home), env...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.Bytes(), e.Bytes(), err
}

// produceCorpus regenerates testdata/chart and the istioctl outputs.
func produceCorpus(t *testing.T) {
	for v, flags := range variants {
		out, stderr, err := runIstioctl(t, nil, append([]string{"manifest", "generate"}, flags...)...)
		if err != nil {
			t.Fatalf("istioctl manifest generate %v: %v\n%s", flags, err, stderr)
		}
		dir := filepath.Join("testdata", "chart", v)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		files := map[string]string{}
		for _, doc := range bytes.Split(out, []byte("\n---")) {
			var cm corev1.ConfigMap
			if yaml.Unmarshal(doc, &cm) != nil || cm.Kind != "ConfigMap" {
				continue
			}
			switch cm.Name {
			case "istio-sidecar-injector":
				files["config.yaml"], files["values.json"] = cm.Data["config"], cm.Data["values"]
			case "istio":
				files["mesh.yaml"] = cm.Data["mesh"]
			}
		}
		if len(files) != 3 {
			t.Fatalf("manifest generate %v: found %d of the config, values and mesh keys", flags, len(files))
		}
		for name, data := range files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if v == "default" {
			if err := os.WriteFile(filepath.Join("testdata", "chart", "webhook.yaml"), mutatingWebhook(t, out), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, c := range loadCorpus(t) {
		dir := filepath.Join("testdata", "chart", c.variant)
		base := filepath.Join("testdata", "corpus", c.name)
		out, stderr, err := runIstioctl(t, c.env, "kube-inject", "--revision", "default", "-f", base+".yaml",
			"--injectConfigFile", filepath.Join(dir, "config.yaml"), "--valuesFile", filepath.Join(dir, "values.json"),
			"--meshConfigFile", filepath.Join(dir, "mesh.yaml"))
		_ = os.Remove(base + ".istioctl.yaml")
		_ = os.Remove(base + ".istioctl.err")
		if err != nil {
			msg := stderr
			if i := bytes.LastIndex(msg, []byte("Error: ")); i >= 0 {
				msg = msg[i:]
			}
			if werr := os.WriteFile(base+".istioctl.err", msg, 0o644); werr != nil {
				t.Fatal(werr)
			}
			continue
		}
		if err := os.WriteFile(base+".istioctl.yaml", out, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// mutatingWebhook extracts the chart's MutatingWebhookConfiguration.
func mutatingWebhook(t *testing.T, manifest []byte) []byte {
	for _, doc := range bytes.Split(manifest, []byte("\n---")) {
		var tm metav1.TypeMeta
		if yaml.Unmarshal(doc, &tm) == nil && tm.Kind == "MutatingWebhookConfiguration" {
			return append(bytes.TrimLeft(doc, "\n"), '\n')
		}
	}
	t.Fatal("no MutatingWebhookConfiguration in the manifest")
	return nil
}

package istiobench_test

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/pilotfish-mesh/pilotfish/internal/istiobench"
)

// doc is the part of a Kubernetes-style object every test looks at.
type doc struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name      string `yaml:"name"`
		Namespace string `yaml:"namespace"`
	} `yaml:"metadata"`
}

// decoded is a multi-document YAML stream read the way lenient Kubernetes
// YAML readers (yaml.v2, sigs.k8s.io/yaml's Unmarshal) read it: a key
// repeated at the top of a document keeps its last value.
type decoded struct {
	docs []doc
	// merged counts documents with repeated top-level keys, i.e. objects
	// that a missing "---" ran together.
	merged int
}

// decodeAll decodes every non-empty document of a multi-document YAML
// stream, failing the test on a syntax error or on an object without
// apiVersion, kind or metadata.name.
func decodeAll(t *testing.T, what string, b []byte) decoded {
	t.Helper()
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var out decoded
	for i := 0; ; i++ {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("%s: document %d: %v", what, i, err)
		}
		if len(n.Content) == 0 || n.Content[0].ShortTag() == "!!null" {
			continue // empty document: only comments, or a trailing "---"
		}
		root := n.Content[0]
		if root.Kind != yaml.MappingNode {
			t.Fatalf("%s: document %d (line %d) is not a mapping", what, i, root.Line)
		}
		if lastWins(root) {
			out.merged++
		}
		var d doc
		if err := root.Decode(&d); err != nil {
			t.Fatalf("%s: document %d (line %d): %v", what, i, root.Line, err)
		}
		if d.APIVersion == "" || d.Kind == "" || d.Metadata.Name == "" {
			t.Errorf("%s: document %d (line %d): missing apiVersion, kind or metadata.name: %+v", what, i, root.Line, d)
		}
		out.docs = append(out.docs, d)
	}
}

// lastWins drops all but the last occurrence of each key of mapping m and
// reports whether there was any repeated key.
func lastWins(m *yaml.Node) bool {
	last := map[string]int{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		last[m.Content[i].Value] = i
	}
	if len(last)*2 == len(m.Content) {
		return false
	}
	var kept []*yaml.Node
	for i := 0; i+1 < len(m.Content); i += 2 {
		if last[m.Content[i].Value] == i {
			kept = append(kept, m.Content[i], m.Content[i+1])
		}
	}
	m.Content = kept
	return true
}

func countKind(d decoded, kind string) int {
	n := 0
	for _, d := range d.docs {
		if d.Kind == kind {
			n++
		}
	}
	return n
}

func TestNames(t *testing.T) {
	names := istiobench.Names()
	if !slices.IsSorted(names) {
		t.Errorf("Names not sorted: %v", names)
	}
	for _, want := range []string{"http", "virtualservice", "serviceentry-workloadentry", "gateways", "authorizationpolicy"} {
		if !slices.Contains(names, want) {
			t.Errorf("Names lacks %q: %v", want, names)
		}
	}
	files, err := filepath.Glob("workloads/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != len(files) {
		t.Errorf("Names has %d workloads, workloads/ has %d .yaml files", len(names), len(files))
	}
}

func TestRenderEveryWorkload(t *testing.T) {
	for _, services := range []int{3, 1000} {
		for _, name := range istiobench.Names() {
			t.Run(name+"/"+strconv.Itoa(services), func(t *testing.T) {
				b, err := istiobench.Render(name, istiobench.Params{Services: services})
				if err != nil {
					t.Fatalf("Render: %v", err)
				}
				d := decodeAll(t, name, b)
				if len(d.docs) == 0 {
					t.Fatalf("rendered no objects")
				}
				// Upstream quirk, kept for like-for-like numbers: the
				// loop of knative-gateway.yaml lacks a trailing "---",
				// so each hello-private-ingress-i runs into
				// hello-ingress-(i+1) and lenient readers keep the
				// latter. Every other workload is one object per
				// document.
				wantMerged := 0
				if name == "knative-gateway" {
					wantMerged = services - 1
				}
				if d.merged != wantMerged {
					t.Errorf("%d documents hold run-together objects, want %d", d.merged, wantMerged)
				}
				if bytes.Contains(b, []byte("{{")) {
					t.Errorf("rendered output still holds template actions")
				}
			})
		}
	}
}

func TestRenderScalesWithServices(t *testing.T) {
	tests := []struct {
		name      string
		p         istiobench.Params
		kind      string
		wantCount int
	}{
		{"http", istiobench.Params{Services: 3}, "ServiceEntry", 1 + 3},
		{"http", istiobench.Params{Services: 1000}, "ServiceEntry", 1 + 1000},
		{"http", istiobench.Params{}, "ServiceEntry", 1 + istiobench.DefaultServices},
		{"virtualservice", istiobench.Params{Services: 7}, "VirtualService", 7},
		{"gateways", istiobench.Params{Services: 5}, "Gateway", 5},
		{"secrets", istiobench.Params{Services: 4}, "Secret", 4},
		// hello-ingress-0..2 and only the last hello-private-ingress: see
		// the knative-gateway quirk in TestRenderEveryWorkload.
		{"knative-gateway", istiobench.Params{Services: 3}, "VirtualService", 3 + 1},
		{"serviceentry-workloadentry", istiobench.Params{Services: 10, Instances: 25}, "ServiceEntry", 1 + 10},
		{"serviceentry-workloadentry", istiobench.Params{Services: 10, Instances: 25}, "WorkloadEntry", 25},
		{"serviceentry-workloadentry", istiobench.Params{Services: 10}, "WorkloadEntry", istiobench.DefaultInstances},
	}
	for _, tt := range tests {
		t.Run(tt.name+"/"+tt.kind+"/"+strconv.Itoa(tt.wantCount), func(t *testing.T) {
			b, err := istiobench.Render(tt.name, tt.p)
			if err != nil {
				t.Fatalf("Render: %v", err)
			}
			if got := countKind(decodeAll(t, tt.name, b), tt.kind); got != tt.wantCount {
				t.Errorf("Render(%q, %+v): %d %s objects, want %d", tt.name, tt.p, got, tt.kind, tt.wantCount)
			}
		})
	}
}

func TestRenderDefaults(t *testing.T) {
	zero, err := istiobench.Render("serviceentry-workloadentry", istiobench.Params{})
	if err != nil {
		t.Fatal(err)
	}
	explicit, err := istiobench.Render("serviceentry-workloadentry", istiobench.Params{
		Services: istiobench.DefaultServices, Instances: istiobench.DefaultInstances,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(zero, explicit) {
		t.Errorf("zero Params do not render as istiod's defaults")
	}
}

func TestRenderErrors(t *testing.T) {
	_, err := istiobench.Render("no-such-workload", istiobench.Params{})
	if !errors.Is(err, istiobench.ErrUnknownWorkload) {
		t.Fatalf("unknown workload: got %v, want ErrUnknownWorkload", err)
	}
	for _, want := range []string{`"no-such-workload"`, "http", "virtualservice"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("unknown workload error %q does not mention %s", err, want)
		}
	}
	if _, err := istiobench.Render("http", istiobench.Params{Services: -1}); !errors.Is(err, istiobench.ErrBadParams) {
		t.Errorf("negative Services: got %v, want ErrBadParams", err)
	}
	if err := istiobench.WriteDir(t.TempDir(), "../escape", istiobench.Params{}); !errors.Is(err, istiobench.ErrUnknownWorkload) {
		t.Errorf("WriteDir with a path for a name: got %v, want ErrUnknownWorkload", err)
	}
}

func TestRenderAll(t *testing.T) {
	all, err := istiobench.RenderAll(istiobench.Params{Services: 2})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range all {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if !slices.Equal(keys, istiobench.Names()) {
		t.Errorf("RenderAll keys %v, want Names() %v", keys, istiobench.Names())
	}
	one, err := istiobench.Render("tcp", istiobench.Params{Services: 2})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(all["tcp"], one) {
		t.Errorf("RenderAll and Render disagree on tcp")
	}
}

func TestWriteDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "mesh")
	p := istiobench.Params{Services: 5}
	for range 2 { // the second write replaces the first
		if err := istiobench.WriteDir(dir, "http", p); err != nil {
			t.Fatalf("WriteDir: %v", err)
		}
	}
	got, err := os.ReadFile(filepath.Join(dir, "http.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := istiobench.Render("http", p)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("dir/http.yaml differs from Render")
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("WriteDir left %d entries, want only http.yaml: %v", len(entries), entries)
	}
}

// The embedded workloads are Istio's files, unchanged: SHA256SUMS (copied
// with them) must match every one, and every .yaml must be listed.
func TestWorkloadsUnmodified(t *testing.T) {
	f, err := os.Open("workloads/SHA256SUMS")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	listed := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok {
			t.Fatalf("SHA256SUMS: bad line %q", sc.Text())
		}
		listed[name] = true
		b, err := os.ReadFile(filepath.Join("workloads", name))
		if err != nil {
			t.Errorf("SHA256SUMS lists %s: %v", name, err)
			continue
		}
		got := sha256.Sum256(b)
		if hex.EncodeToString(got[:]) != sum {
			t.Errorf("workloads/%s differs from Istio's (SHA256SUMS); do not edit it", name)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for _, name := range istiobench.Names() {
		if !listed[name+".yaml"] {
			t.Errorf("workloads/%s.yaml is not in SHA256SUMS", name)
		}
	}
}

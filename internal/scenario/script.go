package scenario

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/structpb"
	"sigs.k8s.io/yaml"

	"github.com/pilotfish-mesh/pilotfish/internal/istiodref"
)

// Target is where a script's proxies get their config.
type Target interface {
	// Mesh is the config the script's apply and delete change.
	Mesh() *Mesh
	// Connect connects a proxy with node; the Fetcher answers its requests.
	Connect(t testing.TB, node *corev3.Node) Fetcher
}

// RunDir runs every *.txtar file of dir as a subtest, each against a new
// target.
func RunDir(t *testing.T, dir string, newTarget func(t *testing.T) Target) {
	files, err := filepath.Glob(filepath.Join(dir, "*.txtar"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no scenarios in %s", dir)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txtar"), func(t *testing.T) {
			Run(t, f, newTarget(t))
		})
	}
}

// Run runs the scenario file at path against target.
func Run(t *testing.T, path string, target Target) {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	a, err := ParseArchive(data)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	s := &script{t: t, path: path, a: a, target: target, proxies: map[string]*proxy{}}
	for i, line := range strings.Split(string(a.Comment), "\n") {
		if j := strings.IndexByte(line, '#'); j >= 0 {
			line = line[:j]
		}
		args := strings.Fields(line)
		if len(args) == 0 {
			continue
		}
		s.line = i + 1
		if err := s.exec(args); err != nil {
			t.Fatalf("%s:%d: %s: %v", path, s.line, strings.TrimSpace(line), err)
		}
	}
}

type script struct {
	t       *testing.T
	path    string
	line    int
	a       *Archive
	target  Target
	proxies map[string]*proxy
	// istiodCase is the istiodref case the script loaded (case NAME).
	istiodCase *istiodref.Case
}

type proxy struct {
	f   Fetcher
	cfg Config // nil after a change: fetched again when asked
}

func (s *script) file(name string) ([]byte, error) {
	b, ok := s.a.File(name)
	if !ok {
		return nil, fmt.Errorf("no file %q in the archive", name)
	}
	return b, nil
}

func (s *script) exec(args []string) error {
	cmd, args := args[0], args[1:]
	need := func(n int) error {
		if len(args) < n {
			return fmt.Errorf("%s wants at least %d arguments", cmd, n)
		}
		return nil
	}
	switch cmd {
	case "apply":
		if err := need(1); err != nil {
			return err
		}
		for _, name := range args {
			b, err := s.file(name)
			if err != nil {
				return err
			}
			if err := s.target.Mesh().Apply(name, b); err != nil {
				return err
			}
		}
		s.changed()
		return nil
	case "replace":
		if len(args) != 2 {
			return fmt.Errorf("replace wants FILE and the file holding its new content")
		}
		b, err := s.file(args[1])
		if err != nil {
			return err
		}
		if err := s.target.Mesh().Apply(args[0], b); err != nil {
			return err
		}
		s.changed()
		return nil
	case "delete":
		if err := need(1); err != nil {
			return err
		}
		if err := s.target.Mesh().Delete(args[0]); err != nil {
			return err
		}
		s.changed()
		return nil
	case "proxy":
		if err := need(2); err != nil {
			return err
		}
		b, err := s.file(args[1])
		if err != nil {
			return err
		}
		node, err := parseNode(b)
		if err != nil {
			return fmt.Errorf("%s: %w", args[1], err)
		}
		s.proxies[args[0]] = &proxy{f: s.target.Connect(s.t, node)}
		return nil
	case "has", "lacks", "count", "field", "contains", "excludes":
		if err := need(2); err != nil {
			return err
		}
		res, err := s.resources(args[0], args[1])
		if err != nil {
			return err
		}
		return check(cmd, args[1], res, args[2:])
	case "case":
		if len(args) != 1 {
			return fmt.Errorf("case wants the name of an istiodref case")
		}
		return s.loadCase(args[0])
	case "istiod":
		return s.compareIstiod(args)
	}
	return fmt.Errorf("unknown command %q (apply, replace, delete, proxy, case, has, lacks, count, field, contains, excludes, istiod)", cmd)
}

func (s *script) changed() {
	for _, p := range s.proxies {
		p.cfg = nil
	}
}

// resources returns proxy's config of the TYPE word, fetching it if a
// change made it stale.
func (s *script) resources(name, word string) (map[string]json.RawMessage, error) {
	p, ok := s.proxies[name]
	if !ok {
		return nil, fmt.Errorf("no proxy %q (connect it with: proxy %s FILE)", name, name)
	}
	if _, ok := typeURLs[word]; !ok {
		return nil, fmt.Errorf("unknown type %q (cds, eds, lds, rds)", word)
	}
	if p.cfg == nil {
		cfg, err := fetchSidecar(p.f)
		if err != nil {
			return nil, err
		}
		p.cfg = cfg
	}
	out := make(map[string]json.RawMessage, len(p.cfg[word]))
	for n, a := range p.cfg[word] {
		j, err := marshalAny(a)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", word, n, err)
		}
		out[n] = j
	}
	return out, nil
}

// check evaluates one assertion over the resources of one type.
func check(cmd, word string, res map[string]json.RawMessage, args []string) error {
	names := func() string {
		ns := make([]string, 0, len(res))
		for n := range res {
			ns = append(ns, n)
		}
		slices.Sort(ns)
		return strings.Join(ns, "\n  ")
	}
	switch cmd {
	case "has", "lacks":
		for _, n := range args {
			if _, ok := res[n]; ok != (cmd == "has") {
				return fmt.Errorf("%s %s: %s %q; it has:\n  %s", cmd, word, map[bool]string{true: "found", false: "no"}[ok], n, names())
			}
		}
		return nil
	case "count":
		if len(args) != 1 {
			return fmt.Errorf("count wants one number")
		}
		n, err := strconv.Atoi(args[0])
		if err != nil {
			return err
		}
		if len(res) != n {
			return fmt.Errorf("%d %s resources, want %d:\n  %s", len(res), word, n, names())
		}
		return nil
	case "field", "contains", "excludes":
		if len(args) < 2 {
			return fmt.Errorf("%s wants a resource and %s", cmd, map[string]string{"field": "a path and a JSON value", "contains": "a text", "excludes": "a text"}[cmd])
		}
		r, ok := res[args[0]]
		if !ok {
			return fmt.Errorf("no %s resource %q; it has:\n  %s", word, args[0], names())
		}
		if text := strings.Join(args[1:], " "); cmd != "field" {
			if bytes.Contains(r, []byte(text)) != (cmd == "contains") {
				return fmt.Errorf("%s %s: %s %q:\n%s", word, args[0], map[string]string{"contains": "does not contain", "excludes": "contains"}[cmd], text, r)
			}
			return nil
		}
		if len(args) < 3 {
			return fmt.Errorf("field wants a resource, a path and a JSON value")
		}
		return checkField(r, args[1], strings.Join(args[2:], " "))
	}
	return fmt.Errorf("unknown assertion %q", cmd)
}

// parseNode reads a proxy file: YAML with id and metadata.
func parseNode(b []byte) (*corev3.Node, error) {
	var n struct {
		ID       string         `json:"id"`
		Metadata map[string]any `json:"metadata"`
	}
	if err := yaml.UnmarshalStrict(b, &n); err != nil {
		return nil, err
	}
	if n.ID == "" {
		return nil, fmt.Errorf("no id")
	}
	md, err := structpb.NewStruct(n.Metadata)
	if err != nil {
		return nil, err
	}
	return &corev3.Node{Id: n.ID, Metadata: md}, nil
}

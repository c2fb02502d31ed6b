package istiobench

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"text/template"
)

// Defaults of istiod's benchmarks (pilot/pkg/xds/bench_test.go). Some of its
// cases use other sizes (gateways: 1000 services; serviceentry-workloadentry:
// 1000 instances); ANCHOR.md beside the shared copy of these workloads
// lists them with istiod's numbers.
const (
	DefaultServices  = 100
	DefaultInstances = 1
)

// Params are the template inputs. Zero values take istiod's defaults.
type Params struct {
	// Services is the number of generated services (.Services).
	Services int
	// Instances is the number of generated instances (.Instances); only
	// serviceentry-workloadentry uses it.
	Instances int
}

func (p Params) withDefaults() (Params, error) {
	if p.Services < 0 || p.Instances < 0 {
		return p, fmt.Errorf("istiobench: %w: Services=%d Instances=%d (want >= 0)", ErrBadParams, p.Services, p.Instances)
	}
	if p.Services == 0 {
		p.Services = DefaultServices
	}
	if p.Instances == 0 {
		p.Instances = DefaultInstances
	}
	return p, nil
}

//go:embed workloads/*.yaml
var files embed.FS

// funcs are the template functions istiod's benchmark renders with.
var funcs = template.FuncMap{
	"until": func(n int) []int {
		s := make([]int, max(n, 0))
		for i := range s {
			s[i] = i
		}
		return s
	},
	"div": func(a, b int) (int, error) {
		if b == 0 {
			return 0, errors.New("div by zero")
		}
		return a / b, nil
	},
	"mod": func(a, b int) (int, error) {
		if b == 0 {
			return 0, errors.New("mod by zero")
		}
		return a % b, nil
	},
}

// templates parses every embedded workload once. A parse failure is a broken
// build (the files are embedded), hence the panic.
var templates = sync.OnceValue(func() map[string]*template.Template {
	entries, err := fs.ReadDir(files, "workloads")
	if err != nil {
		panic(fmt.Sprintf("istiobench: reading embedded workloads: %v", err))
	}
	m := make(map[string]*template.Template, len(entries))
	for _, e := range entries {
		name := strings.TrimSuffix(e.Name(), ".yaml")
		src, err := files.ReadFile(path.Join("workloads", e.Name()))
		if err != nil {
			panic(fmt.Sprintf("istiobench: reading embedded %s: %v", e.Name(), err))
		}
		t, err := template.New(e.Name()).Option("missingkey=error").Funcs(funcs).Parse(string(src))
		if err != nil {
			panic(fmt.Sprintf("istiobench: parsing embedded %s: %v", e.Name(), err))
		}
		m[name] = t
	}
	return m
})

// Names returns the workload names, sorted: "authorizationpolicy", "auto",
// ..., "http", ..., "virtualservice", "waypoint".
func Names() []string {
	names := make([]string, 0, len(templates()))
	for n := range templates() {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Render renders workload name with p and returns its multi-document YAML.
func Render(name string, p Params) ([]byte, error) {
	t, ok := templates()[name]
	if !ok {
		return nil, fmt.Errorf("istiobench: %w %q (known: %s)", ErrUnknownWorkload, name, strings.Join(Names(), ", "))
	}
	p, err := p.withDefaults()
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := t.Execute(&buf, p); err != nil {
		return nil, fmt.Errorf("istiobench: rendering %s with %+v: %w", name, p, err)
	}
	return buf.Bytes(), nil
}

// RenderAll renders every workload with p, keyed by name.
func RenderAll(p Params) (map[string][]byte, error) {
	out := make(map[string][]byte, len(templates()))
	for _, name := range Names() {
		b, err := Render(name, p)
		if err != nil {
			return nil, err
		}
		out[name] = b
	}
	return out, nil
}

// WriteDir renders workload name with p into dir/name.yaml, creating dir if
// needed. The file is replaced atomically (written to a temporary file that
// does not end in .yaml, then renamed), so a process watching dir never
// reads half a workload.
func WriteDir(dir string, name string, p Params) error {
	b, err := Render(name, p)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("istiobench: writing %s: %w", name, err)
	}
	dst := filepath.Join(dir, name+".yaml")
	f, err := os.CreateTemp(dir, "."+name+".yaml.tmp-*")
	if err != nil {
		return fmt.Errorf("istiobench: writing %s: %w", dst, err)
	}
	tmp := f.Name()
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, 0o644) // CreateTemp makes it 0600
	}
	if err == nil {
		err = os.Rename(tmp, dst)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("istiobench: writing %s: %w", dst, err)
	}
	return nil
}

package bench

import (
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/pilotfish-mesh/pilotfish/index"
	"github.com/pilotfish-mesh/pilotfish/ingest"
	"github.com/pilotfish-mesh/pilotfish/internal/istiobench"
)

// Workload is the configuration a scenario serves, as manifest files.
type Workload struct {
	// Name is an istiobench workload ("http", "virtualservice", ...) or the
	// directory the manifests were read from ("examples").
	Name string
	// Services is the istiobench size; 0 for a directory.
	Services int
	Files    []ManifestFile
}

// ManifestFile is one file of manifests (multi-document YAML or JSON).
type ManifestFile struct {
	Name string
	Data []byte
}

// ErrWorkload is returned for a workload that is neither an istiobench
// name nor a readable directory of manifests, or whose manifests are
// invalid.
var ErrWorkload = errors.New("bench: workload")

// LoadWorkload returns istiobench workload name rendered with services
// services or, when name is an existing directory (such as "examples" from
// the repository root), the manifests under it.
func LoadWorkload(name string, services int) (*Workload, error) {
	if fi, err := os.Stat(name); err == nil && fi.IsDir() {
		files, err := readManifestDir(name)
		if err != nil {
			return nil, err
		}
		return &Workload{Name: filepath.Base(filepath.Clean(name)), Files: files}, nil
	}
	if !slices.Contains(istiobench.Names(), name) {
		return nil, fmt.Errorf("%w: %q is neither a directory nor an istio-bench workload (%s)",
			ErrWorkload, name, strings.Join(istiobench.Names(), ", "))
	}
	y, err := istiobench.Render(name, istiobench.Params{Services: services})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrWorkload, err)
	}
	if services <= 0 {
		services = istiobench.DefaultServices
	}
	return &Workload{Name: name, Services: services, Files: []ManifestFile{{Name: name + ".yaml", Data: y}}}, nil
}

// readManifestDir reads every .yaml, .yml and .json file under dir, in
// path order, skipping hidden directories as the file source does.
func readManifestDir(dir string) ([]ManifestFile, error) {
	var files []ManifestFile
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != dir && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			return nil
		}
		switch strings.ToLower(filepath.Ext(path)) {
		case ".yaml", ".yml", ".json":
		default:
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files = append(files, ManifestFile{Name: path, Data: b})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrWorkload, err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%w: no manifests under %s", ErrWorkload, dir)
	}
	return files, nil
}

// String names the workload and its size: "http@100", "examples".
func (w *Workload) String() string {
	if w.Services > 0 {
		return fmt.Sprintf("%s@%d", w.Name, w.Services)
	}
	return w.Name
}

// ingester is pilotfish's config input as a Kubernetes or file source
// drives it: manifests are decoded, validated and converted to one index
// batch. It keeps its converter, so an object put again replaces the rows
// it produced before.
type ingester struct {
	w    *index.Writer
	conv *ingest.Converter
}

func newIngester(w *index.Writer) *ingester {
	return &ingester{w: w, conv: ingest.NewConverter(w, "cluster.local")}
}

// apply ingests files as one batch. Any decode or validation error fails it:
// a scenario must serve the workload it claims to.
func (in *ingester) apply(files ...ManifestFile) error {
	var b index.Batch
	for _, f := range files {
		objs, errs := ingest.Decode(f.Name, f.Data)
		if len(errs) > 0 {
			return fmt.Errorf("%w: %w (and %d more)", ErrWorkload, errs[0], len(errs)-1)
		}
		for i := range objs {
			if verrs := ingest.Validate(&objs[i]); len(verrs) > 0 {
				return fmt.Errorf("%w: %w", ErrWorkload, verrs[0])
			}
			in.conv.Put(&b, &objs[i])
		}
	}
	in.w.Apply(&b)
	return nil
}

// addedService is the manifest of the service added by config change i
// (1-based): a ServiceEntry like istio-bench's own, with a VIP and one
// endpoint, so every workload routes to it.
func addedService(i int) ManifestFile {
	y := fmt.Sprintf(`apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata:
  name: bench-added-%[1]d
spec:
  addresses:
  - 240.250.%[2]d.%[3]d
  hosts:
  - %[4]s
  ports:
  - number: 80
    name: http
    protocol: HTTP
  resolution: STATIC
  location: MESH_INTERNAL
  endpoints:
  - address: 240.251.%[2]d.%[3]d
    labels:
      security.istio.io/tlsMode: istio
`, i, i/250, i%250+1, addedHost(i))
	return ManifestFile{Name: fmt.Sprintf("bench-added-%d.yaml", i), Data: []byte(y)}
}

// addedHost is the host of the service added by change i.
func addedHost(i int) string { return fmt.Sprintf("bench-added-%d.example", i) }

// addedExpect is loadgen's ExpectResource for the config change: the
// outbound cluster of the added host ({i} is the change number).
const addedExpect = "cds/outbound|80||bench-added-{i}.example"

// endpointEdit is one endpoint change: the first endpoint of the first
// endpoint group of service (host, namespace) moves to addr.
type endpointEdit struct {
	Host, Namespace string
	Addr            netip.Addr
}

// applyEndpointEdit applies e to w as the endpoint input does: the group is
// replaced as a whole, so the change is endpoint-only (the EDS fast path
// where the engine has one).
func applyEndpointEdit(w *index.Writer, e endpointEdit) error {
	snap := w.Snapshot()
	_, id, ok := snap.LookupService(e.Host, e.Namespace)
	if !ok {
		return fmt.Errorf("bench: endpoint change: no service %s in %s", e.Host, e.Namespace)
	}
	key := snap.ServiceByID(id).Key
	shard := snap.Endpoints(key)
	if shard == nil || len(shard.Groups) == 0 || len(shard.Groups[0].Endpoints) == 0 {
		return fmt.Errorf("bench: endpoint change: service %s has no endpoints", e.Host)
	}
	g := shard.Groups[0]
	g.Endpoints = slices.Clone(g.Endpoints)
	g.Endpoints[0].Addr = e.Addr
	var b index.Batch
	b.PutEndpoints(key, g)
	w.Apply(&b)
	return nil
}

package istiodref

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// Proxy is one proxy of a case: how it connects, and the file its dump goes to.
type Proxy struct {
	// Name is the stem of its dump file, istiod/<Name>.json.
	Name string `json:"name"`
	// ID is its xDS node ID, type~ip~pod.namespace~namespace.svc.domain.
	ID string `json:"id"`
	// Metadata is the node metadata, as istio-agent sends it (NAMESPACE,
	// SERVICE_ACCOUNT, LABELS, INSTANCE_IPS, ISTIO_VERSION, CLUSTER_ID...).
	Metadata map[string]any `json:"metadata"`
}

// DebugID is the ID istiod's debug endpoints know the proxy by: pod.namespace.
func (p Proxy) DebugID() string {
	parts := strings.Split(p.ID, "~")
	if len(parts) != 4 {
		return p.ID
	}
	return parts[2]
}

// Case is one input of the reference.
type Case struct {
	Name    string
	Dir     string
	Config  []byte // config.yaml
	Mesh    []byte // mesh.yaml, nil for istiod's defaults
	Proxies []Proxy
}

// Dir returns the absolute directory of this package's cases.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "testdata")
}

// Cases lists the cases under Dir, by name.
func Cases() ([]string, error) { return CasesIn(Dir()) }

// CasesIn lists the cases under dir, by name.
func CasesIn(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if _, err := os.Stat(filepath.Join(dir, e.Name(), "proxies.yaml")); e.IsDir() && err == nil {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	return names, nil
}

// LoadCase reads the inputs of the case called name.
func LoadCase(name string) (*Case, error) { return LoadCaseIn(Dir(), name) }

// LoadCaseIn reads the inputs of the case called name under dir.
func LoadCaseIn(dir, name string) (*Case, error) {
	c := &Case{Name: name, Dir: filepath.Join(dir, name)}
	var err error
	if c.Config, err = os.ReadFile(filepath.Join(c.Dir, "config.yaml")); err != nil {
		return nil, err
	}
	if c.Mesh, err = os.ReadFile(filepath.Join(c.Dir, "mesh.yaml")); err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(c.Dir, "proxies.yaml"))
	if err != nil {
		return nil, err
	}
	var doc struct {
		Proxies []Proxy `json:"proxies"`
	}
	if err := yaml.UnmarshalStrict(b, &doc); err != nil {
		return nil, fmt.Errorf("%s/proxies.yaml: %w", name, err)
	}
	for i, p := range doc.Proxies {
		if p.Name == "" || len(strings.Split(p.ID, "~")) != 4 {
			return nil, fmt.Errorf("%s/proxies.yaml: proxies[%d]: want a name and an id type~ip~pod.ns~ns.svc.domain", name, i)
		}
	}
	c.Proxies = doc.Proxies
	return c, nil
}

// InputDigest is the digest of the case's inputs that istiod/inputs.sha256
// records.
func (c *Case) InputDigest() string {
	h := sha256.New()
	for _, f := range []struct {
		name string
		data []byte
	}{{"config.yaml", c.Config}, {"mesh.yaml", c.Mesh}} {
		fmt.Fprintf(h, "%s %d\n", f.name, len(f.data))
		h.Write(f.data)
	}
	p, _ := json.Marshal(c.Proxies)
	h.Write(p)
	return hex.EncodeToString(h.Sum(nil))
}

// DumpFile is where the producer writes p's config dump.
func (c *Case) DumpFile(p Proxy) string {
	return filepath.Join(c.Dir, "istiod", p.Name+".json")
}

// ExtensionFile holds the ECDS resources istiod sent p, when it sent any:
// a JSON list of google.protobuf.Any (TypedExtensionConfig), as sent
// (istiod's config dump cannot show Wasm extension configs).
func (c *Case) ExtensionFile(p Proxy) string {
	return filepath.Join(c.Dir, "istiod", p.Name+".ecds.json")
}

// DigestFile records the InputDigest the dumps were made from.
func (c *Case) DigestFile() string { return filepath.Join(c.Dir, "istiod", "inputs.sha256") }

package ingest

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/pilotfish-mesh/pilotfish/index"
	"github.com/pilotfish-mesh/pilotfish/internal/istiodref"
)

// TestDiscoverySelectorsMatchIstiod compares discoverySelectors with
// istiod's on case discovery-selectors, applied to a real API server: the
// services a KubeSource with the case's selectors indexes are those istiod
// made clusters of, and like istiod it reads neither the VirtualService of
// the namespace left out nor the DestinationRule of the root namespace
// (istio-system, not selected: no exception).
func TestDiscoverySelectorsMatchIstiod(t *testing.T) {
	c, err := istiodref.LoadCase("discovery-selectors")
	if err != nil {
		t.Fatal(err)
	}
	dump, err := istiodref.ReadDump(filepath.Join(c.Dir, "istiod", "client.json"))
	if err != nil {
		t.Fatal(err)
	}
	var istiodHosts []string
	for name := range dump.Clusters {
		if h, ok := strings.CutPrefix(name, "outbound|80||"); ok && strings.Contains(h, ".ds-") {
			istiodHosts = append(istiodHosts, h)
		}
	}
	slices.Sort(istiodHosts)
	raw, _ := json.Marshal(dump)
	istiodDR := strings.Contains(string(raw), `"maxConnections":7`)
	istiodVS := strings.Contains(string(raw), `"9s"`)

	var mesh struct {
		DiscoverySelectors []*metav1.LabelSelector `json:"discoverySelectors"`
	}
	if err := yaml.Unmarshal(c.Mesh, &mesh); err != nil || len(mesh.DiscoverySelectors) == 0 {
		t.Fatalf("mesh.yaml: %v", err)
	}
	e := newFilterEnv(t)
	e.namespace("istio-system", nil)
	if out, err := e.c.Kubectl(t, "apply", "--server-side", "-f", filepath.Join(c.Dir, "config.yaml")); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
	_, w := e.run(KubeSourceOptions{DiscoverySelectors: mesh.DiscoverySelectors})
	e.waitFor("ds-a indexed", func() string {
		if _, _, ok := w.Snapshot().LookupService("web.ds-a.svc.cluster.local", "ds-a"); !ok {
			return "no web.ds-a"
		}
		return ""
	})
	s := w.Snapshot()
	var hosts []string
	s.Services(func(_ index.ServiceID, v *index.Service) bool {
		if h := s.String(v.Key.Host); strings.Contains(h, ".ds-") {
			hosts = append(hosts, h)
		}
		return true
	})
	slices.Sort(hosts)
	if !slices.Equal(hosts, istiodHosts) {
		t.Errorf("services indexed %v, istiod's clusters %v", hosts, istiodHosts)
	}
	if dr := s.NumConfigs(index.ConfigDestinationRule) > 0; dr != istiodDR {
		t.Errorf("root namespace DestinationRule read: %v, istiod applied it: %v", dr, istiodDR)
	}
	if vs := s.NumConfigs(index.ConfigVirtualService) > 0; vs != istiodVS {
		t.Errorf("VirtualService of the namespace left out read: %v, istiod applied it: %v", vs, istiodVS)
	}
}

package ingest

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	networking "istio.io/api/networking/v1alpha3"

	"github.com/pilotfish-mesh/pilotfish/index"
	"github.com/pilotfish-mesh/pilotfish/internal/istiodref"
)

// TestRevisionMatchesIstiod compares the istio.io/rev rule with istiod's
// on case rev-config (istiod runs as the default revision, REVISION=
// default): the hosts whose route has the timeout of a VirtualService in
// istiod's RDS are the hosts of the VirtualServices a source of revision
// "default" reads (the unlabelled one and the one labelled default, not
// the one labelled canary, nor the one labelled prod, a revision tag of
// default: tags do not select config), and each timeout is the
// VirtualService's.
func TestRevisionMatchesIstiod(t *testing.T) {
	c, err := istiodref.LoadCase("rev-config")
	if err != nil {
		t.Fatal(err)
	}
	dump, err := istiodref.ReadDump(filepath.Join(c.Dir, "istiod", "client.json"))
	if err != nil {
		t.Fatal(err)
	}
	istiod := map[string]string{} // host → route timeout, for routes a VirtualService set
	for _, rc := range dump.Routes {
		vhs, _ := rc["virtualHosts"].([]any)
		for _, v := range vhs {
			vh, _ := v.(map[string]any)
			name, _ := vh["name"].(string)
			if !strings.HasSuffix(name, ".rev-shop.svc.cluster.local:80") {
				continue
			}
			routes, _ := vh["routes"].([]any)
			for _, r := range routes {
				route, _ := r.(map[string]any)["route"].(map[string]any)
				if to, _ := route["timeout"].(string); to != "" && to != "0s" {
					istiod[strings.TrimSuffix(name, ":80")] = to
				}
			}
		}
	}
	if len(istiod) == 0 {
		t.Fatal("no VirtualService routes of rev-shop in istiod's dump")
	}

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "config.yaml"), c.Config, 0o644); err != nil {
		t.Fatal(err)
	}
	w := index.NewWriter()
	src := NewFileSource(w, FileSourceOptions{Dir: dir, Resync: -1, Revision: "default"})
	if _, err := src.Sync(); err != nil {
		t.Fatal(err)
	}
	ours := map[string]string{}
	s := w.Snapshot()
	s.Configs(index.ConfigVirtualService, func(cfg *index.Config) bool {
		vs := cfg.Spec.(*networking.VirtualService)
		ours[vs.Hosts[0]] = vs.Http[0].Timeout.AsDuration().String()
		return true
	})
	hosts := func(m map[string]string) []string {
		var out []string
		for h, to := range m {
			out = append(out, h+"="+to)
		}
		slices.Sort(out)
		return out
	}
	if got, want := hosts(ours), hosts(istiod); !slices.Equal(got, want) {
		t.Errorf("VirtualServices read by revision default: %v; istiod's routes: %v", got, want)
	}
}

package ingest_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	networking "istio.io/api/networking/v1alpha3"

	"github.com/pilotfish-mesh/pilotfish/envoypatch"
	"github.com/pilotfish-mesh/pilotfish/ingest"
	"github.com/pilotfish-mesh/pilotfish/internal/istiodref"
)

// TestEnvoyFilterCaseMatchesIstiod: the EnvoyFilters of the istiod
// reference case envoyfilter-basic, which istiod accepted and applied (its
// dumps show every patch), are valid for pilotfish too and every patch
// value converts to its Envoy type; and the case's dumps hold what the
// next slice must reproduce (docs/envoyfilter-design.md): the selected
// proxy's patched and added clusters, the unselected proxy's untouched
// ones, and the inbound Lua filters in priority order, the namespace's
// priority -1 filter before the root namespace's.
func TestEnvoyFilterCaseMatchesIstiod(t *testing.T) {
	c, err := istiodref.LoadCase("envoyfilter-basic")
	if err != nil {
		t.Fatal(err)
	}
	objs, errs, warns := ingest.DecodeWithWarnings("config.yaml", c.Config)
	if len(errs) > 0 {
		t.Fatalf("decode: %s", errStrings(errs))
	}
	filters := 0
	for i := range objs {
		if verrs := ingest.Validate(&objs[i]); len(verrs) > 0 {
			t.Errorf("istiod accepted it, pilotfish refuses: %s", errStrings(verrs))
		}
		ef, ok := objs[i].Spec.(*networking.EnvoyFilter)
		if !ok {
			continue
		}
		filters++
		for j, cp := range ef.GetConfigPatches() {
			if _, err := envoypatch.Value(cp.GetApplyTo(), cp.GetPatch().GetValue()); err != nil {
				t.Errorf("%s patch %d: %v", objs[i].Meta.Name, j, err)
			}
		}
	}
	if filters != 3 || len(warns) != 0 {
		t.Fatalf("%d EnvoyFilters, %d warnings; want 3 and none (their patches are applied): %s", filters, len(warns), errStrings(warns))
	}

	dumps := map[string]string{}
	for _, p := range c.Proxies {
		d, err := istiodref.ReadDump(filepath.Join(c.Dir, "istiod", p.Name+".json"))
		if err != nil {
			t.Fatal(err)
		}
		ratings, _ := json.Marshal(d.Clusters["outbound|9080||ratings.efb.svc.cluster.local"])
		_, added := d.Clusters["rate-limit-service"]
		inbound, _ := json.Marshal(d.Listeners["virtualInbound"])
		dumps[p.Name] = string(ratings)
		in := string(inbound)
		first, mesh := strings.Index(in, `"first.lua"`), strings.Index(in, `"mesh.lua"`)
		if first < 0 || mesh < first || !strings.Contains(in[mesh:], `"envoy.filters.http.router"`) {
			t.Errorf("%s: istiod's inbound filter order: first.lua at %d, mesh.lua at %d, want both, in that order, before a router", p.Name, first, mesh)
		}
		if want := p.Name == "reviews"; added != want {
			t.Errorf("%s: istiod added rate-limit-service: %v, want %v", p.Name, added, want)
		}
	}
	if !strings.Contains(dumps["reviews"], `"connectTimeout":"3s"`) || strings.Contains(dumps["other"], `"connectTimeout":"3s"`) {
		t.Errorf("istiod's ratings cluster: selected %s\nunselected %s", dumps["reviews"], dumps["other"])
	}
}

package engine

import (
	"fmt"
	"strings"
	"testing"

	"github.com/pilotfish-mesh/pilotfish/internal/istiodref"
	"github.com/pilotfish-mesh/pilotfish/internal/scenario"
)

// securityFilterNames are the filters the authorization builders emit
// (HTTP and network), with jwt_authn, whose place CUSTOM's precedes.
var securityFilterNames = map[string]bool{
	"envoy.filters.http.rbac":         true,
	"envoy.filters.http.ext_authz":    true,
	"envoy.filters.http.jwt_authn":    true,
	"envoy.filters.network.rbac":      true,
	"envoy.filters.network.ext_authz": true,
}

// chainSecurityFilters lists, per filter chain of a listener in generic
// JSON (name#i), its security filters in order, network and HTTP.
func chainSecurityFilters(l map[string]any) map[string][]any {
	out := map[string][]any{}
	seen := map[string]int{}
	chains, _ := l["filterChains"].([]any)
	for _, c := range chains {
		fc, _ := c.(map[string]any)
		name, _ := fc["name"].(string)
		key := fmt.Sprintf("%s#%d", name, seen[name])
		seen[name]++
		fs := []any{}
		filters, _ := fc["filters"].([]any)
		for _, f := range filters {
			fm, _ := f.(map[string]any)
			n, _ := fm["name"].(string)
			if securityFilterNames[n] {
				fs = append(fs, fm)
			}
			if n != "envoy.filters.network.http_connection_manager" {
				continue
			}
			tc, _ := fm["typedConfig"].(map[string]any)
			hfs, _ := tc["httpFilters"].([]any)
			for _, hf := range hfs {
				hm, _ := hf.(map[string]any)
				if hn, _ := hm["name"].(string); securityFilterNames[hn] {
					fs = append(fs, hm)
				}
			}
		}
		out[key] = fs
	}
	return out
}

// TestExtAuthzMatchesIstiod (istiodref case authz-custom, whose mesh.yaml
// has an envoyExtAuthzHttp and an envoyExtAuthzGrpc provider with every
// field istiod reads): the mesh config goes through applyExtAuthzMesh as
// MeshSettings.Mesh does, and each sidecar's virtualInbound chains carry
// istiod's CUSTOM filters field by field and in its order: the RBAC
// shadow filter then ext_authz per provider (HTTP, and network for the
// gRPC provider on TCP chains), dry-run policies, then jwt_authn and the
// DENY policies; a provider whose service is missing, or two providers on
// one workload, deny what the policies match. The ingress gateway's
// listeners (an HTTP and a TCP server) carry the same filters as istiod's.
func TestExtAuthzMatchesIstiod(t *testing.T) {
	c, err := istiodref.LoadCase("authz-custom")
	if err != nil {
		t.Fatal(err)
	}
	mesh := telemetryCaseMesh(t, c)
	kinds := map[string]int{}
	var diffs []string
	eachRefProxy(t, c, caseEngine(t, c, Options{Mesh: mesh}), "", func(p *refProxy) {
		// Sidecars: virtualInbound; routers: every listener.
		p.eachListener(&diffs, func(name string, istiod, pilotfish map[string]any) {
			if name != "virtualInbound" && !strings.HasPrefix(p.ID, "router~") {
				return
			}
			want := chainSecurityFilters(istiod)
			have := chainSecurityFilters(pilotfish)
			for chain, w := range want {
				for _, f := range w {
					n, _ := f.(map[string]any)["name"].(string)
					kinds[n]++
				}
				scenario.Diff(p.Name+"/"+name+"/"+chain, any(w), any(have[chain]), &diffs)
			}
			if len(have) != len(want) {
				diffs = append(diffs, fmt.Sprintf("%s/%s: %d chains, istiod %d", p.Name, name, len(have), len(want)))
			}
		})
	})
	for _, d := range diffs {
		t.Error(d)
	}
	// The case is what this test means to compare.
	for _, n := range []string{"envoy.filters.http.ext_authz", "envoy.filters.network.ext_authz", "envoy.filters.http.rbac", "envoy.filters.network.rbac"} {
		if kinds[n] == 0 {
			t.Errorf("istiod's dumps have no %s filter", n)
		}
	}
	t.Logf("security filters compared: %v", kinds)
	if !strings.Contains(fmt.Sprint(mesh.ExtAuthz), "missing-svc") {
		t.Errorf("mesh lacks the missing-svc provider: %+v", mesh.ExtAuthz)
	}
}

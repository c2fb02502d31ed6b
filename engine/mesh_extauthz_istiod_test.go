package engine

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/inject"
	"github.com/pilotfish-mesh/pilotfish/internal/istiodref"
	"github.com/pilotfish-mesh/pilotfish/internal/scenario"
	"github.com/pilotfish-mesh/pilotfish/internal/xdstest"
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
	cfg, err := inject.ParseMesh(c.Mesh)
	if err != nil {
		t.Fatal(err)
	}
	mesh, err := MeshSettings{Config: cfg}.Mesh()
	if err != nil {
		t.Fatal(err)
	}
	sm := scenario.NewMesh()
	if err := sm.Apply(c.Name+"/config.yaml", c.Config); err != nil {
		t.Fatal(err)
	}
	e := New(sm.W, Options{Mesh: mesh})
	kinds := map[string]int{}
	for _, p := range c.Proxies {
		dump, err := istiodref.ReadDump(c.DumpFile(p))
		if err != nil {
			t.Fatalf("%v (make istiod-ref CASE=%s)", err, c.Name)
		}
		md, err := structpb.NewStruct(p.Metadata)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		conn, err := e.Connect(ctx, &corev3.Node{Id: p.ID, Metadata: md}, "")
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		rs, err := conn.Generate(encode.ListenerType, nil, true, nil)
		conn.Close()
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		// Sidecars: virtualInbound; routers: every listener.
		got := map[string]map[string]any{}
		for _, r := range rs {
			if r.Name != "virtualInbound" && !strings.HasPrefix(p.ID, "router~") {
				continue
			}
			var a anypb.Any
			if err := proto.Unmarshal(r.Any, &a); err != nil {
				t.Fatal(err)
			}
			m, err := a.UnmarshalNew()
			if err != nil {
				t.Fatal(err)
			}
			if err := xdstest.Validate(m); err != nil {
				t.Errorf("%s: %s: %v", p.Name, r.Name, err)
			}
			got[r.Name], _ = anyJSON(t, r.Any).(map[string]any)
		}
		for name, l := range dump.Listeners {
			if name != "virtualInbound" && !strings.HasPrefix(p.ID, "router~") {
				continue
			}
			if got[name] == nil {
				t.Errorf("%s: no listener %s", p.Name, name)
				continue
			}
			want := chainSecurityFilters(l)
			have := chainSecurityFilters(got[name])
			for chain, w := range want {
				for _, f := range w {
					n, _ := f.(map[string]any)["name"].(string)
					kinds[n]++
				}
				var diffs []string
				scenario.Diff(p.Name+"/"+name+"/"+chain, any(w), any(have[chain]), &diffs)
				for _, d := range diffs {
					t.Error(d)
				}
			}
			if len(have) != len(want) {
				t.Errorf("%s/%s: %d chains, istiod %d", p.Name, name, len(have), len(want))
			}
		}
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

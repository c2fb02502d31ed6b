package rules

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/internal/istiodref"
)

// The DestinationRule and ServiceEntry cases of internal/istiodref
// (config.yaml, proxies.yaml, and istiod's dump of each proxy under
// istiod/): pilotfish's CDS and EDS for the same input and proxy, compared
// with istiod's cluster by cluster and field by field, on the clusters of
// the case's own namespaces. A case without istiod's output is skipped.

// loadIstiodRefCase reads a case's inputs (internal/istiodref).
func loadIstiodRefCase(t *testing.T, name string) *istiodref.Case {
	t.Helper()
	c, err := istiodref.LoadCase(name)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// compareIstiodRef builds each proxy's CDS and EDS and compares the
// clusters whose name contains one of namespaces' hosts with istiod's.
func compareIstiodRef(t *testing.T, name string, hostPart string, known map[string]string) {
	c := loadIstiodRefCase(t, name)
	snap := lrLoad(t, map[string][]byte{"config.yaml": c.Config})
	mesh := encode.DefaultMesh()
	for _, p := range c.Proxies {
		t.Run(p.Name, func(t *testing.T) {
			file := c.DumpFile(p)
			if _, err := os.Stat(file); err != nil {
				t.Skipf("istiod's output not produced yet: %v", err)
			}
			abs, _ := filepath.Abs(file)
			want := readIstiodXDSFile(t, abs)
			n := refNode(t, p)
			class := ClassOf(snap, mesh.RootNamespace, n)
			sc := NewScope(snap, &class)
			sc.Instances = ComputeInstances(snap, n)
			sc.GatewayTargets = ComputeGatewayTargets(snap, n)
			rs, err := buildClusters(sc, mesh, verifyingCache(), nil, true, nil)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]any{}
			for i, cl := range decodeResources(t, rs, newCluster) {
				got[rs[i].Name] = protoJSON(t, cl)
			}
			ours := func(m map[string]any) []string {
				var out []string
				for k := range m {
					if strings.Contains(k, hostPart) {
						out = append(out, k)
					}
				}
				slices.Sort(out)
				return out
			}
			wantNames := ours(want.clusters)
			if len(wantNames) == 0 {
				t.Fatalf("istiod has no cluster of %q", hostPart)
			}
			if g := ours(got); !slices.Equal(g, wantNames) {
				t.Errorf("clusters\n got %q\nwant %q", g, wantNames)
			}
			var diffs []string
			for _, cn := range wantNames {
				if g, ok := got[cn]; ok {
					jsonDiff(cn, want.clusters[cn], g, &diffs)
				}
			}
			var edsNames []string
			for _, cn := range slices.Sorted(mapsKeys(want.endpoints)) {
				if strings.Contains(cn, hostPart) {
					edsNames = append(edsNames, cn)
				}
			}
			ers, err := buildEndpoints(sc, mesh, verifyingCache(), edsNames, false, nil)
			if err != nil {
				t.Fatal(err)
			}
			if g := resourceNames(ers); !slices.Equal(g, edsNames) {
				t.Errorf("EDS clusters\n got %q\nwant %q", g, edsNames)
			}
			for i, cla := range decodeResources(t, ers, newCLA) {
				jsonDiff(edsNames[i], want.endpoints[edsNames[i]], protoJSON(t, cla), &diffs)
			}
			t.Logf("%d clusters and %d EDS clusters compared", len(wantNames), len(edsNames))
		next:
			for _, d := range diffs {
				for pattern := range known {
					if strings.Contains(d, pattern) {
						continue next
					}
				}
				t.Error(d)
			}
		})
	}
}

// TestDestinationRuleMergeMatchesIstiod: case dr-merge.
func TestDestinationRuleMergeMatchesIstiod(t *testing.T) {
	compareIstiodRef(t, "dr-merge", "reviews.drmerge.", nil)
}

// TestDestinationRuleWorkloadSelectorMatchesIstiod: case dr-workloadselector.
func TestDestinationRuleWorkloadSelectorMatchesIstiod(t *testing.T) {
	compareIstiodRef(t, "dr-workloadselector", "api.drsel.", nil)
}

// TestServiceEntrySANsMatchIstiod: case se-sans.
func TestServiceEntrySANsMatchIstiod(t *testing.T) {
	compareIstiodRef(t, "se-sans", ".sesans.", nil)
}

// TestGatewayHashPolicyMatchesIstiod: case gw-hashpolicy, the router's
// route configurations compared with istiod's field by field.
func TestGatewayHashPolicyMatchesIstiod(t *testing.T) {
	c := loadIstiodRefCase(t, "gw-hashpolicy")
	file := c.DumpFile(c.Proxies[0])
	b, err := os.ReadFile(file)
	if err != nil {
		t.Skipf("istiod's output not produced yet: %v", err)
	}
	var dump struct {
		Configs []map[string]any `json:"configs"`
	}
	if err := json.Unmarshal(b, &dump); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{}
	for _, cm := range dump.Configs {
		if cm["@type"] != "type.googleapis.com/envoy.admin.v3.RoutesConfigDump" {
			continue
		}
		for _, d := range asList(cm["dynamicRouteConfigs"]) {
			rc := d.(map[string]any)["routeConfig"].(map[string]any)
			delete(rc, "@type")
			want[rc["name"].(string)] = rc
		}
	}
	snap := lrLoad(t, map[string][]byte{"config.yaml": c.Config})
	mesh := encode.DefaultMesh()
	n := refNode(t, c.Proxies[0])
	class := ClassOf(snap, mesh.RootNamespace, n)
	sc := NewScope(snap, &class)
	names := slices.Sorted(mapsKeys(want))
	rs, err := buildRoutes(sc, mesh, verifyingCache(), names, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if g := resourceNames(rs); !slices.Equal(g, names) {
		t.Fatalf("route configurations %q, want %q", g, names)
	}
	hashes := 0
	for i, rc := range decodeResources(t, rs, newRouteConfiguration) {
		for _, vh := range rc.GetVirtualHosts() {
			for _, r := range vh.GetRoutes() {
				hashes += len(r.GetRoute().GetHashPolicy())
			}
		}
		var diffs []string
		jsonDiff(names[i], want[names[i]], protoJSON(t, rc), &diffs)
		for _, d := range diffs {
			t.Error(d)
		}
	}
	if hashes != 3 {
		t.Errorf("%d hash policies, want 3", hashes)
	}
}

func newRouteConfiguration() *routev3.RouteConfiguration { return &routev3.RouteConfiguration{} }

// TestDestinationRuleTunnelMatchesIstiod: case dr-tunnel, the TCP proxies
// of the entries' outbound listeners compared with istiod's field by field.
func TestDestinationRuleTunnelMatchesIstiod(t *testing.T) {
	c := loadIstiodRefCase(t, "dr-tunnel")
	b, err := os.ReadFile(c.DumpFile(c.Proxies[0]))
	if err != nil {
		t.Skipf("istiod's output not produced yet: %v", err)
	}
	var dump struct {
		Configs []map[string]any `json:"configs"`
	}
	if err := json.Unmarshal(b, &dump); err != nil {
		t.Fatal(err)
	}
	// The tcp_proxy of each listener of the case's addresses.
	tcpProxies := func(l map[string]any) []any {
		var out []any
		for _, fc := range asList(l["filterChains"]) {
			for _, f := range asList(fc.(map[string]any)["filters"]) {
				if fm := f.(map[string]any); fm["name"] == "envoy.filters.network.tcp_proxy" {
					out = append(out, fm["typedConfig"])
				}
			}
		}
		return out
	}
	want := map[string][]any{}
	for _, cm := range dump.Configs {
		if cm["@type"] != "type.googleapis.com/envoy.admin.v3.ListenersConfigDump" {
			continue
		}
		for _, d := range asList(cm["dynamicListeners"]) {
			l := d.(map[string]any)["activeState"].(map[string]any)["listener"].(map[string]any)
			if name := l["name"].(string); strings.HasPrefix(name, "240.0.25.") {
				want[name] = tcpProxies(l)
			}
		}
	}
	snap := lrLoad(t, map[string][]byte{"config.yaml": c.Config})
	mesh := encode.DefaultMesh()
	n := refNode(t, c.Proxies[0])
	class := ClassOf(snap, mesh.RootNamespace, n)
	sc := NewScope(snap, &class)
	sc.Instances = ComputeInstances(snap, n)
	sc.GatewayTargets = ComputeGatewayTargets(snap, n)
	names := slices.Sorted(mapsKeys(want))
	if len(names) != 2 {
		t.Fatalf("istiod's listeners %q", names)
	}
	rs, err := buildListeners(sc, mesh, verifyingCache(), nil, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for i, l := range decodeResources(t, rs, newListener) {
		w, ok := want[rs[i].Name]
		if !ok {
			continue
		}
		seen++
		var got map[string]any
		j, _ := json.Marshal(protoJSON(t, l))
		_ = json.Unmarshal(j, &got)
		var diffs []string
		jsonDiff(rs[i].Name, w, tcpProxies(got), &diffs)
		for _, d := range diffs {
			t.Error(d)
		}
	}
	if seen != len(names) {
		t.Errorf("%d of istiod's listeners %q built", seen, names)
	}
}

func newListener() *listenerv3.Listener { return &listenerv3.Listener{} }

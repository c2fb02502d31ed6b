package rules

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/index"
	"github.com/pilotfish-mesh/pilotfish/internal/istiodref"
)

// The MeshConfig fields that shape listeners, routes and visibility,
// compared with istiod's output for the same mesh.yaml (internal/istiodref
// cases mesh-listener and mesh-exportto; engine.TestApplyListenerMeshCase
// holds engine's reading of the same files to the meshes below).

// meshListenerCase is case mesh-listener's mesh.yaml.
func meshListenerCase() *encode.Mesh {
	m := encode.DefaultMesh()
	m.RootNamespace = "mesh-root"
	m.PathNormalization = encode.PathNormalizeMergeSlashes
	m.DefaultRetry = encode.HTTPRetry{Set: true, Attempts: 4, RetryOn: "gateway-error,503", PerTryTimeout: 2 * time.Second, HasPerTryTimeout: true,
		RetryRemoteLocalities: true, HasIgnorePreviousHosts: true, Backoff: 25 * time.Millisecond, HasBackoff: true}
	m.InboundTrafficPolicy = encode.InboundLocalhost
	m.ProtocolDetectionTimeout = 5 * time.Second
	return m
}

// meshListenerDecodeCase is case mesh-listener-decode's mesh.yaml.
func meshListenerDecodeCase() *encode.Mesh {
	m := encode.DefaultMesh()
	m.RootNamespace = "mesh-root-dec"
	m.PathNormalization = encode.PathNormalizeDecodeAndMergeSlashes
	m.DefaultRetry = encode.HTTPRetry{Set: true}
	return m
}

// meshExportToCase is case mesh-exportto's mesh.yaml.
func meshExportToCase() *encode.Mesh {
	m := encode.DefaultMesh()
	m.DefaultServiceExportTo = []string{"."}
	m.DefaultVirtualServiceExportTo = []string{"."}
	m.DefaultDestinationRuleExportTo = []string{".", "exb"}
	return m
}

// meshCaseXDS is pilotfish's xDS for one proxy of a case, as generic JSON
// by type and name.
type meshCaseXDS map[string]map[string]any

// buildMeshCase builds every listener, route configuration and cluster of
// proxy p of case c with mesh, as the engine would (the mesh's views, the
// scope's mesh for its Sidecar).
func buildMeshCase(t *testing.T, snap *index.Snapshot, mesh *encode.Mesh, p istiodref.Proxy, routes []string) meshCaseXDS {
	t.Helper()
	var views Views
	views.SetMesh(mesh)
	node := refNode(t, p)
	class := ClassOfIn(&views, snap, mesh.RootNamespace, node)
	sc := NewScopeIn(views.Of(snap), snap, &class)
	sc.Instances = ComputeInstances(snap, node)
	sc.GatewayTargets = ComputeGatewayTargets(snap, node)
	m := NewMeshes(mesh).For(sc)
	cache := verifyingCache()
	out := meshCaseXDS{}
	for _, typ := range []string{encode.ListenerType, encode.ClusterType, encode.RouteConfigurationType} {
		names, wildcard := []string(nil), true
		if typ == encode.RouteConfigurationType {
			names, wildcard = routes, false
		}
		rs, err := Build(typ, sc, m, cache, names, wildcard, nil)
		if err != nil {
			t.Fatal(err)
		}
		out[typ] = map[string]any{}
		switch typ {
		case encode.ListenerType:
			for i, l := range decodeListeners(t, rs) {
				out[typ][rs[i].Name] = protoJSON(t, l)
			}
		case encode.ClusterType:
			for i, cl := range decodeResources(t, rs, newCluster) {
				out[typ][rs[i].Name] = protoJSON(t, cl)
			}
		default:
			for i, rc := range decodeRoutes(t, rs) {
				out[typ][rs[i].Name] = protoJSON(t, rc)
			}
		}
	}
	return out
}

// compareMeshCase compares, for every proxy of case name, the resources
// istiod sent with pilotfish's built with mesh: the same names, and field
// by field those whose name holds one of only (all when empty). Differences
// containing one of known are documented elsewhere and skipped.
func compareMeshCase(t *testing.T, name string, mesh *encode.Mesh, known []string) map[string]meshCaseXDS {
	c, err := istiodref.LoadCase(name)
	if err != nil {
		t.Fatal(err)
	}
	snap := lrLoad(t, map[string][]byte{"config.yaml": c.Config})
	got := map[string]meshCaseXDS{}
	for _, p := range c.Proxies {
		t.Run(p.Name, func(t *testing.T) {
			dump, err := istiodref.ReadDump(c.DumpFile(p))
			if err != nil {
				t.Fatalf("istiod's output (make istiod-ref CASE=%s): %v", name, err)
			}
			x := buildMeshCase(t, snap, mesh, p, slices.Sorted(mapsKeys(dump.Routes)))
			got[p.Name] = x
			var diffs []string
			for _, tc := range []struct {
				typ  string
				want map[string]map[string]any
			}{{encode.ListenerType, dump.Listeners}, {encode.ClusterType, dump.Clusters}, {encode.RouteConfigurationType, dump.Routes}} {
				g := x[tc.typ]
				keep := func(n string) bool {
					return !slices.ContainsFunc(known, func(k string) bool { return strings.Contains(n, k) })
				}
				w, gn := slices.Sorted(mapsKeys(tc.want)), slices.Sorted(mapsKeys(g))
				w, gn = slices.DeleteFunc(w, func(n string) bool { return !keep(n) }), slices.DeleteFunc(gn, func(n string) bool { return !keep(n) })
				if !slices.Equal(w, gn) {
					t.Errorf("%s names\n got %q\nwant %q", tc.typ, gn, w)
				}
				for n, w := range tc.want {
					if gv, ok := g[n]; ok {
						delete(w, "@type")
						jsonDiff(n, w, gv, &diffs)
					}
				}
			}
		next:
			for _, d := range diffs {
				for _, k := range known {
					if strings.Contains(d, k) {
						continue next
					}
				}
				t.Error(d)
			}
		})
	}
	return got
}

// meshKnown are differences of the cases' resources that have nothing to
// do with the mesh fields compared: tracing (telemetry, not generated),
// the API server's own kubernetes.default service (not in config.yaml),
// and the gateway HTTP connection manager's fields pilotfish writes apart
// from istiod (its filters, 100-continue, the stat prefix's ";", the accept
// batch size), as in every gateway case with istiod's defaults.
var meshKnown = []string{"typedConfig.tracing", "kubernetes.default.", "_8080.filterChains[0].filters[0].typedConfig.httpFilters",
	"typedConfig.proxy100Continue", "typedConfig.statPrefix: want \"outbound_0.0.0.0_8080;\"", "0.0.0.0_8080.maxConnectionsToAcceptPerSocketEvent"}

// TestMeshListenerMatchesIstiod: case mesh-listener (rootNamespace
// mesh-root, MERGE_SLASHES, a default retry policy, LOCALHOST inbound
// traffic, a 5s protocol detection timeout): every listener, cluster and
// route configuration of a sidecar and of a gateway, field by field. The
// same comparison with istiod's default mesh must find differences: the
// case's output depends on each field.
func TestMeshListenerMatchesIstiod(t *testing.T) {
	got := compareMeshCase(t, "mesh-listener", meshListenerCase(), meshKnown)
	if len(got) != 2 {
		t.Fatalf("%d proxies compared", len(got))
	}
	t.Run("default mesh differs", func(t *testing.T) {
		if n := countMeshDiffs(t, "mesh-listener", encode.DefaultMesh()); n == 0 {
			t.Error("the default mesh gives istiod's output for mesh-listener's mesh.yaml: the case proves nothing")
		}
	})
	// Each field on its own changes output istiod's matches.
	for name, undo := range map[string]func(m *encode.Mesh){
		"rootNamespace":            func(m *encode.Mesh) { m.RootNamespace = "istio-system" },
		"pathNormalization":        func(m *encode.Mesh) { m.PathNormalization = encode.PathNormalizeBase },
		"defaultHttpRetryPolicy":   func(m *encode.Mesh) { m.DefaultRetry = encode.HTTPRetry{} },
		"inboundTrafficPolicy":     func(m *encode.Mesh) { m.InboundTrafficPolicy = encode.InboundPassthrough },
		"protocolDetectionTimeout": func(m *encode.Mesh) { m.ProtocolDetectionTimeout = 0 },
	} {
		t.Run("without "+name, func(t *testing.T) {
			m := meshListenerCase()
			undo(m)
			if n := countMeshDiffs(t, "mesh-listener", m); n == 0 {
				t.Errorf("%s at istiod's default still gives istiod's output for mesh.yaml's value", name)
			}
		})
	}
}

// TestMeshListenerDecodeMatchesIstiod: case mesh-listener-decode (the
// same config, DECODE_AND_MERGE_SLASHES and retries off by default).
func TestMeshListenerDecodeMatchesIstiod(t *testing.T) {
	compareMeshCase(t, "mesh-listener-decode", meshListenerDecodeCase(), meshKnown)
	for name, undo := range map[string]func(m *encode.Mesh){
		"pathNormalization":      func(m *encode.Mesh) { m.PathNormalization = encode.PathNormalizeMergeSlashes },
		"defaultHttpRetryPolicy": func(m *encode.Mesh) { m.DefaultRetry = encode.HTTPRetry{} },
	} {
		t.Run("without "+name, func(t *testing.T) {
			m := meshListenerDecodeCase()
			undo(m)
			if n := countMeshDiffs(t, "mesh-listener-decode", m); n == 0 {
				t.Errorf("%s changed still gives istiod's output", name)
			}
		})
	}
}

// countMeshDiffs is compareMeshCase's count of differences, not reported.
func countMeshDiffs(t *testing.T, name string, mesh *encode.Mesh) int {
	t.Helper()
	c, err := istiodref.LoadCase(name)
	if err != nil {
		t.Fatal(err)
	}
	snap := lrLoad(t, map[string][]byte{"config.yaml": c.Config})
	n := 0
	for _, p := range c.Proxies {
		dump, err := istiodref.ReadDump(c.DumpFile(p))
		if err != nil {
			t.Fatal(err)
		}
		x := buildMeshCase(t, snap, mesh, p, slices.Sorted(mapsKeys(dump.Routes)))
		var diffs []string
		for typ, want := range map[string]map[string]map[string]any{encode.ListenerType: dump.Listeners, encode.ClusterType: dump.Clusters, encode.RouteConfigurationType: dump.Routes} {
			for rn, w := range want {
				if g, ok := x[typ][rn]; ok {
					delete(w, "@type")
					jsonDiff(rn, w, g, &diffs)
				} else if !slices.ContainsFunc(meshKnown, func(k string) bool { return strings.Contains(rn, k) }) {
					diffs = append(diffs, rn+": missing")
				}
			}
		}
		for _, d := range diffs {
			if !slices.ContainsFunc(meshKnown, func(k string) bool { return strings.Contains(d, k) }) {
				n++
			}
		}
	}
	return n
}

// TestMeshExportToMatchesIstiod: case mesh-exportto (services and
// VirtualServices without exportTo stay in their namespace, DestinationRules
// without exportTo default to [".", exb], of which istiod honours only
// "."): the clusters, listeners and routes of a client in each namespace.
func TestMeshExportToMatchesIstiod(t *testing.T) {
	got := compareMeshCase(t, "mesh-exportto", meshExportToCase(), meshKnown)
	if len(got) != 3 {
		t.Fatalf("%d proxies compared", len(got))
	}
	for name, undo := range map[string]func(m *encode.Mesh){
		"defaultServiceExportTo":         func(m *encode.Mesh) { m.DefaultServiceExportTo = nil },
		"defaultVirtualServiceExportTo":  func(m *encode.Mesh) { m.DefaultVirtualServiceExportTo = nil },
		"defaultDestinationRuleExportTo": func(m *encode.Mesh) { m.DefaultDestinationRuleExportTo = nil },
	} {
		t.Run("without "+name, func(t *testing.T) {
			m := meshExportToCase()
			undo(m)
			if n := countMeshDiffs(t, "mesh-exportto", m); n == 0 {
				t.Errorf("%s unset still gives istiod's output for mesh.yaml's value", name)
			}
		})
	}
}

package engine

import (
	"slices"
	"strings"
	"testing"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/internal/istiodref"
	"github.com/pilotfish-mesh/pilotfish/internal/scenario"
)

// The mesh-cluster-* cases of internal/istiodref: istiod run with the
// case's mesh.yaml; pilotfish's engine with the mesh applyClusterMesh makes
// of the same file. Each proxy's clusters and endpoints of the case's
// hosts are compared with istiod's field by field.

// compareMeshClusterCase compares the CDS and EDS resources whose name
// contains hostPart; a difference containing a key of known is a
// documented one (its value says why) and is only logged.
func compareMeshClusterCase(t *testing.T, name, hostPart string, known map[string]string, listeners ...string) {
	t.Helper()
	c := loadMeshCase(t, name)
	mesh, err := meshFromYAML(t, string(c.Mesh))
	if err != nil {
		t.Fatalf("%s/mesh.yaml: %v", name, err)
	}
	for proxy, diffs := range meshCaseDiffs(t, c, mesh, hostPart, listeners...) {
	next:
		for _, d := range diffs {
			for pattern, why := range known {
				if strings.Contains(d, pattern) {
					t.Logf("%s: known difference (%s): %s", proxy, why, d)
					continue next
				}
			}
			t.Errorf("%s: %s", proxy, d)
		}
	}
}

// meshCaseDiffs runs the engine with mesh on the case's config and returns
// each proxy's differences from istiod on the resources of hostPart.
func meshCaseDiffs(t *testing.T, c *istiodref.Case, mesh *encode.Mesh, hostPart string, listeners ...string) map[string][]string {
	t.Helper()
	e := caseEngine(t, c, Options{Mesh: mesh})
	out := map[string][]string{}
	for _, p := range c.Proxies {
		dump, err := istiodref.ReadDump(c.DumpFile(p))
		if err != nil {
			t.Fatal(err)
		}
		conn := connectNode(t, e, refNode(t, p.ID, p.Metadata))
		var diffs []string
		nc := compareResources(t, conn, encode.ClusterType, nil, true, dump.Clusters, hostPart, &diffs)
		var edsNames []string
		for n := range dump.Endpoints {
			if strings.Contains(n, hostPart) {
				edsNames = append(edsNames, n)
			}
		}
		slices.Sort(edsNames)
		ne := compareResources(t, conn, encode.ClusterLoadAssignmentType, edsNames, false, dump.Endpoints, hostPart, &diffs)
		// Listeners: only their transport sockets (what the mesh's TLS
		// settings change; the rest is the listener generators' and has
		// differences of its own).
		nl := 0
		for _, l := range listeners {
			if _, ok := dump.Listeners[l]; ok {
				var ld []string
				nl += compareResources(t, conn, encode.ListenerType, nil, true, dump.Listeners, l, &ld)
				for _, d := range ld {
					if strings.Contains(d, ".transportSocket") {
						diffs = append(diffs, d)
					}
				}
			}
		}
		t.Logf("%s: %d clusters, %d assignments and %d listeners compared, %d differences", p.Name, nc, ne, nl, len(diffs))
		conn.Close()
		out[p.Name] = diffs
	}
	return out
}

// compareResources generates typeURL's resources for conn and appends to
// diffs how those whose name contains hostPart differ from want's.
func compareResources(t *testing.T, conn *Conn, typeURL string, names []string, wildcard bool, want map[string]map[string]any, hostPart string, diffs *[]string) int {
	t.Helper()
	rs, err := conn.Generate(typeURL, names, wildcard, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]any{}
	for _, r := range rs {
		if strings.Contains(r.Name, hostPart) {
			got[r.Name] = anyJSON(t, r.Any)
		}
	}
	var wantNames []string
	for n := range want {
		if strings.Contains(n, hostPart) {
			wantNames = append(wantNames, n)
		}
	}
	slices.Sort(wantNames)
	if len(wantNames) == 0 && !wildcard {
		return 0 // no assignment of these clusters requested
	}
	if len(wantNames) == 0 {
		t.Fatalf("istiod sent no %s of %q", typeURL, hostPart)
	}
	gotNames := slices.Sorted(func(yield func(string) bool) {
		for n := range got {
			if !yield(n) {
				return
			}
		}
	})
	if !slices.Equal(gotNames, wantNames) {
		t.Errorf("%s names\n got %q\nwant %q", typeURL, gotNames, wantNames)
	}
	for _, n := range wantNames {
		if g, ok := got[n]; ok {
			scenario.Diff(n, any(want[n]), g, diffs)
		}
	}
	return len(wantNames)
}

// TestMeshClusterSettingsMatchIstiod: case mesh-cluster (connectTimeout,
// h2UpgradePolicy, tcpKeepalive, dnsRefreshRate, localityLbSetting
// failover, tlsDefaults, serviceSettings) against istiod's output.
func TestMeshClusterSettingsMatchIstiod(t *testing.T) {
	compareMeshClusterCase(t, "mesh-cluster", ".meshcl.", nil)
	// BlackHoleCluster, PassthroughCluster, InboundPassthroughCluster.
	compareMeshClusterCase(t, "mesh-cluster", "Cluster", nil)
}

// TestMeshClusterCaseSeesEveryField: the comparisons can fail. With
// istiod's default mesh instead of a case's, pilotfish's output differs
// from istiod's on each field the case's mesh.yaml sets.
func TestMeshClusterCaseSeesEveryField(t *testing.T) {
	for _, tc := range []struct {
		name  string
		parts []string          // compared: the resources whose names contain one
		paths map[string]string // field: a path of the differences it makes
	}{
		{"mesh-cluster", []string{".meshcl."}, map[string]string{
			"connectTimeout":    ".connectTimeout",
			"h2UpgradePolicy":   "http2ProtocolOptions",
			"tcpKeepalive":      ".upstreamConnectionOptions",
			"dnsRefreshRate":    ".dnsRefreshRate",
			"localityLbSetting": ".priority",
			"tlsDefaults":       ".ecdhCurves",
		}},
		{"mesh-cluster-distribute", []string{".meshcl2."}, map[string]string{
			"enableAutoMtls":    ".transportSocketMatches",
			"localityLbSetting": ".loadBalancingWeight",
		}},
		{"mesh-cluster-nolocality", []string{".meshcl3."}, map[string]string{
			"localityLbSetting": ".priority",
		}},
		{"mesh-cluster-defaultpolicy", []string{".meshcl4.", "Cluster", "inbound|"}, map[string]string{
			"defaultTrafficPolicy.connectionPool":   ".circuitBreakers",
			"defaultTrafficPolicy.outlierDetection": ".outlierDetection",
			"inbound connection pool":               "inbound|8080||.circuitBreakers",
			"passthrough connection pool":           "PassthroughCluster.circuitBreakers",
		}},
		{"mesh-cluster-tls", []string{".meshtls."}, map[string]string{
			"tlsDefaults":            "ecdhCurves",
			"meshMTLS":               "tlsParams.tlsMinimumProtocolVersion",
			"trust domains of peers": "matchSubjectAltNames",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := loadMeshCase(t, tc.name)
			var all []string
			for _, part := range tc.parts {
				for _, diffs := range meshCaseDiffs(t, c, encode.DefaultMesh(), part, "virtualInbound", "0.0.0.0_443") {
					all = append(all, diffs...)
				}
			}
			joined := strings.Join(all, "\n")
			for field, path := range tc.paths {
				if !strings.Contains(joined, path) {
					t.Errorf("%s: no difference at %s with the default mesh:\n%s", field, path, joined)
				}
			}
		})
	}
}

// TestMeshLocalityDistributeMatchesIstiod: case mesh-cluster-distribute
// (localityLbSetting.distribute mesh-wide, a rule disabling it on one
// port, enableAutoMtls false).
func TestMeshLocalityDistributeMatchesIstiod(t *testing.T) {
	compareMeshClusterCase(t, "mesh-cluster-distribute", ".meshcl2.", nil)
}

// TestMeshLocalityDisabledMatchesIstiod: case mesh-cluster-nolocality
// (localityLbSetting enabled: false mesh-wide, a rule enabling it again;
// connectTimeout).
func TestMeshLocalityDisabledMatchesIstiod(t *testing.T) {
	compareMeshClusterCase(t, "mesh-cluster-nolocality", ".meshcl3.", nil)
	compareMeshClusterCase(t, "mesh-cluster-nolocality", "Cluster", nil)
}

// TestMeshTLSMatchesIstiod: case mesh-cluster-tls (tlsDefaults on gateway
// servers and originated TLS, meshMTLS on the sidecar's inbound mTLS):
// clusters, and the listeners virtualInbound and the gateway's 443.
func TestMeshTLSMatchesIstiod(t *testing.T) {
	compareMeshClusterCase(t, "mesh-cluster-tls", ".meshtls.", map[string]string{
		"sdsConfig.initialFetchTimeout": "pilotfish's ADS source of credentialName secrets sets 0s, istiod's none (as in gw-tls-files)",
	}, "virtualInbound", "0.0.0.0_443")
}

// TestMeshDefaultTrafficPolicyMatchesIstiod: case
// mesh-cluster-defaultpolicy (defaultTrafficPolicy under rules, subsets,
// inbound and passthrough clusters, DNS and EDS localities).
func TestMeshDefaultTrafficPolicyMatchesIstiod(t *testing.T) {
	compareMeshClusterCase(t, "mesh-cluster-defaultpolicy", ".meshcl4.", map[string]string{
		"web.meshcl4.svc.cluster.local.endpoints[0].locality": "istiod reads a pod's locality from its label topology.istio.io/locality; pilotfish's Kubernetes source does not (not a mesh config matter)",
	})
	compareMeshClusterCase(t, "mesh-cluster-defaultpolicy", "Cluster", nil)
	compareMeshClusterCase(t, "mesh-cluster-defaultpolicy", "inbound|", nil)
}

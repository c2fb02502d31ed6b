package rules

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/index"
	"github.com/pilotfish-mesh/pilotfish/internal/meshgen"
)

// namespaceSidecars gives each of n namespaces a Sidecar importing only
// itself.
func namespaceSidecars(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "apiVersion: networking.istio.io/v1\nkind: Sidecar\nmetadata: {name: default, namespace: ns-%d}\nspec:\n  egress: [{hosts: [\"./*\"]}]\n---\n", i)
	}
	return b.String()
}

// onlyNamespace keeps the documents of one namespace of a manifest stream.
func onlyNamespace(y []byte, ns string) string {
	var keep []string
	for _, doc := range strings.Split(string(y), "---\n") {
		if strings.Contains(doc, "namespace: "+ns+"\n") {
			keep = append(keep, doc)
		}
	}
	return strings.Join(keep, "---\n")
}

// proxyConfig is a sidecar's whole config: CDS, EDS for every cluster,
// LDS, the RDS its listeners name, NDS.
type proxyConfig struct {
	resources map[string][]Resource
	bytes     int
	count     int
}

func buildProxyConfig(tb testing.TB, sc *Scope, mesh *encode.Mesh, cache *encode.Cache) proxyConfig {
	tb.Helper()
	pc := proxyConfig{resources: map[string][]Resource{}}
	add := func(typeURL string, rs []Resource, err error) {
		if err != nil {
			tb.Fatal(err)
		}
		pc.resources[typeURL] = rs
		pc.count += len(rs)
		for _, r := range rs {
			pc.bytes += len(r.Any)
		}
	}
	rs, err := buildClusters(sc, mesh, cache, nil, true, nil)
	add(TypeCluster, rs, err)
	rs, err = buildEndpoints(sc, mesh, cache, clusterNamesForEDS(sc, mesh, nil), false, nil)
	add(TypeEndpoint, rs, err)
	rs, err = buildListeners(sc, mesh, cache, nil, true, nil)
	add(TypeListener, rs, err)
	rs, err = buildRoutes(sc, mesh, cache, nil, true, nil)
	add(TypeRoute, rs, err)
	rs, err = buildNameTable(sc, mesh, cache, nil, true, nil)
	add(TypeNameTable, rs, err)
	return pc
}

// scopedMeshes returns a mesh of services spread over namespaces, each
// namespace under a Sidecar importing only itself, and a mesh holding
// namespace ns-3 alone (no Sidecar).
func scopedMeshes(tb testing.TB, services, namespaces int) (scoped, alone *index.Snapshot) {
	y := meshgen.Kubernetes(meshgen.Params{Services: services, EndpointsPerService: 2, Namespaces: namespaces})
	scoped = newScopedWriter(tb, string(y), namespaceSidecars(namespaces)).w.Snapshot()
	alone = newScopedWriter(tb, onlyNamespace(y, "ns-3")).w.Snapshot()
	return scoped, alone
}

func scopeOf(e *testEngine, snap *index.Snapshot, ns string) *Scope {
	node := &Node{ID: "p." + ns, Type: encode.ProxySidecar, Namespace: ns, IstioVersion: "1.31", ClusterID: "Kubernetes"}
	class := e.classOf(snap, node)
	return NewScope(snap, &class)
}

// TestSidecarScopedConfigIsTheNamespaces: in a 2,000-service mesh of 20
// namespaces, each under a Sidecar importing only itself, a proxy's whole
// config (every type, resource for resource, byte for byte) is the config
// it would get in a mesh holding its namespace alone: it pays nothing for
// the other 1,900 services.
func TestSidecarScopedConfigIsTheNamespaces(t *testing.T) {
	scoped, alone := scopedMeshes(t, 2000, 20)
	e := newTestEngine(index.NewWriter(), testOptions{})
	mesh := encode.DefaultMesh()
	sc := scopeOf(e, scoped, "ns-3")
	if sc.Class.Sidecar != "ns-3/default" || len(sc.Services) != 100 {
		t.Fatalf("scope: Sidecar %q, %d services, want ns-3/default and 100", sc.Class.Sidecar, len(sc.Services))
	}
	got := buildProxyConfig(t, sc, mesh, verifyCache())
	want := buildProxyConfig(t, scopeOf(e, alone, "ns-3"), mesh, verifyCache())
	for _, typeURL := range []string{TypeCluster, TypeEndpoint, TypeListener, TypeRoute, TypeNameTable} {
		g, w := got.resources[typeURL], want.resources[typeURL]
		if len(g) != len(w) {
			t.Errorf("%s: %d resources, the namespace alone has %d", typeURL, len(g), len(w))
			continue
		}
		for i := range g {
			if g[i].Name != w[i].Name || !sameResource(t, g[i].Any, w[i].Any) {
				t.Errorf("%s: resource %d is %q (%d bytes), the namespace alone's is %q (%d bytes)",
					typeURL, i, g[i].Name, len(g[i].Any), w[i].Name, len(w[i].Any))
				break
			}
		}
	}
	if got.count != want.count || got.bytes != want.bytes {
		t.Errorf("scoped proxy: %d resources, %d bytes; namespace alone: %d, %d", got.count, got.bytes, want.count, want.bytes)
	}
}

// sameResource compares two Any-encoded resources: equal bytes, or equal
// messages (protobuf map fields, such as a cluster's metadata Struct, may
// marshal in different orders).
func sameResource(t *testing.T, a, b []byte) bool {
	if string(a) == string(b) {
		return true
	}
	var x, y anypb.Any
	if proto.Unmarshal(a, &x) != nil || proto.Unmarshal(b, &y) != nil {
		t.Fatal("resource is not an encoded Any")
	}
	mx, err1 := x.UnmarshalNew()
	my, err2 := y.UnmarshalNew()
	if err1 != nil || err2 != nil {
		return false
	}
	return proto.Equal(mx, my)
}

// BenchmarkSidecarScopedProxy: a proxy's full config on a 10,000-service
// mesh of 100 namespaces where each namespace's Sidecar imports only
// itself, against the same namespace as a mesh of its own (100 services)
// and against an unscoped proxy of the 10,000-service mesh. cold: new
// scope, empty cache; warm: new scope, cached parts (a push after a change
// elsewhere that the engine did not skip).
func BenchmarkSidecarScopedProxy(b *testing.B) {
	scoped, alone := scopedMeshes(b, 10000, 100)
	e := newTestEngine(index.NewWriter(), testOptions{})
	mesh := encode.DefaultMesh()
	cases := []struct {
		name  string
		snap  *index.Snapshot
		ns    string
		class func() *encode.ProxyClass
	}{
		{"scoped-10000", scoped, "ns-3", nil},
		{"namespace-alone-100", alone, "ns-3", nil},
		{"unscoped-10000", scoped, "unscoped", nil},
	}
	for _, c := range cases {
		for _, mode := range []string{"cold", "warm"} {
			b.Run(c.name+"/"+mode, func(b *testing.B) {
				cache := encode.NewCache()
				pc := buildProxyConfig(b, scopeOf(e, c.snap, c.ns), mesh, cache)
				b.ReportAllocs()
				cpu := processCPU()
				for b.Loop() {
					if mode == "cold" {
						cache = encode.NewCache()
					}
					buildProxyConfig(b, scopeOf(e, c.snap, c.ns), mesh, cache)
				}
				reportCPU(b, cpu)
				b.ReportMetric(float64(pc.bytes), "bytes/proxy")
				b.ReportMetric(float64(pc.count), "resources/proxy")
			})
		}
	}
}

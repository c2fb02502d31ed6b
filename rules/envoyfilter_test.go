package rules

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/envoypatch"
	"github.com/pilotfish-mesh/pilotfish/index"
	"github.com/pilotfish-mesh/pilotfish/ingest"
)

// efMesh: two services in namespace efm, and EnvoyFilters of several
// priorities, namespaces and selectors. Creation times order the equal
// priorities.
const efMesh = `
apiVersion: v1
kind: Namespace
metadata: {name: efm}
---
apiVersion: v1
kind: Service
metadata: {name: reviews, namespace: efm}
spec:
  clusterIP: 10.96.40.10
  ports: [{name: http, port: 9080, targetPort: 9080}]
  selector: {app: reviews}
---
apiVersion: v1
kind: Service
metadata: {name: ratings, namespace: efm}
spec:
  clusterIP: 10.96.40.11
  ports: [{name: http, port: 9080, targetPort: 9080}]
  selector: {app: ratings}
---
apiVersion: networking.istio.io/v1alpha3
kind: EnvoyFilter
metadata: {name: ns-late, namespace: efm, creationTimestamp: "2026-01-02T00:00:00Z"}
spec:
  configPatches:
  - applyTo: CLUSTER
    match: {context: SIDECAR_OUTBOUND, cluster: {service: ratings.efm.svc.cluster.local}}
    patch: {operation: MERGE, value: {per_connection_buffer_limit_bytes: 1024}}
---
apiVersion: networking.istio.io/v1alpha3
kind: EnvoyFilter
metadata: {name: ns-early, namespace: efm, creationTimestamp: "2026-01-01T00:00:00Z"}
spec:
  configPatches:
  - applyTo: CLUSTER
    match: {context: SIDECAR_OUTBOUND, cluster: {service: ratings.efm.svc.cluster.local}}
    patch: {operation: MERGE, value: {connect_timeout: 3s}}
---
apiVersion: networking.istio.io/v1alpha3
kind: EnvoyFilter
metadata: {name: root-late, namespace: istio-system, creationTimestamp: "2026-01-03T00:00:00Z"}
spec:
  configPatches:
  - applyTo: CLUSTER
    match: {context: SIDECAR_OUTBOUND, cluster: {service: ratings.efm.svc.cluster.local}}
    patch: {operation: MERGE, value: {connect_timeout: 4s}}
---
apiVersion: networking.istio.io/v1alpha3
kind: EnvoyFilter
metadata: {name: first, namespace: efm, creationTimestamp: "2026-01-05T00:00:00Z"}
spec:
  priority: -5
  configPatches:
  - applyTo: CLUSTER
    match: {context: SIDECAR_OUTBOUND, cluster: {service: ratings.efm.svc.cluster.local}}
    patch: {operation: MERGE, value: {connect_timeout: 5s}}
---
apiVersion: networking.istio.io/v1alpha3
kind: EnvoyFilter
metadata: {name: selected, namespace: efm}
spec:
  workloadSelector: {labels: {app: reviews}}
  configPatches:
  - applyTo: CLUSTER
    match: {context: SIDECAR_OUTBOUND, cluster: {service: ratings.efm.svc.cluster.local}}
    patch: {operation: MERGE, value: {connect_timeout: 6s}}
---
apiVersion: networking.istio.io/v1alpha3
kind: EnvoyFilter
metadata: {name: elsewhere, namespace: other}
spec:
  configPatches:
  - applyTo: CLUSTER
    match: {context: SIDECAR_OUTBOUND}
    patch: {operation: REMOVE}
`

func efSnapshot(t testing.TB, yaml string) *index.Snapshot {
	t.Helper()
	w := index.NewWriter()
	conv := ingest.NewConverter(w, "cluster.local")
	objs, errs := ingest.Decode("ef.yaml", []byte(yaml))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	var b index.Batch
	for i := range objs {
		conv.Put(&b, &objs[i])
	}
	w.Apply(&b)
	return w.Snapshot()
}

func efNames(snap *index.Snapshot, rows []*index.Config) []string {
	var out []string
	for _, c := range rows {
		out = append(out, snap.String(c.Key.Namespace)+"/"+snap.String(c.Key.Name))
	}
	return out
}

// TestSelectEnvoyFiltersOrder: istiod's order (priority, root namespace
// first, creation time, name) and attach rule (selector against the
// proxy's labels; another namespace's filters never).
func TestSelectEnvoyFiltersOrder(t *testing.T) {
	snap := efSnapshot(t, efMesh)
	for _, tc := range []struct {
		labels map[string]string
		want   []string
	}{
		{map[string]string{"app": "reviews"}, []string{"efm/first", "istio-system/root-late", "efm/selected", "efm/ns-early", "efm/ns-late"}},
		{map[string]string{"app": "ratings"}, []string{"efm/first", "istio-system/root-late", "efm/ns-early", "efm/ns-late"}},
	} {
		got := efNames(snap, selectEnvoyFilters(snap, "istio-system", "efm", tc.labels))
		// "selected" has no creation time (0): oldest among priority 0 of
		// its namespace.
		if !slices.Equal(got, tc.want) {
			t.Errorf("labels %v: got %q, want %q", tc.labels, got, tc.want)
		}
	}
}

func efNode(ns, app, ip string) *Node {
	return &Node{ID: app + "-0." + ns, Type: encode.ProxySidecar, Namespace: ns, IPs: []netip.Addr{netip.MustParseAddr(ip)},
		Labels: map[string]string{"app": app, "pod-template-hash": ip}, IstioVersion: "1.31", FullIstioVersion: "1.31.0"}
}

// TestEnvoyFilterClassAndSets: the selector's label key joins the class
// (proxies differing in other labels still share one), selected and
// unselected classes get different sets, equal patch lists one interned
// *Set per config version, and a snapshot without EnvoyFilters changes
// nothing.
func TestEnvoyFilterClassAndSets(t *testing.T) {
	snap := efSnapshot(t, efMesh)
	views := &Views{}
	classOf := func(n *Node) *encode.ProxyClass {
		c := ClassOfIn(views, snap, "istio-system", n)
		return &c
	}
	r1, r2, ra := classOf(efNode("efm", "reviews", "10.1.40.1")), classOf(efNode("efm", "reviews", "10.1.40.2")), classOf(efNode("efm", "ratings", "10.1.40.3"))
	if r1.Labels != "app=reviews" || *r1 != *r2 {
		t.Fatalf("reviews classes %+v and %+v: want one class with labels app=reviews", r1, r2)
	}
	s1 := NewScopeIn(views.Of(snap), snap, r1).Patches(nil)
	s2 := NewScopeIn(views.Of(snap), snap, r2).Patches(nil)
	sa := NewScopeIn(views.Of(snap), snap, ra).Patches(nil)
	if s1 == nil || sa == nil || s1 != s2 {
		t.Fatalf("sets %p %p %p: want the two reviews scopes to share one set, ratings its own", s1, s2, sa)
	}
	if len(s1.Patches) != 5 || len(sa.Patches) != 4 || s1.Digest == sa.Digest {
		t.Errorf("reviews has %d patches, ratings %d (want 5, 4, different digests)", len(s1.Patches), len(sa.Patches))
	}
	// "first" (priority -5) applies first; "selected" after the root's.
	if s1.Patches[0].Source != "efm/first" || s1.Patches[2].Source != "efm/selected" {
		t.Errorf("order: %s, %s", s1.Patches[0].Source, s1.Patches[2].Source)
	}
	if fam := s1.Family(envoypatch.Clusters); fam == nil || fam.Family(envoypatch.Listeners) != nil {
		t.Errorf("families: clusters %v", fam)
	}

	// No EnvoyFilter: no set, and the class keeps no app label (no
	// selector names it).
	plain := efSnapshot(t, efMesh[:indexOf(efMesh, "---\napiVersion: networking.istio.io")])
	pc := ClassOf(plain, "istio-system", efNode("efm", "reviews", "10.1.40.1"))
	if pc.Labels != "-" || pc.EnvoyFilterProxy != "" {
		t.Errorf("class without EnvoyFilters: labels %q, proxy %q", pc.Labels, pc.EnvoyFilterProxy)
	}
	if s := NewScope(plain, &pc).Patches(nil); s != nil {
		t.Errorf("set without EnvoyFilters: %v", s)
	}
}

func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return len(s)
}

// TestEnvoyFilterProxyMatch: only with a patch matching on proxy version
// or metadata does the class hold the full version and the named metadata;
// the patch applies to the proxies it matches.
func TestEnvoyFilterProxyMatch(t *testing.T) {
	snap := efSnapshot(t, efMesh+`
---
apiVersion: networking.istio.io/v1alpha3
kind: EnvoyFilter
metadata: {name: versioned, namespace: efm}
spec:
  configPatches:
  - applyTo: CLUSTER
    match:
      context: SIDECAR_OUTBOUND
      proxy: {proxyVersion: '^1\.30.*', metadata: {TIER: gold}}
      cluster: {service: reviews.efm.svc.cluster.local}
    patch: {operation: MERGE, value: {connect_timeout: 7s}}
`)
	md := func(v string) func(string) (string, bool) {
		return func(k string) (string, bool) {
			if k == "TIER" {
				return v, true
			}
			return "", false
		}
	}
	n30 := efNode("efm", "ratings", "10.1.40.3")
	n30.FullIstioVersion, n30.Metadata = "1.30.2", md("gold")
	n31 := efNode("efm", "ratings", "10.1.40.4")
	n31.Metadata = md("gold")
	c30, c31 := ClassOf(snap, "istio-system", n30), ClassOf(snap, "istio-system", n31)
	if c30.EnvoyFilterProxy != "1.30.2\nTIER=gold" || c31.EnvoyFilterProxy != "1.31.0\nTIER=gold" {
		t.Fatalf("EnvoyFilterProxy %q, %q", c30.EnvoyFilterProxy, c31.EnvoyFilterProxy)
	}
	s30, s31 := NewScope(snap, &c30).Patches(nil), NewScope(snap, &c31).Patches(nil)
	versioned := func(p *envoypatch.Patch) bool { return p.Source == "efm/versioned" }
	if len(s30.Patches) != len(s31.Patches)+1 || !slices.ContainsFunc(s30.Patches, versioned) || slices.ContainsFunc(s31.Patches, versioned) {
		t.Errorf("1.30 proxy: %d patches, 1.31 proxy: %d; want the versioned patch on 1.30 only", len(s30.Patches), len(s31.Patches))
	}
}

// TestEnvoyFilterClusterKeys: a CLUSTER patch on ratings changes ratings'
// cluster only: every other cluster of the patched class has the bytes of
// a class without the filter, and the patched cluster is encoded once for
// every proxy of the class (the second build hits the cache).
func TestEnvoyFilterClusterKeys(t *testing.T) {
	snap := efSnapshot(t, efMesh)
	mesh := encode.DefaultMesh()
	cache := encode.NewCache()
	build := func(n *Node) map[string]string {
		c := ClassOf(snap, "istio-system", n)
		sc := NewScope(snap, &c)
		rs, err := Build(TypeCluster, sc, mesh, cache, nil, true, nil)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, r := range rs {
			out[r.Name] = r.Version
		}
		return out
	}
	// Another namespace's proxy: no filter of efm applies; it sees ratings
	// too, and only the root namespace's patch changes it.
	other := build(efNode("other2", "x", "10.1.41.1"))
	reviews := build(efNode("efm", "reviews", "10.1.40.1"))
	ratings := "outbound|9080||ratings.efm.svc.cluster.local"
	if reviews[ratings] == "" || reviews[ratings] == other[ratings] {
		t.Fatalf("ratings' cluster: patched %q, unpatched %q: want both, different", reviews[ratings], other[ratings])
	}
	for name, v := range reviews {
		if name == ratings || !slices.Contains([]string{"BlackHoleCluster", "PassthroughCluster", "outbound|9080||reviews.efm.svc.cluster.local"}, name) {
			continue
		}
		if other[name] != v {
			t.Errorf("%s: version %s with the filter, %s without: an unpatched cluster must keep its bytes", name, v, other[name])
		}
	}
	before := clusterStats(cache)
	again := build(efNode("efm", "reviews", "10.1.40.2"))
	after := clusterStats(cache)
	if after.Misses != before.Misses || again[ratings] != reviews[ratings] {
		t.Errorf("second reviews proxy: %d new misses (want 0), version %s vs %s", after.Misses-before.Misses, again[ratings], reviews[ratings])
	}
}

func clusterStats(c *encode.Cache) encode.Stats {
	for _, s := range c.Stats() {
		if s.Kind == encode.KindCluster.String() {
			return s
		}
	}
	return encode.Stats{}
}

// TestHoldsEnvoyFilter: a filter reaches the classes of its namespace (the
// root namespace: every class) whose labels its selector matches.
func TestHoldsEnvoyFilter(t *testing.T) {
	snap := efSnapshot(t, efMesh)
	key := func(ns, name string) index.ConfigKey {
		n, _ := snap.Symbols.Lookup(ns)
		m, _ := snap.Symbols.Lookup(name)
		return index.ConfigKey{Namespace: n, Name: m}
	}
	scope := func(n *Node) *Scope { c := ClassOf(snap, "istio-system", n); return NewScope(snap, &c) }
	reviews, ratings, other := scope(efNode("efm", "reviews", "10.1.40.1")), scope(efNode("efm", "ratings", "10.1.40.3")), scope(efNode("other2", "x", "10.1.41.1"))
	for _, tc := range []struct {
		sc   *Scope
		key  index.ConfigKey
		want bool
	}{
		{reviews, key("efm", "selected"), true},
		{ratings, key("efm", "selected"), false},
		{other, key("efm", "ns-early"), false},
		{other, key("istio-system", "root-late"), true},
		{reviews, key("other", "elsewhere"), false},
	} {
		if got := tc.sc.HoldsEnvoyFilter(tc.key, "istio-system"); got != tc.want {
			t.Errorf("%s holds %s/%s: %v, want %v", tc.sc.Class.Labels, snap.String(tc.key.Namespace), snap.String(tc.key.Name), got, tc.want)
		}
	}
}

// TestEnvoyFilterFailureCounted: a patch istiod would skip with an error
// (an HTTP filter MERGE whose typed_config is of another type than the
// filter's) is skipped, counted and named by the cache, and the listener
// is still generated with the other patches.
func TestEnvoyFilterFailureCounted(t *testing.T) {
	snap := efSnapshot(t, efMesh+`
---
apiVersion: networking.istio.io/v1alpha3
kind: EnvoyFilter
metadata: {name: bad-merge, namespace: efm}
spec:
  configPatches:
  - applyTo: HTTP_FILTER
    match:
      context: SIDECAR_OUTBOUND
      listener: {filterChain: {filter: {name: envoy.filters.network.http_connection_manager, subFilter: {name: envoy.filters.http.router}}}}
    patch:
      operation: MERGE
      value:
        name: envoy.filters.http.router
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua
          defaultSourceCode: {inlineString: "function envoy_on_request(h) end"}
`)
	cache := encode.NewCache()
	c := ClassOf(snap, "istio-system", efNode("efm", "ratings", "10.1.40.3"))
	rs, err := Build(TypeListener, NewScope(snap, &c), encode.DefaultMesh(), cache, nil, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(rs, func(r Resource) bool { return r.Name == "0.0.0.0_9080" }) {
		t.Fatalf("listeners %q: want 0.0.0.0_9080 still generated", resourceNames(rs))
	}
	n, last := cache.PatchFailures()
	if n == 0 || len(last) == 0 || last[0].Source != "efm/bad-merge" || last[0].Index != 0 || last[0].Err == "" {
		t.Fatalf("failures: %d, %+v; want the bad-merge patch counted with its error", n, last)
	}
}

package engine

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/inject"
	"github.com/pilotfish-mesh/pilotfish/internal/istiodref"
	"github.com/pilotfish-mesh/pilotfish/internal/xdstest"
)

// The tracing-* cases of internal/istiodref: istiod and pilotfish given
// the same mesh.yaml, config and proxies. Every HTTP connection manager of
// every listener both send (sidecar outbound, virtual inbound, gateway)
// is compared on its tracing and request_id_extension fields, as JSON
// with the typed configs expanded.

// hcmTracingFields maps each chain of l holding an HCM ("NAME MATCH") to
// its tracing and request ID extension, as JSON.
func hcmTracingFields(t *testing.T, l map[string]any) map[string]string {
	t.Helper()
	out := map[string]string{}
	eachHCM(t, l, func(id string, tc map[string]any) {
		out[id] = "tracing=" + jsonString(t, tc["tracing"]) + " requestIdExtension=" + jsonString(t, tc["requestIdExtension"])
	})
	return out
}

// tracingDiffs generates each proxy's listeners with mesh and returns how
// their HCMs' tracing differs from istiod's, and how many HCMs were
// compared and how many of istiod's have tracing.
func tracingDiffs(t *testing.T, c *istiodref.Case, mesh *encode.Mesh) (diffs []string, compared, traced int) {
	t.Helper()
	// The reference harness's nodes have no cluster, which istio-agent
	// always sets: the datadog service name is empty in istiod's output
	// too (TestTracingDatadogServiceName), which Envoy's validation refuses.
	eachRefProxy(t, c, caseEngine(t, c, Options{Mesh: mesh}), "DatadogConfig.ServiceName", func(p *refProxy) {
		p.eachListener(&diffs, func(ln string, istiod, pilotfish map[string]any) {
			want, have := hcmTracingFields(t, istiod), hcmTracingFields(t, pilotfish)
			for _, id := range slices.Sorted(mapKeys(want)) {
				w := want[id]
				if !strings.HasPrefix(w, "tracing=null") {
					traced++
				}
				gf, ok := have[id]
				if !ok {
					diffs = append(diffs, fmt.Sprintf("%s: %s chain %s: pilotfish has no HCM", p.Name, ln, id))
					continue
				}
				compared++
				if gf != w {
					diffs = append(diffs, fmt.Sprintf("%s: %s chain %s\n got %s\nwant %s", p.Name, ln, id, gf, w))
				}
			}
		})
	})
	return diffs, compared, traced
}

// TestTracingMatchesIstiod: for each tracing case, every HCM's tracing and
// request ID extension are istiod's, and every listener passes Envoy's
// validation.
func TestTracingMatchesIstiod(t *testing.T) {
	for _, name := range []string{
		"tracing-default", "tracing-legacy", "tracing-zipkin", "tracing-otel",
		"tracing-otel-grpc", "tracing-datadog", "tracing-skywalking", "tracing-proxyconfig",
	} {
		t.Run(name, func(t *testing.T) {
			c := loadMeshCase(t, name)
			m := telemetryCaseMesh(t, c)
			if m.Tracing == nil {
				t.Fatal("the case's mesh config gives no tracing")
			}
			diffs, compared, traced := tracingDiffs(t, c, m)
			// Each case has a sidecar (outbound HTTP, virtual inbound HTTP
			// chains) and a gateway HTTP server, all traced by istiod.
			if compared < 4 || traced < 4 {
				t.Fatalf("%d HCMs compared, %d traced by istiod; want 4 or more of each", compared, traced)
			}
			t.Logf("%d HCMs compared (%d traced by istiod)", compared, traced)
			for _, d := range diffs {
				t.Error(d)
			}
		})
	}
}

// TestTracingCaseSeesTracing: the comparison can fail. Without tracing,
// every HCM istiod traces differs.
func TestTracingCaseSeesTracing(t *testing.T) {
	c := loadMeshCase(t, "tracing-default")
	m := telemetryCaseMesh(t, c).Clone()
	m.Tracing = nil
	diffs, _, traced := tracingDiffs(t, c, m)
	if len(diffs) != traced || traced == 0 {
		t.Errorf("without tracing, %d HCMs differ; want all %d istiod traces:\n%s", len(diffs), traced, strings.Join(diffs, "\n"))
	}
}

// TestTracingListenersShared: with tracing on, a second pod of the same
// workload (same canonical service and revision) gets every listener from
// the cache; a pod of another canonical service in the same namespace
// gets its own HCM-bearing listeners (their Istio tags differ, as under
// istiod) but shares the others (virtualOutbound); and the gateway's
// listeners are those of a mesh without tracing only in their HCMs.
func TestTracingListenersShared(t *testing.T) {
	c := loadMeshCase(t, "tracing-default")
	m := telemetryCaseMesh(t, c)
	cache := encode.NewCache()
	e := caseEngine(t, c, Options{Mesh: m, Cache: cache})
	shop := c.Proxies[0]
	listenerStats := func() encode.Stats { return listenerCacheStats(t, cache) }
	gen := func(id string, labels map[string]any) map[string]string {
		t.Helper()
		md := map[string]any{}
		for k, v := range shop.Metadata {
			md[k] = v
		}
		if labels != nil {
			md["LABELS"] = labels
		}
		return listenerBytes(t, e, id, md)
	}
	first := gen(shop.ID, nil)
	s1 := listenerStats()
	second := gen(strings.Replace(shop.ID, "shop-v1-7d9c", "shop-v1-9f8e", 1), nil)
	s2 := listenerStats()
	if len(first) < 3 || len(second) != len(first) {
		t.Fatalf("listeners: first pod %d, second %d; want the same 3 or more", len(first), len(second))
	}
	if s2.Misses != s1.Misses || s2.Hits-s1.Hits != uint64(len(second)) {
		t.Errorf("second pod of the workload: %d misses and %d hits more, want 0 and %d", s2.Misses-s1.Misses, s2.Hits-s1.Hits, len(second))
	}
	other := gen(strings.Replace(shop.ID, "shop-v1-7d9c", "cart-v1-1a2b", 1), map[string]any{"app": "cart", "service.istio.io/canonical-name": "cart"})
	for name, b := range other {
		hasHCM := strings.Contains(b, "envoy.filters.network.http_connection_manager")
		if same := b == first[name]; same == hasHCM {
			t.Errorf("listener %s of another canonical service: same bytes %v, has an HCM %v; want shared exactly when it has no HCM", name, same, hasHCM)
		}
		if hasHCM && !strings.Contains(b, "cart") {
			t.Errorf("listener %s of another canonical service does not name it", name)
		}
	}
	if _, ok := other["virtualOutbound"]; !ok {
		t.Fatal("no virtualOutbound listener: the sharing of HCM-less listeners is not tested")
	}
}

// TestTracingDatadogServiceName: a proxy's node cluster (istio-agent's
// service cluster, "APP.NAMESPACE") is the datadog tracer's service name,
// and its listeners then pass Envoy's validation; proxies of different
// node clusters do not share HCMs.
func TestTracingDatadogServiceName(t *testing.T) {
	c := loadMeshCase(t, "tracing-datadog")
	m := telemetryCaseMesh(t, c)
	e := caseEngine(t, c, Options{Mesh: m})
	p := c.Proxies[0]
	for _, cluster := range []string{"shop.ttdd", "shop-canary.ttdd"} {
		n := refNode(t, p.ID, p.Metadata)
		n.Cluster = cluster
		conn := connectNode(t, e, n)
		rs, err := conn.Generate(encode.ListenerType, []string{"virtualInbound"}, false, nil)
		conn.Close()
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) != 1 {
			t.Fatalf("%d virtualInbound listeners", len(rs))
		}
		xdstest.Decode(t, "node cluster "+cluster, rs[0].Any, func() *listenerv3.Listener { return &listenerv3.Listener{} })
		js := jsonString(t, anyJSON(t, rs[0].Any))
		if !strings.Contains(js, `"serviceName":"`+cluster+`"`) {
			t.Errorf("node cluster %s: not the datadog service name in %s", cluster, js)
		}
	}
}

// TestTracingProxyConfigDefaultSampling: PILOT_TRACE_SAMPLING is the
// sampling of a proxy whose PROXY_CONFIG tracing sets none (the case's
// gateway), as istiod's proxyConfigSamplingValue.
func TestTracingProxyConfigDefaultSampling(t *testing.T) {
	c := loadMeshCase(t, "tracing-proxyconfig")
	cfg, err := inject.ParseMesh(c.Mesh)
	if err != nil {
		t.Fatal(err)
	}
	m, err := MeshSettings{Config: cfg, TraceSampling: 30}.Mesh()
	if err != nil {
		t.Fatal(err)
	}
	gw := c.Proxies[1]
	if _, ok := gw.Metadata["PROXY_CONFIG"]; !ok || !strings.HasPrefix(gw.ID, "router~") {
		t.Fatal("the case's second proxy is not the gateway with a PROXY_CONFIG")
	}
	conn := connectNode(t, caseEngine(t, c, Options{Mesh: m}), refNode(t, gw.ID, gw.Metadata))
	rs, err := conn.Generate(encode.ListenerType, nil, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range rs {
		for id, f := range hcmTracingFields(t, anyJSON(t, r.Any).(map[string]any)) {
			n++
			if !strings.Contains(f, `"randomSampling":{"value":30}`) {
				t.Errorf("%s %s: %s", r.Name, id, f)
			}
		}
	}
	if n == 0 {
		t.Fatal("no HCM")
	}
}

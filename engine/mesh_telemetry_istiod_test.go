package engine

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	stats "istio.io/api/envoy/extensions/stats"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/internal/istiodref"
	"github.com/pilotfish-mesh/pilotfish/internal/xdstest"
)

// Case telemetry-default of internal/istiodref: istiod with its chart's
// mesh config (defaultProviders.metrics: [prometheus]), pilotfish with the
// mesh MeshSettings makes of the same file. Every filter chain of every
// listener both send is compared on its network filters and, in an HTTP
// connection manager, its HTTP filters: names, order and the istio.stats
// typed configs.

// chainFilters renders a filter chain's filters as a list: network filter
// names, an HCM as "hcm[" + its HTTP filters + "]", istio.stats with its
// typed config's JSON.
func chainFilters(t *testing.T, fc map[string]any) []string {
	t.Helper()
	var out []string
	for _, f := range jsonList(fc["filters"]) {
		fm, _ := f.(map[string]any)
		name, _ := fm["name"].(string)
		tc, _ := fm["typedConfig"].(map[string]any)
		switch name {
		case "istio.stats":
			out = append(out, name+jsonString(t, tc))
		case "envoy.filters.network.http_connection_manager":
			var hs []string
			for _, h := range jsonList(tc["httpFilters"]) {
				hm, _ := h.(map[string]any)
				hn, _ := hm["name"].(string)
				if hn == "istio.stats" {
					hn += jsonString(t, hm["typedConfig"])
				}
				hs = append(hs, hn)
			}
			out = append(out, "hcm["+strings.Join(hs, " ")+"]")
		default:
			out = append(out, name)
		}
	}
	return out
}

// listenerChains indexes a listener's chains (the default one too) by
// name and match.
func listenerChains(t *testing.T, l map[string]any) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	eachChain(t, l, func(id string, fc map[string]any) { out[id] = chainFilters(t, fc) })
	return out
}

// telemetryDiffs generates each proxy's listeners with mesh and returns
// how their chains' filters differ from istiod's, and how many chains
// carried istio.stats on istiod's side.
func telemetryDiffs(t *testing.T, c *istiodref.Case, mesh *encode.Mesh) (diffs []string, statsChains int) {
	t.Helper()
	eachRefProxy(t, c, caseEngine(t, c, Options{Mesh: mesh}), "", func(p *refProxy) {
		compared := 0
		p.eachListener(&diffs, func(ln string, istiod, pilotfish map[string]any) {
			wc, gc := listenerChains(t, istiod), listenerChains(t, pilotfish)
			for _, id := range slices.Sorted(mapKeys(wc)) {
				w := wc[id]
				if strings.Contains(strings.Join(w, " "), "istio.stats") {
					statsChains++
				}
				gf, ok := gc[id]
				if !ok {
					diffs = append(diffs, fmt.Sprintf("%s: %s chain %s: pilotfish has none (has %q)", p.Name, ln, id, slices.Sorted(mapKeys(gc))))
					continue
				}
				compared++
				if slices.Equal(gf, w) {
					continue
				}
				diffs = append(diffs, fmt.Sprintf("%s: %s chain %s filters\n got %q\nwant %q", p.Name, ln, id, gf, w))
			}
		})
		t.Logf("%s: %d listeners, %d chains compared", p.Name, len(p.dump.Listeners), compared)
	})
	return diffs, statsChains
}

// TestDefaultTelemetryMatchesIstiod: with the chart's mesh config, every
// chain of the sidecar (outbound HTTP and TCP, passthrough, virtual
// outbound and inbound, inbound HTTP and TCP) and of the gateway (an HTTP
// and a TCP server) carries
// istio.stats where istiod puts it, with istiod's config.
func TestDefaultTelemetryMatchesIstiod(t *testing.T) {
	c := loadMeshCase(t, "telemetry-default")
	m := telemetryCaseMesh(t, c)
	if !m.Stats {
		t.Fatal("the chart's mesh config does not turn stats on")
	}
	diffs, statsChains := telemetryDiffs(t, c, m)
	if statsChains < 10 {
		t.Fatalf("istiod's dumps have %d chains with istio.stats; want the case's 10 or more", statsChains)
	}
	for _, d := range diffs {
		t.Error(d)
	}
}

// TestDefaultTelemetryCaseSeesStats: the comparison can fail. Without
// stats (the default mesh's setting), pilotfish differs from istiod on
// every chain istiod gives istio.stats.
func TestDefaultTelemetryCaseSeesStats(t *testing.T) {
	c := loadMeshCase(t, "telemetry-default")
	m := telemetryCaseMesh(t, c).Clone()
	m.Stats, m.Telemetry = false, nil // Telemetry: the stats and logs engine derived
	diffs, statsChains := telemetryDiffs(t, c, m)
	n := 0
	for _, d := range diffs {
		if strings.Contains(d, "istio.stats") {
			n++
		}
	}
	if n != statsChains {
		t.Errorf("without stats, %d chains differ on istio.stats; want all %d istiod gives it:\n%s", n, statsChains, strings.Join(diffs, "\n"))
	}
}

// TestStatsTypedConfigBytes: the stats filters' typed configs in
// istiod's dump (sidecar outbound: client; sidecar inbound: server),
// decoded and encoded again deterministically, are the bytes pilotfish
// sends in the same chains.
func TestStatsTypedConfigBytes(t *testing.T) {
	c := loadMeshCase(t, "telemetry-default")
	m := telemetryCaseMesh(t, c)
	p := c.Proxies[0]
	dump, err := istiodref.ReadDump(c.DumpFile(p))
	if err != nil {
		t.Fatal(err)
	}
	conn := connectNode(t, caseEngine(t, c, Options{Mesh: m}), refNode(t, p.ID, p.Metadata))
	rs, err := conn.Generate(encode.ListenerType, []string{"virtualInbound", "virtualOutbound"}, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		l := xdstest.Decode(t, r.Name, r.Any, func() *listenerv3.Listener { return &listenerv3.Listener{} })
		// The first chain: both listeners' blackhole chain, whose filters
		// end with istio.stats and tcp_proxy.
		gf := l.GetFilterChains()[0].GetFilters()
		wf := jsonList(listenerChainsRaw(dump.Listeners[r.Name])[0]["filters"])
		if len(gf) < 2 || len(wf) < 2 {
			t.Fatalf("%s: chain filters got %d want %d", r.Name, len(gf), len(wf))
		}
		got := gf[len(gf)-2]
		wm, _ := wf[len(wf)-2].(map[string]any)
		if got.GetName() != "istio.stats" || wm["name"] != "istio.stats" {
			t.Fatalf("%s: filter before tcp_proxy got %s want %v", r.Name, got.GetName(), wm["name"])
		}
		var want anypb.Any
		if err := protojson.Unmarshal([]byte(jsonString(t, wm["typedConfig"])), &want); err != nil {
			t.Fatalf("%s: istiod's typed config: %v", r.Name, err)
		}
		msg, err := want.UnmarshalNew()
		if err != nil {
			t.Fatal(err)
		}
		wb, err := proto.MarshalOptions{Deterministic: true}.Marshal(msg)
		if err != nil {
			t.Fatal(err)
		}
		if got.GetTypedConfig().GetTypeUrl() != want.GetTypeUrl() || !bytes.Equal(got.GetTypedConfig().GetValue(), wb) {
			t.Errorf("%s: istio.stats typed config got %s %x want %s %x", r.Name, got.GetTypedConfig().GetTypeUrl(), got.GetTypedConfig().GetValue(), want.GetTypeUrl(), wb)
		}
		if _, ok := msg.(*stats.PluginConfig); !ok {
			t.Errorf("%s: istiod's typed config is a %T", r.Name, msg)
		}
	}
	if len(rs) != 2 {
		t.Fatalf("got %d virtual listeners, want 2", len(rs))
	}
}

func listenerChainsRaw(l map[string]any) []map[string]any {
	var out []map[string]any
	for _, fc := range jsonList(l["filterChains"]) {
		m, _ := fc.(map[string]any)
		out = append(out, m)
	}
	return out
}

// TestStatsListenersSharedPerClass: with stats on, a second gateway of the
// same class gets every listener from the cache (Mesh.Stats is a value of
// the keys, not a per-proxy input).
func TestStatsListenersSharedPerClass(t *testing.T) {
	c := loadMeshCase(t, "telemetry-default")
	m := telemetryCaseMesh(t, c)
	cache := encode.NewCache()
	e := caseEngine(t, c, Options{Mesh: m, Cache: cache})
	gw := c.Proxies[1]
	if !strings.HasPrefix(gw.ID, "router~") {
		t.Fatalf("proxy %s is not the gateway", gw.Name)
	}
	var n [2]int
	var after [2]encode.Stats
	for i, id := range []string{gw.ID, strings.Replace(gw.ID, "10.1.51.9~tstats-ingress-5f7c", "10.1.51.10~tstats-ingress-9a1b", 1)} {
		n[i] = len(listenerBytes(t, e, id, gw.Metadata))
		after[i] = listenerCacheStats(t, cache)
	}
	if n[0] < 2 || n[1] != n[0] {
		t.Fatalf("listeners: first gateway %d, second %d; want the same 2 or more", n[0], n[1])
	}
	if after[1].Misses != after[0].Misses || after[1].Hits-after[0].Hits != uint64(n[1]) {
		t.Errorf("second gateway: %d misses and %d hits more, want 0 and %d", after[1].Misses-after[0].Misses, after[1].Hits-after[0].Hits, n[1])
	}
}

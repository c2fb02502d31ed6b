package engine

import (
	"bytes"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/internal/istiodref"
	"github.com/pilotfish-mesh/pilotfish/internal/xdstest"
)

// gatewayHCMCases are the istiod reference cases whose routers' HTTP
// filters exercise a different neighbour of istio.alpn: plain servers,
// istio.stats (telemetry-default), ext_authz (authz-custom), jwt_authn
// (jwt-gateway), WasmPlugins in their phases (wasm-basic), tracing
// providers, TLS servers and topology settings. (tracing-datadog is left
// out: its gateway node has no cluster, so the datadog service name is
// empty in istiod's output and pilotfish's, which Validate rejects;
// TestTracingMatchesIstiod compares it.)
var gatewayHCMCases = []string{
	"telemetry-default", "authz-custom", "jwt-gateway", "wasm-basic",
	"tracing-default", "tracing-zipkin", "tracing-otel", "tracing-otel-grpc", "tracing-proxyconfig",
	"gw-hashpolicy", "gw-shortname", "gw-sidecar", "gw-tls-files", "gw-tls-pinning", "gw-topology",
	"mesh-listener", "vs-delegate", "vs-sourcelabels", "gw-grpcweb",
}

// gatewayHCMs is every HTTP connection manager of a router's listeners
// in istiod's dump (generic JSON) and pilotfish's (decoded), keyed by
// listener name and the chain's match.
type gatewayHCMs struct {
	istiod    map[string]map[string]any
	pilotfish map[string]*hcm.HttpConnectionManager
}

// routerHCMs connects p of case c to an engine on c's config and collects
// both sides' connection managers.
func routerHCMs(t *testing.T, c *istiodref.Case, p istiodref.Proxy) gatewayHCMs {
	t.Helper()
	var mesh *encode.Mesh
	if c.Mesh != nil {
		mesh = telemetryCaseMesh(t, c)
	}
	dump, err := istiodref.ReadDump(c.DumpFile(p))
	if err != nil {
		t.Fatal(err)
	}
	conn := connectNode(t, caseEngine(t, c, Options{Mesh: mesh}), refNode(t, p.ID, p.Metadata))
	rs, err := conn.Generate(encode.ListenerType, nil, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := gatewayHCMs{istiod: map[string]map[string]any{}, pilotfish: map[string]*hcm.HttpConnectionManager{}}
	for _, r := range rs {
		l := xdstest.Decode(t, p.Name+"/"+r.Name, r.Any, func() *listenerv3.Listener { return &listenerv3.Listener{} })
		chains := l.GetFilterChains()
		if d := l.GetDefaultFilterChain(); d != nil {
			chains = append(chains, d)
		}
		for _, fc := range chains {
			for _, f := range fc.GetFilters() {
				if f.GetName() != "envoy.filters.network.http_connection_manager" {
					continue
				}
				var h hcm.HttpConnectionManager
				if err := f.GetTypedConfig().UnmarshalTo(&h); err != nil {
					t.Fatalf("%s/%s: %v", p.Name, r.Name, err)
				}
				fcJSON, _ := messageJSON(t, fc).(map[string]any)
				id := r.Name + " " + chainID(t, fcJSON)
				out.pilotfish[id] = &h
			}
		}
	}
	for ln, l := range dump.Listeners {
		eachHCM(t, l, func(id string, tc map[string]any) { out.istiod[ln+" "+id] = tc })
	}
	return out
}

// istiodAlpnBytes decodes the istio.alpn typed config of an istiod HCM
// (JSON) and marshals it deterministically.
func istiodAlpnBytes(t *testing.T, hf map[string]any) (string, []byte) {
	t.Helper()
	js, err := json.Marshal(hf["typedConfig"])
	if err != nil {
		t.Fatal(err)
	}
	var a anypb.Any
	if err := protojson.Unmarshal(js, &a); err != nil {
		t.Fatalf("istio.alpn typed config: %v", err)
	}
	m, err := a.UnmarshalNew()
	if err != nil {
		t.Fatal(err)
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return a.GetTypeUrl(), b
}

// TestGatewayHTTPFiltersMatchIstiod: on every router of the cases above,
// every HTTP connection manager istiod sends has pilotfish's counterpart
// with the same HTTP filters in the same order (istio.alpn after
// grpc_stats, before fault, cors, istio.stats and the router, after the
// security and Wasm filters), and istio.alpn's typed config is istiod's
// byte for byte.
func TestGatewayHTTPFiltersMatchIstiod(t *testing.T) {
	routers, alpns := 0, 0
	for _, name := range gatewayHCMCases {
		c, err := istiodref.LoadCase(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range c.Proxies {
			if !strings.HasPrefix(p.ID, "router~") {
				continue
			}
			if _, err := os.Stat(c.DumpFile(p)); err != nil {
				t.Fatalf("%s/%s: istiod's dump missing: %v", name, p.Name, err)
			}
			routers++
			hs := routerHCMs(t, c, p)
			if len(hs.istiod) == 0 {
				t.Errorf("%s/%s: istiod sends no HTTP connection manager", name, p.Name)
			}
			for _, id := range slices.Sorted(mapKeys(hs.istiod)) {
				want := hs.istiod[id]
				got, ok := hs.pilotfish[id]
				if !ok {
					t.Errorf("%s/%s: no HCM on %s (pilotfish has %q)", name, p.Name, id, slices.Sorted(mapKeys(hs.pilotfish)))
					continue
				}
				var wantNames, gotNames []string
				var wantAlpn map[string]any
				for _, hf := range jsonList(want["httpFilters"]) {
					hm, _ := hf.(map[string]any)
					n, _ := hm["name"].(string)
					wantNames = append(wantNames, n)
					if n == "istio.alpn" {
						wantAlpn = hm
					}
				}
				var gotAlpn *hcm.HttpFilter
				for _, hf := range got.GetHttpFilters() {
					gotNames = append(gotNames, hf.GetName())
					if hf.GetName() == "istio.alpn" {
						gotAlpn = hf
					}
				}
				if !slices.Equal(gotNames, wantNames) {
					t.Errorf("%s/%s %s: HTTP filters\n got %q\nwant %q", name, p.Name, id, gotNames, wantNames)
				}
				if wantAlpn == nil {
					t.Errorf("%s/%s %s: istiod sends no istio.alpn", name, p.Name, id)
					continue
				}
				if gotAlpn == nil {
					continue // reported with the names
				}
				alpns++
				url, b := istiodAlpnBytes(t, wantAlpn)
				if tc := gotAlpn.GetTypedConfig(); tc.GetTypeUrl() != url || !bytes.Equal(tc.GetValue(), b) {
					t.Errorf("%s/%s %s: istio.alpn typed config %s %x, istiod %s %x", name, p.Name, id, tc.GetTypeUrl(), tc.GetValue(), url, b)
				}
			}
		}
	}
	// The cases hold 22 routers; fewer means a case lost its gateway.
	if routers < 22 || alpns < routers {
		t.Errorf("compared %d routers, %d istio.alpn filters; want 22 or more, at least one each", routers, alpns)
	}
	t.Logf("%d routers, %d connection managers with istio.alpn compared", routers, alpns)
}

// TestGatewayListenersSharedWithAlpn: istio.alpn and grpc_web are part of
// the gateway listener's key only through its servers, so a second router
// pod of the same class (case gw-grpcweb's gateway, another pod name and
// IP) takes every listener from the cache: no miss, one hit per listener,
// the same bytes.
func TestGatewayListenersSharedWithAlpn(t *testing.T) {
	c, err := istiodref.LoadCase("gw-grpcweb")
	if err != nil {
		t.Fatal(err)
	}
	cache := encode.NewCache()
	e := caseEngine(t, c, Options{Cache: cache})
	gw := c.Proxies[0]
	listenerStats := func() encode.Stats { return listenerCacheStats(t, cache) }
	gen := func(id string) map[string]string { t.Helper(); return listenerBytes(t, e, id, gw.Metadata) }
	first := gen(gw.ID)
	s1 := listenerStats()
	second := gen(strings.NewReplacer("10.1.77.1", "10.1.77.2", "7d9f", "8e0a").Replace(gw.ID))
	s2 := listenerStats()
	if len(first) != 3 || len(second) != len(first) {
		t.Fatalf("listeners: first pod %d, second %d; want 3", len(first), len(second))
	}
	if s2.Misses != s1.Misses || s2.Hits-s1.Hits != uint64(len(second)) {
		t.Errorf("second router pod: %d misses and %d hits more, want 0 and %d", s2.Misses-s1.Misses, s2.Hits-s1.Hits, len(second))
	}
	for name, b := range first {
		if second[name] != b {
			t.Errorf("listener %s differs between two pods of one class", name)
		}
		if !strings.Contains(b, "istio.alpn") {
			t.Errorf("listener %s has no istio.alpn", name)
		}
	}
}

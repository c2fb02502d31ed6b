package rules

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tcp "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/internal/istiodref"
)

// The VirtualService cases of internal/istiodref (match sourceLabels,
// delegation, precedence) against istiod's own output, field by field:
// every virtual host of the case's namespace in every route configuration
// istiod sent the proxy, and the TCP proxy cluster of every filter chain
// of the case's TCP and TLS listeners.
//
// Deliberate differences: none on these fields. vs-precedence was produced
// with every VirtualService created in the same second, so it checks the
// name and namespace tie-breaks and the groups (creation time is pinned by
// TestVirtualServicePrecedence and internal/scenario/testdata/vs-precedence).
var vsIstiodCases = []struct {
	name string
	// namespace: the virtual hosts compared are those whose name holds it.
	namespace string
	// listeners are the TCP and TLS listeners compared, by name.
	listeners []string
}{
	{"vs-sourcelabels", "vs-src", []string{"10.96.31.20_3306", "10.96.31.30_8443", "0.0.0.0_3306"}},
	{"vs-delegate", "vs-dlg", nil},
	{"vs-precedence", "vs-prec", nil},
}

func TestVirtualServicesMatchIstiod(t *testing.T) {
	e := newTestEngine(nil, testOptions{})
	for _, tc := range vsIstiodCases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := istiodref.LoadCase(tc.name)
			if err != nil {
				t.Fatal(err)
			}
			snap := newScopedWriter(t, string(c.Config)).w.Snapshot()
			for _, p := range c.Proxies {
				t.Run(p.Name, func(t *testing.T) {
					dump, err := istiodref.ReadDump(c.DumpFile(p))
					if err != nil {
						t.Fatal(err)
					}
					node := refNode(t, p)
					class := e.classOf(snap, node)
					sc := NewScope(snap, &class)
					sc.Instances = ComputeInstances(snap, node)
					sc.GatewayTargets = ComputeGatewayTargets(snap, node)
					mesh := e.meshFor(sc)
					cache := verifyCache()
					compared := 0
					for name, want := range dump.Routes {
						rs, err := Build(encode.RouteConfigurationType, sc, mesh, cache, []string{name}, false, nil)
						if err != nil {
							t.Fatal(err)
						}
						compared += compareVirtualHosts(t, name, tc.namespace, want, protoJSON(t, decodeRoutes(t, rs)[0]))
					}
					if compared == 0 {
						t.Fatalf("no virtual host of namespace %s in istiod's routes", tc.namespace)
					}
					for _, name := range tc.listeners {
						want, ok := dump.Listeners[name]
						if !ok {
							continue // not this proxy's
						}
						ls, err := Build(encode.ListenerType, sc, mesh, cache, []string{name}, false, nil)
						if err != nil {
							t.Fatal(err)
						}
						got := decodeListeners(t, ls)
						if len(got) != 1 {
							t.Fatalf("listener %s: got %d", name, len(got))
						}
						if w, g := istiodTCPClusters(t, want), tcpClusters(t, got[0]); !slices.Equal(w, g) {
							t.Errorf("listener %s: TCP proxy clusters %v, istiod %v", name, g, w)
						}
					}
				})
			}
		})
	}
}

// refNode is the Node the engine makes of a case's proxy (every
// istiodref comparison in rules builds its proxies with it).
func refNode(t *testing.T, p istiodref.Proxy) *Node {
	t.Helper()
	parts := strings.Split(p.ID, "~")
	if len(parts) != 4 {
		t.Fatalf("proxy %s: ID %q", p.Name, p.ID)
	}
	n := &Node{Type: encode.ProxySidecar, ID: parts[2], IstioVersion: "1.31", ClusterID: "Kubernetes"}
	if parts[0] == "router" {
		n.Type = encode.ProxyRouter
	}
	n.PodName, n.Namespace, _ = strings.Cut(parts[2], ".")
	if ns, ok := p.Metadata["NAMESPACE"].(string); ok && ns != "" {
		n.Namespace = ns // what the engine reads first
	}
	n.IPs = []netip.Addr{netip.MustParseAddr(parts[1])}
	if labels, ok := p.Metadata["LABELS"].(map[string]any); ok {
		n.Labels = map[string]string{}
		for k, v := range labels {
			n.Labels[k] = fmt.Sprint(v)
		}
	}
	return n
}

// compareVirtualHosts reports the differences of the virtual hosts whose
// name holds ns, and returns how many it compared.
func compareVirtualHosts(t *testing.T, route, ns string, want map[string]any, got any) int {
	t.Helper()
	byName := func(rc any) map[string]any {
		out := map[string]any{}
		m, _ := rc.(map[string]any)
		for _, vh := range cdsList(m["virtualHosts"]) {
			v, _ := vh.(map[string]any)
			if name, _ := v["name"].(string); strings.Contains(name, ns) {
				out[name] = v
			}
		}
		return out
	}
	w, g := byName(any(want)), byName(got)
	for name := range g {
		if _, ok := w[name]; !ok {
			t.Errorf("route %s: virtual host %s istiod does not have", route, name)
		}
	}
	for name, wv := range w {
		gv, ok := g[name]
		if !ok {
			t.Errorf("route %s: no virtual host %s", route, name)
			continue
		}
		var diffs []string
		jsonDiff(route+"/"+name, generic(t, wv), generic(t, gv), &diffs)
		for _, d := range diffs {
			t.Error(d)
		}
	}
	return len(w)
}

// generic round-trips v through JSON, so that both sides compare as the
// same generic types.
func generic(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// istiodTCPClusters lists the cluster of each tcp_proxy of istiod's
// listener, in filter chain order.
func istiodTCPClusters(t *testing.T, l map[string]any) []string {
	t.Helper()
	var out []string
	for _, fc := range cdsList(l["filterChains"]) {
		f, _ := fc.(map[string]any)
		for _, x := range cdsList(f["filters"]) {
			filter, _ := x.(map[string]any)
			if filter["name"] != "envoy.filters.network.tcp_proxy" {
				continue
			}
			cfg, _ := filter["typedConfig"].(map[string]any)
			c, _ := cfg["cluster"].(string)
			out = append(out, c)
		}
	}
	return out
}

// tcpClusters is istiodTCPClusters of a listener pilotfish built.
func tcpClusters(t *testing.T, l *listener.Listener) []string {
	t.Helper()
	var out []string
	for _, fc := range l.FilterChains {
		for _, f := range fc.Filters {
			if f.Name != "envoy.filters.network.tcp_proxy" {
				continue
			}
			var p tcp.TcpProxy
			if err := f.GetTypedConfig().UnmarshalTo(&p); err != nil {
				t.Fatal(err)
			}
			out = append(out, p.GetCluster())
		}
	}
	return out
}

package engine

import (
	"slices"
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	tcpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
)

// egressProxyMesh: a's proxies labelled app=egress get a Sidecar sending
// unknown destinations to egress.b's port 443; app=blocked ones a Sidecar
// with the same egressProxy under REGISTRY_ONLY, where istiod ignores it.
const egressProxyMesh = `
apiVersion: v1
kind: Service
metadata: {name: egress, namespace: b}
spec:
  clusterIP: 10.96.0.20
  ports: [{name: tls, port: 443}]
---
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: egress, namespace: a}
spec:
  workloadSelector: {labels: {app: egress}}
  egress: [{hosts: ["./*", "b/egress.b.svc.cluster.local"]}]
  outboundTrafficPolicy:
    mode: ALLOW_ANY
    egressProxy: {host: egress.b.svc.cluster.local, port: {number: 443}}
---
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: blocked, namespace: a}
spec:
  workloadSelector: {labels: {app: blocked}}
  egress: [{hosts: ["./*", "b/egress.b.svc.cluster.local"]}]
  outboundTrafficPolicy:
    mode: REGISTRY_ONLY
    egressProxy: {host: egress.b.svc.cluster.local, port: {number: 443}}
`

// TestSidecarEgressProxy: outboundTrafficPolicy.egressProxy replaces
// PassthroughCluster where istiod replaces it (virtualOutbound's catch-all,
// with a tls_inspector; the allow_any virtual host of each route
// configuration; the fallthrough of outbound listeners), only under
// ALLOW_ANY; every resource passes ValidateAll.
func TestSidecarEgressProxy(t *testing.T) {
	sw := newScopedWriter(t, scopedMesh, egressProxyMesh)
	e := New(sw.w, Options{})
	snap := sw.w.Snapshot()
	const proxy = "outbound|443||egress.b.svc.cluster.local"
	for _, tc := range []struct {
		app, catchAll, vhost, vhostCluster string
		inspector                          bool
	}{
		{app: "egress", catchAll: proxy, vhost: "allow_any", vhostCluster: proxy, inspector: true},
		{app: "blocked", catchAll: "BlackHoleCluster", vhost: "block_all"},
		{app: "other", catchAll: "PassthroughCluster", vhost: "allow_any", vhostCluster: "PassthroughCluster"}, // a's default Sidecar, the mesh's ALLOW_ANY
	} {
		t.Run(tc.app, func(t *testing.T) {
			sc := proxyScope(e, snap, "a", map[string]string{"app": tc.app})
			rs, err := e.generate(sc, e.cache, TypeListener, nil, true, nil)
			if err != nil {
				t.Fatal(err)
			}
			ls := decodeResources(t, rs, func() *listenerv3.Listener { return &listenerv3.Listener{} })
			i := slices.IndexFunc(ls, func(l *listenerv3.Listener) bool { return l.GetName() == "virtualOutbound" })
			if i < 0 {
				t.Fatal("no virtualOutbound listener")
			}
			vo := ls[i]
			var tp tcpv3.TcpProxy
			chains := vo.GetFilterChains()
			if err := chains[len(chains)-1].GetFilters()[0].GetTypedConfig().UnmarshalTo(&tp); err != nil {
				t.Fatal(err)
			}
			if tc.catchAll == proxy {
				crs, err := e.generate(sc, e.cache, TypeCluster, nil, true, nil)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Contains(clusterNames(t, crs), proxy) {
					t.Errorf("clusters lack the egress proxy's %s", proxy)
				}
			}
			if tp.GetCluster() != tc.catchAll || tp.GetStatPrefix() != tc.catchAll {
				t.Errorf("virtualOutbound catch-all: cluster %q stat prefix %q, want %q", tp.GetCluster(), tp.GetStatPrefix(), tc.catchAll)
			}
			hasInspector := len(vo.GetListenerFilters()) == 1 && vo.GetListenerFilters()[0].GetName() == "envoy.filters.listener.tls_inspector"
			if hasInspector != tc.inspector || (!tc.inspector && len(vo.GetListenerFilters()) > 0) {
				t.Errorf("virtualOutbound listener filters %v, want tls_inspector: %v", vo.GetListenerFilters(), tc.inspector)
			}
			rs, err = e.generate(sc, e.cache, TypeRoute, []string{"80"}, false, nil)
			if err != nil {
				t.Fatal(err)
			}
			rcs := decodeResources(t, rs, func() *routev3.RouteConfiguration { return &routev3.RouteConfiguration{} })
			if len(rcs) != 1 {
				t.Fatalf("%d route configurations for 80, want 1", len(rcs))
			}
			vhs := rcs[0].GetVirtualHosts()
			last := vhs[len(vhs)-1]
			if last.GetName() != tc.vhost || last.GetRoutes()[0].GetRoute().GetCluster() != tc.vhostCluster {
				t.Errorf("catch-all virtual host %q to %q, want %q to %q", last.GetName(), last.GetRoutes()[0].GetRoute().GetCluster(), tc.vhost, tc.vhostCluster)
			}
		})
	}
}

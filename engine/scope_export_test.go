package engine

import (
	"slices"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
)

// exportMesh: in b, a Service and a VirtualService exported only to b
// ("."), next to scopedMesh's services exported everywhere.
const exportMesh = `
apiVersion: v1
kind: Service
metadata:
  name: private
  namespace: b
  annotations: {networking.istio.io/exportTo: "."}
spec:
  clusterIP: 10.96.0.30
  ports: [{name: http, port: 80}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: two-private, namespace: b}
spec:
  hosts: [two.b.svc.cluster.local]
  exportTo: ["."]
  http: [{route: [{destination: {host: two.b.svc.cluster.local}}], timeout: 7s}]
`

// TestExportTo: a Service's networking.istio.io/exportTo annotation and a
// VirtualService's exportTo decide which namespaces' proxies see them
// (clusters, routes); the owning namespace still does.
func TestExportTo(t *testing.T) {
	sw := newScopedWriter(t, scopedMesh, exportMesh)
	e := New(sw.w, Options{})
	snap := sw.w.Snapshot()
	const private = "outbound|80||private.b.svc.cluster.local"
	for _, tc := range []struct {
		ns      string
		visible bool
	}{{"b", true}, {"c", false}} {
		sc := proxyScope(e, snap, tc.ns, nil)
		rs, err := e.generate(sc, e.cache, TypeCluster, nil, true, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(clusterNames(t, rs), "outbound|80||two.b.svc.cluster.local") {
			t.Fatalf("proxy in %s does not see b's exported service two", tc.ns)
		}
		if got := slices.Contains(clusterNames(t, rs), private); got != tc.visible {
			t.Errorf("proxy in %s: cluster %s present %v, want %v", tc.ns, private, got, tc.visible)
		}
		rs, err = e.generate(sc, e.cache, TypeRoute, []string{"80"}, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		rcs := decodeResources(t, rs, func() *routev3.RouteConfiguration { return &routev3.RouteConfiguration{} })
		if len(rcs) != 1 {
			t.Fatalf("proxy in %s: %d route configurations for 80", tc.ns, len(rcs))
		}
		timeout := ""
		for _, vh := range rcs[0].GetVirtualHosts() {
			if slices.Contains(vh.GetDomains(), "two.b.svc.cluster.local") {
				timeout = vh.GetRoutes()[0].GetRoute().GetTimeout().AsDuration().String()
			}
		}
		if want := map[bool]string{true: "7s", false: "0s"}[tc.visible]; timeout != want {
			t.Errorf("proxy in %s: route to two.b timeout %q, want %q (VirtualService exportTo %q)", tc.ns, timeout, want, ".")
		}
	}
}

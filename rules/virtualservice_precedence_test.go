package rules

import (
	"fmt"
	"net/netip"
	"testing"

	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/pilotfish-mesh/pilotfish/encode"
)

// precedenceVS is a VirtualService for reviews whose one route is named
// after it, bound to the mesh and the gateway, created at created ("" for
// no creation time).
func precedenceVS(name, ns, created string) string {
	ts := ""
	if created != "" {
		ts = ", creationTimestamp: " + created
	}
	return fmt.Sprintf(`
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: %[1]s, namespace: %[2]s%[3]s}
spec:
  hosts: [reviews.shop.svc.cluster.local]
  gateways: [mesh, istio-system/public]
  http:
  - name: %[1]s
    route: [{destination: {host: reviews.shop.svc.cluster.local, port: {number: 9080}}}]
`, name, ns, ts)
}

const precedenceMesh = `
apiVersion: v1
kind: Service
metadata: {name: reviews, namespace: shop}
spec:
  clusterIP: 10.96.0.10
  ports: [{name: http, port: 9080}]
---
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: public, namespace: istio-system}
spec:
  selector: {istio: ingressgateway}
  servers:
  - port: {number: 80, name: http, protocol: HTTP}
    hosts: ["*/reviews.shop.svc.cluster.local"]
`

// TestVirtualServicePrecedence: of several VirtualServices for one host,
// a sidecar and a gateway take the oldest (istiod's
// sortConfigByCreationTime), then the first by name, then by namespace;
// objects without a creation time sort first.
func TestVirtualServicePrecedence(t *testing.T) {
	tests := []struct {
		name string
		vss  []string
		want string
	}{
		{"the oldest wins over the first by name", []string{
			precedenceVS("a-new", "shop", "2025-06-01T00:00:00Z"),
			precedenceVS("b-old", "shop", "2020-01-01T00:00:00Z"),
		}, "b-old"},
		{"equal times: by name", []string{
			precedenceVS("b", "shop", "2024-01-01T00:00:00Z"),
			precedenceVS("a", "web", "2024-01-01T00:00:00Z"),
		}, "a"},
		{"equal names and times: by namespace", []string{
			precedenceVS("r", "web", "2024-01-01T00:00:00Z"),
			precedenceVS("r", "api", "2024-01-01T00:00:00Z"),
		}, "r.api"},
		{"no creation time sorts as the oldest", []string{
			precedenceVS("a-dated", "shop", "2020-01-01T00:00:00Z"),
			precedenceVS("z-undated", "shop", ""),
		}, "z-undated"},
	}
	e := newTestEngine(nil, testOptions{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap := newScopedWriter(t, append([]string{precedenceMesh}, tt.vss...)...).w.Snapshot()
			want := tt.want
			if want == "r.api" {
				want = "r" // the route's name; which namespace won shows in its metadata
			}
			sc := proxyScope(e, snap, "default", nil)
			rs, err := Build(encode.RouteConfigurationType, sc, e.meshFor(sc), verifyCache(), []string{"9080"}, false, nil)
			if err != nil {
				t.Fatal(err)
			}
			checkWinner(t, "sidecar", decodeRoutes(t, rs)[0].VirtualHosts, "reviews.shop.svc.cluster.local:9080", want, tt.want == "r.api")

			node := &Node{ID: "ingress.istio-system", Type: encode.ProxyRouter, Namespace: "istio-system",
				IPs: []netip.Addr{netip.MustParseAddr("10.244.1.1")}, Labels: map[string]string{"istio": "ingressgateway"}}
			class := e.classOf(snap, node)
			gsc := NewScope(snap, &class)
			rs, err = Build(encode.RouteConfigurationType, gsc, e.meshFor(gsc), verifyCache(), []string{"http.80"}, false, nil)
			if err != nil {
				t.Fatal(err)
			}
			checkWinner(t, "gateway", decodeRoutes(t, rs)[0].VirtualHosts, "reviews.shop.svc.cluster.local:80", want, tt.want == "r.api")
		})
	}
}

func checkWinner(t *testing.T, who string, vhs []*route.VirtualHost, name, want string, apiNS bool) {
	t.Helper()
	for _, vh := range vhs {
		if vh.Name != name {
			continue
		}
		if got := vh.Routes[0].Name; got != want {
			t.Errorf("%s: first route %q, want %q", who, got, want)
		}
		if apiNS {
			meta := vh.Routes[0].GetMetadata().GetFilterMetadata()["istio"].GetFields()["config"].GetStringValue()
			if meta != "/apis/networking.istio.io/v1/namespaces/api/virtual-service/r" {
				t.Errorf("%s: route from %q, want the VirtualService of namespace api", who, meta)
			}
		}
		return
	}
	t.Errorf("%s: no virtual host %s", who, name)
}

package rules

import (
	"testing"

	rbachttp "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"

	"github.com/pilotfish-mesh/pilotfish/encode"
)

// TestExamplesIngressGatewaySecurity: the example mesh's ingress gateway
// gets the RequestAuthentication (jwt_authn) and the DENY policy for
// shop.example.com/api/* without a request principal (RBAC) that select it
// in the root namespace, on every HTTP connection manager, after metadata
// exchange and before the router.
func TestExamplesIngressGatewaySecurity(t *testing.T) {
	snap := lrExamples(t)
	labels := map[string]string{"istio": "ingressgateway", "app": "istio-ingressgateway"}
	sc := routerScope(snap, "istio-system", labels)
	sc.Class.Labels = securityLabels(snap, "istio-system", &Node{Namespace: "istio-system", Labels: labels})
	rs, err := buildGatewayListeners(sc, encode.DefaultMesh(), verifyCache(), nil, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	hcms := 0
	for _, l := range decodeListeners(t, rs) {
		validate(t, l)
		for _, fc := range l.FilterChains {
			for _, f := range fc.Filters {
				if f.Name != "envoy.filters.network.http_connection_manager" {
					continue
				}
				hcms++
				fs := hcmFromFilter(t, f).HttpFilters
				if len(fs) < 4 || fs[1].Name != "envoy.filters.http.jwt_authn" || fs[2].Name != "envoy.filters.http.rbac" {
					var names []string
					for _, h := range fs {
						names = append(names, h.Name)
					}
					t.Fatalf("%s: HTTP filters %v, want metadata exchange, jwt_authn, rbac, ...", l.Name, names)
				}
				r := &rbachttp.RBAC{}
				if err := fs[2].GetTypedConfig().UnmarshalTo(r); err != nil {
					t.Fatal(err)
				}
				if _, ok := r.GetRules().GetPolicies()["ns[istio-system]-policy[shop-api-requires-jwt]-rule[0]"]; !ok || r.GetRules().GetAction().String() != "DENY" {
					t.Errorf("%s: RBAC %v", l.Name, r.GetRules())
				}
			}
		}
	}
	if hcms == 0 {
		t.Fatal("no HTTP connection manager on the gateway")
	}
}

// TestGatewayTCPServerRBAC: a router's TCP server gets the network RBAC
// filter of the AuthorizationPolicy selecting the router, before its proxy
// filter.
func TestGatewayTCPServerRBAC(t *testing.T) {
	snap := lrLoad(t, map[string][]byte{"gw.yaml": []byte(`apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: tcp-gw, namespace: istio-system}
spec:
  selector: {istio: ingressgateway}
  servers: [{port: {number: 31400, name: tcp, protocol: TCP}, hosts: ["*"]}]
---
apiVersion: v1
kind: Service
metadata: {name: db, namespace: shop}
spec: {clusterIP: 10.96.0.70, ports: [{name: tcp, port: 5432}]}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: db, namespace: istio-system}
spec:
  hosts: ["*"]
  gateways: [tcp-gw]
  tcp: [{route: [{destination: {host: db.shop.svc.cluster.local, port: {number: 5432}}}]}]
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: no-evil, namespace: istio-system}
spec:
  selector: {matchLabels: {istio: ingressgateway}}
  action: DENY
  rules: [{from: [{source: {ipBlocks: [203.0.113.0/24]}}]}]
`)})
	labels := map[string]string{"istio": "ingressgateway"}
	sc := routerScope(snap, "istio-system", labels)
	sc.Class.Labels = securityLabels(snap, "istio-system", &Node{Namespace: "istio-system", Labels: labels})
	rs, err := buildGatewayListeners(sc, encode.DefaultMesh(), verifyCache(), nil, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	ls := decodeListeners(t, rs)
	if len(ls) != 1 || len(ls[0].FilterChains) != 1 {
		t.Fatalf("listeners %v", ls)
	}
	validate(t, ls[0])
	fs := ls[0].FilterChains[0].Filters
	if len(fs) != 2 || fs[0].Name != "envoy.filters.network.rbac" || fs[1].Name != "envoy.filters.network.tcp_proxy" {
		t.Fatalf("filters %v, want network RBAC then tcp_proxy", fs)
	}
}

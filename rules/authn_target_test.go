package rules

import (
	"slices"
	"testing"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/index"
)

// Policies of namespace gw attached by selector and by targetRef(s).
const targetMesh = `apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: by-selector, namespace: gw}
spec:
  selector: {matchLabels: {app: edge}}
  action: DENY
  rules: [{to: [{operation: {paths: [/a]}}]}]
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: to-gateway, namespace: gw}
spec:
  targetRef: {kind: Gateway, group: gateway.networking.k8s.io, name: edge}
  action: DENY
  rules: [{to: [{operation: {paths: [/b]}}]}]
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: to-gateways, namespace: gw}
spec:
  targetRefs:
  - {kind: Gateway, group: gateway.networking.k8s.io, name: other}
  - {kind: Gateway, group: gateway.networking.k8s.io, name: edge}
  rules: [{}]
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: to-service, namespace: gw}
spec:
  targetRefs: [{kind: Service, group: "", name: edge}]
  action: DENY
  rules: [{}]
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: to-gateway-in-root, namespace: istio-system}
spec:
  targetRef: {kind: Gateway, group: gateway.networking.k8s.io, name: edge}
  action: DENY
  rules: [{}]
---
apiVersion: security.istio.io/v1
kind: RequestAuthentication
metadata: {name: jwt-gateway, namespace: gw}
spec:
  targetRef: {kind: Gateway, group: gateway.networking.k8s.io, name: edge}
  jwtRules: [{issuer: https://issuer.example, jwks: '{"keys":[]}'}]
---
apiVersion: security.istio.io/v1
kind: RequestAuthentication
metadata: {name: jwt-namespace, namespace: gw}
spec:
  jwtRules: [{issuer: https://ns.example, jwks: '{"keys":[]}'}]
`

// TestPolicyTargetRefs: istiod's attachment (ShouldAttachPolicy). A sidecar
// or an Istio Gateway deployment ignores every AuthorizationPolicy and
// RequestAuthentication with targetRef(s) and takes the others by selector;
// a Gateway API gateway (gateway.networking.k8s.io/gateway-name) also takes
// those of its namespace targeting its Gateway, not those targeting a
// Service (waypoints only), another Gateway, or from another namespace.
func TestPolicyTargetRefs(t *testing.T) {
	snap := lrLoad(t, map[string][]byte{"mesh.yaml": []byte(targetMesh)})
	names := func(cs ...[]*index.Config) []string {
		var out []string
		for _, l := range cs {
			for _, c := range l {
				out = append(out, snap.String(c.Key.Name))
			}
		}
		slices.Sort(out)
		return out
	}
	for _, tc := range []struct {
		name, ns string
		labels   map[string]string
		authz    []string
		ra       []string
	}{
		{"sidecar", "gw", map[string]string{"app": "edge"}, []string{"by-selector"}, []string{"jwt-namespace"}},
		{"Gateway API gateway edge", "gw", map[string]string{"app": "edge", gatewayNameLabel: "edge"},
			[]string{"by-selector", "to-gateway", "to-gateways"}, []string{"jwt-gateway", "jwt-namespace"}},
		{"Gateway API gateway other", "gw", map[string]string{gatewayNameLabel: "other"}, []string{"to-gateways"}, []string{"jwt-namespace"}},
		{"Gateway API gateway edge of another namespace", "elsewhere", map[string]string{gatewayNameLabel: "edge"}, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			class := sidecarClass(tc.ns)
			class.Labels = encodeLabels(tc.labels)
			w := securityOf(NewScope(snap, class), encode.DefaultMesh())
			a := w.authz
			if got := names(a.Allow, a.Deny, a.RootDeny, a.Audit, a.Custom); !slices.Equal(got, tc.authz) {
				t.Errorf("AuthorizationPolicies %v, want %v", got, tc.authz)
			}
			if got := names(w.ra.Policies); !slices.Equal(got, tc.ra) {
				t.Errorf("RequestAuthentications %v, want %v", got, tc.ra)
			}
		})
	}
}

// TestClassKeepsGatewayName: the Gateway API gateway label is part of a
// class's labels even when no selector names it.
func TestClassKeepsGatewayName(t *testing.T) {
	snap := lrLoad(t, map[string][]byte{"mesh.yaml": []byte(targetMesh)})
	got := securityLabels(snap, "istio-system", &Node{Namespace: "gw", Labels: map[string]string{gatewayNameLabel: "edge", "pod-template-hash": "x"}})
	if got != gatewayNameLabel+"=edge" {
		t.Errorf("class labels %q", got)
	}
}

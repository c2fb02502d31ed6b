package ingest_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/pilotfish-mesh/pilotfish/ingest"
	admissionv1 "k8s.io/api/admission/v1"
)

// unsupportedConfig sets unsupported fields among honoured ones (a client
// CA secret, honoured, must not warn): a Gateway two (the second server's
// bind, the third server's defaultEndpoint), a VirtualService one (a TCP route's second
// match's sourceSubnet); and an EnvoyFilter, a kind pilotfish does not
// implement.
const unsupportedConfig = `apiVersion: networking.istio.io/v1
kind: Gateway
metadata:
  name: ingress
  namespace: shop
spec:
  selector: {istio: ingressgateway}
  servers:
  - port: {number: 80, name: http, protocol: HTTP}
    hosts: [shop/*]
  - port: {number: 443, name: https, protocol: HTTPS}
    hosts: [shop/*]
    bind: 10.0.0.1
    tls:
      mode: MUTUAL
      credentialName: shop-cert
      caCertCredentialName: shop-ca
  - port: {number: 8080, name: http-alt, protocol: HTTP}
    hosts: [shop/*]
    defaultEndpoint: 127.0.0.1:8080
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: db, namespace: shop}
spec:
  hosts: [db]
  tcp:
  - match:
    - port: 5432
    - sourceSubnet: 10.0.0.0/8
    route:
    - destination: {host: db}
---
apiVersion: networking.istio.io/v1beta1
kind: ProxyConfig
metadata: {name: tweak, namespace: shop}
spec: {}
`

// TestUnsupportedWarnings: each unsupported field an object sets is one
// warning naming the object, the field's JSON path and its line, with the
// ledger's reason and effect; the object itself still decodes and is
// valid. Decode reports the same warnings as Unsupported on the decoded
// object.
func TestUnsupportedWarnings(t *testing.T) {
	objs, errs, warns := ingest.DecodeWithWarnings("mesh.yaml", []byte(unsupportedConfig))
	if len(errs) > 0 || len(objs) != 2 {
		t.Fatalf("decode: %d objects, errors %v", len(objs), errs)
	}
	for i := range objs {
		if verrs := ingest.Validate(&objs[i]); len(verrs) > 0 {
			t.Fatalf("valid object rejected: %v", verrs)
		}
	}
	want := []string{
		"mesh.yaml:13: warning: Gateway shop/ingress: spec.servers[1].bind: not supported by pilotfish: " +
			"binding a gateway listener to one address is not implemented (only the route name carries it); the listener listens on every address",
		"mesh.yaml:20: warning: Gateway shop/ingress: spec.servers[2].defaultEndpoint: not supported by pilotfish: " +
			"a gateway forwards by its routes; istiod ignores it too; the field is ignored",
		"mesh.yaml:30: warning: VirtualService shop/db: spec.tcp[0].match[1].sourceSubnet: not supported by pilotfish: " +
			"matching on the client's subnet is not implemented; the field is ignored",
		"mesh.yaml:34: warning: ProxyConfig shop/tweak: not implemented by pilotfish (networking.istio.io/v1beta1); the object is ignored",
	}
	if got := errorStrings(warns); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("warnings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, w := range warns {
		if !ingest.IsWarning(w) {
			t.Errorf("%v is not a warning", w)
		}
		var e *ingest.Error
		if !errors.As(w, &e) || e.Kind == "" || e.Name == "" {
			t.Errorf("%v does not name its object", w)
		}
	}
	// Unsupported on each decoded object: the same warnings (lines from
	// the object's source text), the kind's aside.
	for i, want := range [][]string{want[:2], want[2:3]} {
		if got := errorStrings(ingest.Unsupported(&objs[i])); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("Unsupported(%s):\n%s\nwant:\n%s", objs[i].Key(), strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
	// Decode (no warnings) leaves them out.
	if _, errs := ingest.Decode("mesh.yaml", []byte(unsupportedConfig)); len(errs) > 0 {
		t.Errorf("Decode: %v", errs)
	}

	// An object that sets nothing unsupported has no warning; nor has a
	// Kubernetes kind, or nil.
	clean, errs, warns := ingest.DecodeWithWarnings("ok.yaml", []byte(`apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: reviews, namespace: shop}
spec:
  host: reviews
  trafficPolicy: {loadBalancer: {simple: RANDOM}}
  subsets: [{name: v1, labels: {version: v1}}]
---
apiVersion: v1
kind: Service
metadata: {name: reviews, namespace: shop}
spec: {ports: [{port: 80}]}
`))
	if len(errs) > 0 || len(warns) > 0 || len(clean) != 2 {
		t.Fatalf("clean objects: %d objects, errors %v, warnings %v", len(clean), errs, warns)
	}
	for i := range clean {
		if w := ingest.Unsupported(&clean[i]); w != nil {
			t.Errorf("%s: %v", clean[i].Key(), w)
		}
	}
	if ingest.Unsupported(nil) != nil || ingest.Unsupported(&ingest.Object{Kind: ingest.KindVirtualService}) != nil {
		t.Error("warnings for nothing")
	}
}

// TestUnsupportedPerKind: a field read differently by one kind (an
// override) warns in that kind only: a WorkloadEntry's weight does, the
// same field in a ServiceEntry's endpoints does not.
func TestUnsupportedPerKind(t *testing.T) {
	_, errs, warns := ingest.DecodeWithWarnings("we.yaml", []byte(`apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: vm, namespace: shop}
spec: {address: 10.0.0.1, weight: 3}
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: ext, namespace: shop}
spec:
  hosts: [ext.example.com]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: 10.0.0.2, weight: 3}]
`))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	got := errorStrings(warns)
	if len(got) != 1 || !strings.HasPrefix(got[0], "we.yaml:4: warning: WorkloadEntry shop/vm: spec.weight: not supported by pilotfish") {
		t.Fatalf("warnings %q, want one for the WorkloadEntry's weight", got)
	}
}

// TestUnsupportedPolicyTargets: a policy's targetRef(s) are honoured for
// Gateway API gateways, but targets that are all of kind Service,
// ServiceEntry or GatewayClass attach it to waypoints only (istiod's
// ShouldAttachPolicy), which pilotfish does not serve: that value, and
// only that one, gets a warning at the field, counted under its path.
func TestUnsupportedPolicyTargets(t *testing.T) {
	const why = "not supported by pilotfish: Service, ServiceEntry and GatewayClass targets attach a policy to waypoints only, " +
		"which pilotfish does not serve; the policy applies to no proxy"
	policy := func(kind, spec string) string {
		return "apiVersion: security.istio.io/v1\nkind: " + kind + "\nmetadata: {name: p, namespace: shop}\nspec:\n" + spec
	}
	gateway := "{group: gateway.networking.k8s.io, kind: Gateway, name: gw}"
	for _, tc := range []struct {
		name, yaml string
		want       string // the warning; "" for none
	}{
		{"service", policy("AuthorizationPolicy", "  targetRefs: [{kind: Service, name: reviews}]\n  action: DENY\n  rules: [{}]\n"),
			"p.yaml:5: warning: AuthorizationPolicy shop/p: spec.targetRefs: " + why},
		{"core service and gateway class", policy("AuthorizationPolicy",
			"  targetRefs:\n  - {group: core, kind: Service, name: reviews}\n  - {group: gateway.networking.k8s.io, kind: GatewayClass, name: istio-waypoint}\n"),
			"p.yaml:5: warning: AuthorizationPolicy shop/p: spec.targetRefs: " + why},
		{"service entry", policy("RequestAuthentication", "  targetRef: {group: networking.istio.io, kind: ServiceEntry, name: ext}\n"),
			"p.yaml:5: warning: RequestAuthentication shop/p: spec.targetRef: " + why},
		{"gateway", policy("AuthorizationPolicy", "  targetRef: "+gateway+"\n"), ""},
		{"gateway among services", policy("RequestAuthentication",
			"  targetRefs: [{kind: Service, name: reviews}, "+gateway+"]\n"), ""},
		{"selector", policy("AuthorizationPolicy", "  selector: {matchLabels: {app: reviews}}\n"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs, errs, warns := ingest.DecodeWithWarnings("p.yaml", []byte(tc.yaml))
			if len(errs) > 0 || len(objs) != 1 {
				t.Fatalf("decode: %d objects, errors %v", len(objs), errs)
			}
			if verrs := ingest.Validate(&objs[0]); len(verrs) > 0 {
				t.Fatalf("valid object rejected: %v", verrs)
			}
			got := strings.Join(errorStrings(warns), "\n")
			if got != tc.want {
				t.Fatalf("warnings %q, want %q", got, tc.want)
			}
			if tc.want == "" {
				return
			}
			if !ingest.IsWarning(warns[0]) {
				t.Errorf("%v is not a warning", warns[0])
			}
			field := "spec.targetRefs"
			if strings.Contains(tc.want, "spec.targetRef:") {
				field = "spec.targetRef"
			}
			counts := ingest.CountUnsupported(warns)
			if len(counts) != 1 || counts[0].Field != field || counts[0].Objects != 1 {
				t.Errorf("counts %v, want one object under %s", counts, field)
			}
		})
	}
}

// TestCountUnsupported: the gauge's values count objects, each once per
// field however often it sets it; kinds pilotfish does not implement have
// an empty field; other problems are not counted.
func TestCountUnsupported(t *testing.T) {
	_, errs, warns := ingest.DecodeWithWarnings("mesh.yaml", []byte(unsupportedConfig+`---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: other, namespace: shop}
spec:
  hosts: [other]
  tcp:
  - match: [{sourceSubnet: 10.1.0.0/16}, {sourceSubnet: 10.2.0.0/16}]
    route: [{destination: {host: other}}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: broken, namespace: shop}
spec: {hostz: [a]}
`))
	got := ingest.CountUnsupported(append(warns, errs...))
	want := []ingest.UnsupportedUse{
		{Kind: "Gateway", Field: "spec.servers[].bind", Objects: 1},
		{Kind: "Gateway", Field: "spec.servers[].defaultEndpoint", Objects: 1},
		{Kind: "ProxyConfig", Field: "", Objects: 1},
		{Kind: "VirtualService", Field: "spec.tcp[].match[].sourceSubnet", Objects: 2},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("counts %v, want %v", got, want)
	}
	if len(errs) == 0 {
		t.Error("the broken VirtualService decoded without error")
	}
}

// TestReviewAdmissionWarnings: the webhook admits an object that sets
// unsupported fields and returns one warning per field, without file
// positions or the "warning:" prefix (kubectl adds its own), in the
// request's namespace; a denied object carries them too.
func TestReviewAdmissionWarnings(t *testing.T) {
	vs := `{"apiVersion":"networking.istio.io/v1","kind":"VirtualService","metadata":{"name":"db"},` +
		`"spec":{"hosts":["db"],"tcp":[{"match":[{"sourceSubnet":"10.0.0.0/8"}],"route":[{"destination":{"host":"db"}}]}]}}`
	_, resp, err := ingest.ReviewAdmission(reviewBody(t, "CREATE", "networking.istio.io", "v1", "VirtualService", "shop", "db", vs))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"VirtualService shop/db: spec.tcp[0].match[0].sourceSubnet: not supported by pilotfish: " +
		"matching on the client's subnet is not implemented; the field is ignored"}
	if !resp.Allowed || fmt.Sprint(resp.Warnings) != fmt.Sprint(want) {
		t.Fatalf("allowed %v, warnings %q; want allowed with %q", resp.Allowed, resp.Warnings, want)
	}

	bad := strings.Replace(vs, `"hosts":["db"]`, `"hosts":["db"],"gateways":["Bad Name"]`, 1)
	_, resp, err = ingest.ReviewAdmission(reviewBody(t, "CREATE", "networking.istio.io", "v1", "VirtualService", "shop", "db", bad))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Allowed || fmt.Sprint(resp.Warnings) != fmt.Sprint(want) {
		t.Fatalf("invalid object: allowed %v, warnings %q", resp.Allowed, resp.Warnings)
	}

	// Many fields: every warning stays whole (at most 256 characters) and
	// together under the API server's 4096, the rest summed up.
	var matches []string
	for i := range 100 {
		matches = append(matches, fmt.Sprintf(`{"sourceSubnet":"10.%d.0.0/16"}`, i))
	}
	many := strings.Replace(vs, `[{"sourceSubnet":"10.0.0.0/8"}]`, "["+strings.Join(matches, ",")+"]", 1)
	if many == vs {
		t.Fatal("no matches added")
	}
	out, resp, err := ingest.ReviewAdmission(reviewBody(t, "CREATE", "networking.istio.io", "v1", "VirtualService", "shop", "db", many))
	if err != nil {
		t.Fatal(err)
	}
	var back admissionv1.AdmissionReview
	if err := json.Unmarshal(out, &back); err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, w := range back.Response.Warnings {
		if len(w) > 256 {
			t.Errorf("warning of %d characters: %q", len(w), w)
		}
		total += len(w)
	}
	last := back.Response.Warnings[len(back.Response.Warnings)-1]
	if !resp.Allowed || total > 4000 || len(back.Response.Warnings) >= 100 || !strings.Contains(last, "more fields not supported") {
		t.Errorf("%d warnings, %d characters, last %q", len(back.Response.Warnings), total, last)
	}
}

func errorStrings(errs []error) []string {
	out := make([]string, len(errs))
	for i, e := range errs {
		out[i] = e.Error()
	}
	return out
}

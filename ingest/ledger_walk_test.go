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

// unsupportedVS sets three unsupported fields (the second match's
// sourceLabels, a delegate, a TCP match's sourceSubnet) among honoured
// ones, and an EnvoyFilter, a kind pilotfish does not implement.
const unsupportedVS = `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: reviews
  namespace: shop
spec:
  hosts: [reviews]
  http:
  - match:
    - uri: {prefix: /a}
    - uri: {prefix: /b}
      sourceLabels:
        app: client
    route:
    - destination: {host: reviews}
  - delegate:
      name: other
  tcp:
  - match:
    - sourceSubnet: 10.0.0.0/8
    route:
    - destination: {host: reviews}
---
apiVersion: networking.istio.io/v1alpha3
kind: EnvoyFilter
metadata: {name: tweak, namespace: shop}
spec: {}
`

// TestUnsupportedWarnings: each unsupported field an object sets is one
// warning naming the object, the field's JSON path and its line, with the
// ledger's reason and effect; the object itself still decodes and is
// valid. Decode reports the same warnings as Unsupported on the decoded
// object.
func TestUnsupportedWarnings(t *testing.T) {
	objs, errs, warns := ingest.DecodeWithWarnings("vs.yaml", []byte(unsupportedVS))
	if len(errs) > 0 || len(objs) != 1 {
		t.Fatalf("decode: %d objects, errors %v", len(objs), errs)
	}
	if verrs := ingest.Validate(&objs[0]); len(verrs) > 0 {
		t.Fatalf("valid object rejected: %v", verrs)
	}
	want := []string{
		"vs.yaml:12: warning: VirtualService shop/reviews: spec.http[0].match[1].sourceLabels: not supported by pilotfish: " +
			"source labels cannot be evaluated: a proxy class carries no workload labels; a match that sets it never applies",
		"vs.yaml:16: warning: VirtualService shop/reviews: spec.http[1].delegate: not supported by pilotfish: " +
			"delegation (merging VirtualServices) is not implemented; the delegating route is dropped",
		"vs.yaml:20: warning: VirtualService shop/reviews: spec.tcp[0].match[0].sourceSubnet: not supported by pilotfish: " +
			"matching on the client's subnet is not implemented; the field is ignored",
		"vs.yaml:24: warning: EnvoyFilter shop/tweak: not implemented by pilotfish (networking.istio.io/v1alpha3); the object is ignored",
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
	// Unsupported on the decoded object: the same warnings (lines from the
	// object's source text), the kind's aside.
	if got, want := errorStrings(ingest.Unsupported(&objs[0])), want[:3]; strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("Unsupported:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Decode (no warnings) leaves them out.
	if _, errs := ingest.Decode("vs.yaml", []byte(unsupportedVS)); len(errs) > 0 {
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

// TestCountUnsupported: the gauge's values count objects, each once per
// field however often it sets it; kinds pilotfish does not implement have
// an empty field; other problems are not counted.
func TestCountUnsupported(t *testing.T) {
	_, errs, warns := ingest.DecodeWithWarnings("vs.yaml", []byte(unsupportedVS+`---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: other, namespace: shop}
spec:
  hosts: [other]
  http:
  - match: [{sourceLabels: {a: b}}, {sourceLabels: {c: d}}]
    route: [{destination: {host: other}}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: broken, namespace: shop}
spec: {hostz: [a]}
`))
	got := ingest.CountUnsupported(append(warns, errs...))
	want := []ingest.UnsupportedUse{
		{Kind: "EnvoyFilter", Field: "", Objects: 1},
		{Kind: "VirtualService", Field: "spec.http[].delegate", Objects: 1},
		{Kind: "VirtualService", Field: "spec.http[].match[].sourceLabels", Objects: 2},
		{Kind: "VirtualService", Field: "spec.tcp[].match[].sourceSubnet", Objects: 1},
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
	vs := `{"apiVersion":"networking.istio.io/v1","kind":"VirtualService","metadata":{"name":"reviews"},` +
		`"spec":{"hosts":["reviews"],"http":[{"match":[{"sourceLabels":{"app":"x"}}],"route":[{"destination":{"host":"reviews"}}]}]}}`
	_, resp, err := ingest.ReviewAdmission(reviewBody(t, "CREATE", "networking.istio.io", "v1", "VirtualService", "shop", "reviews", vs))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"VirtualService shop/reviews: spec.http[0].match[0].sourceLabels: not supported by pilotfish: " +
		"source labels cannot be evaluated: a proxy class carries no workload labels; a match that sets it never applies"}
	if !resp.Allowed || fmt.Sprint(resp.Warnings) != fmt.Sprint(want) {
		t.Fatalf("allowed %v, warnings %q; want allowed with %q", resp.Allowed, resp.Warnings, want)
	}

	bad := strings.Replace(vs, `"hosts":["reviews"]`, `"hosts":["reviews"],"gateways":["Bad Name"]`, 1)
	_, resp, err = ingest.ReviewAdmission(reviewBody(t, "CREATE", "networking.istio.io", "v1", "VirtualService", "shop", "reviews", bad))
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
		matches = append(matches, fmt.Sprintf(`{"sourceLabels":{"app":"x%d"}}`, i))
	}
	many := strings.Replace(vs, `[{"sourceLabels":{"app":"x"}}]`, "["+strings.Join(matches, ",")+"]", 1)
	out, resp, err := ingest.ReviewAdmission(reviewBody(t, "CREATE", "networking.istio.io", "v1", "VirtualService", "shop", "reviews", many))
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

package ingest_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/pilotfish-mesh/pilotfish/ingest"
)

// TestDecodeKindsNotRead: what Decode does with each class of kind it does
// not read. A kind its API group lacks is an error at the kind's line with
// the closest kind suggested; mesh config pilotfish does not implement is a
// warning (DecodeWithWarnings only); other Kubernetes kinds and other
// projects' kinds are skipped without a word.
func TestDecodeKindsNotRead(t *testing.T) {
	doc := func(apiVersion, kind string) string {
		return "# comment\napiVersion: " + apiVersion + "\nkind: " + kind + "\nmetadata:\n  name: x\n  namespace: ns\nspec: {}\n"
	}
	tests := []struct {
		name, apiVersion, kind string
		wantErr, wantWarn      string // "" for none
	}{
		{"misspelled Istio kind", "networking.istio.io/v1", "VirtualServize", `f.yaml:3: VirtualServize ns/x: kind: unknown kind "VirtualServize" in API group networking.istio.io (did you mean "VirtualService"?)`, ""},
		{"lower-case Istio kind", "security.istio.io/v1", "authorizationpolicy", `f.yaml:3: authorizationpolicy ns/x: kind: unknown kind "authorizationpolicy" in API group security.istio.io (did you mean "AuthorizationPolicy"?)`, ""},
		{"misspelled core kind", "v1", "Servce", `f.yaml:3: Servce ns/x: kind: unknown kind "Servce" in the core API group (v1) (did you mean "Service"?)`, ""},
		{"misspelled discovery kind", "discovery.k8s.io/v1", "EndpointSlices", `(did you mean "EndpointSlice"?)`, ""},
		{"apps kind not checked", "apps/v1", "Deploymnet", "", ""},
		{"removed Kubernetes kind", "policy/v1beta1", "PodSecurityPolicy", "", ""},
		{"old Ingress", "extensions/v1beta1", "Ingress", "", "warning: Ingress ns/x: not implemented"},
		{"nothing close", "networking.istio.io/v1beta1", "Frobnicator", `f.yaml:3: Frobnicator ns/x: kind: unknown kind "Frobnicator" in API group networking.istio.io`, ""},
		{"apiVersion without version", "networking.istio.io", "VirtualService", `f.yaml:2: VirtualService ns/x: apiVersion: "networking.istio.io" has no version: write group/version, e.g. networking.istio.io/v1`, ""},
		{"ProxyConfig", "networking.istio.io/v1beta1", "ProxyConfig", "", "f.yaml:2: warning: ProxyConfig ns/x: not implemented by pilotfish (networking.istio.io/v1beta1); the object is ignored"},
		{"WorkloadGroup", "networking.istio.io/v1", "WorkloadGroup", "", "warning: WorkloadGroup ns/x: not implemented"},
		{"ProxyConfig", "networking.istio.io/v1beta1", "ProxyConfig", "", "warning: ProxyConfig ns/x: not implemented"},
		{"HTTPRoute", "gateway.networking.k8s.io/v1", "HTTPRoute", "", "warning: HTTPRoute ns/x: not implemented"},
		{"Gateway API Gateway", "gateway.networking.k8s.io/v1", "Gateway", "", "warning: Gateway ns/x: not implemented"},
		{"misspelled Gateway API kind", "gateway.networking.k8s.io/v1", "HTTPRoutes", `(did you mean "HTTPRoute"?)`, ""},
		{"Ingress", "networking.k8s.io/v1", "Ingress", "", "warning: Ingress ns/x: not implemented"},
		{"IstioOperator", "install.istio.io/v1alpha1", "IstioOperator", "", "warning: IstioOperator ns/x: not implemented"},
		{"ConfigMap", "v1", "ConfigMap", "", ""},
		{"ServiceAccount", "v1", "ServiceAccount", "", ""},
		{"Node", "v1", "Node", "", ""},
		{"Deployment", "apps/v1", "Deployment", "", ""},
		{"another project's kind", "cert-manager.io/v1", "Certificate", "", ""},
		{"another project's misspelling", "cert-manager.io/v1", "Certificat", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := []byte(doc(tt.apiVersion, tt.kind))
			objs, errs, warns := ingest.DecodeWithWarnings("f.yaml", data)
			if len(objs) != 0 {
				t.Errorf("decoded %d objects", len(objs))
			}
			expect(t, "error", errs, tt.wantErr)
			expect(t, "warning", warns, tt.wantWarn)
			for _, e := range errs {
				if !errors.Is(e, ingest.ErrKind) && !errors.Is(e, ingest.ErrTypeMeta) || ingest.IsWarning(e) {
					t.Errorf("error %v wraps the wrong sentinel", e)
				}
			}
			for _, w := range warns {
				if !ingest.IsWarning(w) {
					t.Errorf("warning %v is not IsWarning", w)
				}
			}
			// Decode reports the same errors and no warnings.
			if _, errs2 := ingest.Decode("f.yaml", data); errStrings(errs2) != errStrings(errs) {
				t.Errorf("Decode's errors %q differ from DecodeWithWarnings' %q", errStrings(errs2), errStrings(errs))
			}
		})
	}
	// In a List, each item is judged on its own, at its own line.
	list := "apiVersion: v1\nkind: List\nitems:\n- apiVersion: networking.istio.io/v1beta1\n  kind: ProxyConfig\n  metadata: {name: pc}\n" +
		"- apiVersion: networking.istio.io/v1\n  kind: DestinatonRule\n  metadata: {name: dr}\n"
	_, errs, warns := ingest.DecodeWithWarnings("l.yaml", []byte(list))
	expect(t, "list error", errs, `l.yaml:8: DestinatonRule dr: kind: unknown kind "DestinatonRule" in API group networking.istio.io (did you mean "DestinationRule"?)`)
	expect(t, "list warning", warns, "l.yaml:4: warning: ProxyConfig pc: not implemented")
}

func expect(t *testing.T, what string, got []error, want string) {
	t.Helper()
	switch {
	case want == "" && len(got) > 0:
		t.Errorf("unexpected %s: %s", what, errStrings(got))
	case want != "" && (len(got) != 1 || !strings.Contains(got[0].Error(), want)):
		t.Errorf("%ss %q, want one containing %q", what, errStrings(got), want)
	}
}

// TestObjectLimits: Kubernetes' per-object limits, 256 KiB of annotations
// and 1.5 MiB per object, are errors naming the object.
func TestObjectLimits(t *testing.T) {
	annotations := "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata:\n  name: vs\n  namespace: ns\n  annotations:\n" +
		"    a: " + strings.Repeat("x", 200<<10) + "\n    b: " + strings.Repeat("y", 60<<10) + "\nspec: {hosts: [a], http: [{route: [{destination: {host: a}}]}]}\n"
	objs, errs := ingest.Decode("a.yaml", []byte(annotations))
	for i := range objs {
		errs = append(errs, ingest.Validate(&objs[i])...)
	}
	expect(t, "annotations error", errs, "a.yaml:6: VirtualService ns/vs: metadata.annotations: annotations total 266242 bytes, over Kubernetes' limit of 262144 (256 KiB)")

	// Just under the limit is fine.
	ok := strings.Replace(annotations, strings.Repeat("y", 60<<10), strings.Repeat("y", 56<<10-2), 1)
	objs, errs = ingest.Decode("a.yaml", []byte(ok))
	if len(errs) != 0 || len(objs) != 1 || len(ingest.Validate(&objs[0])) != 0 {
		t.Errorf("annotations of 256 KiB exactly: %v %v", errs, ingest.Validate(&objs[0]))
	}

	big := "apiVersion: v1\nkind: Secret\nmetadata: {name: s, namespace: ns}\nstringData:\n  blob: " + strings.Repeat("z", 1600<<10) + "\n"
	objs, errs = ingest.Decode("b.yaml", []byte(big))
	if len(objs) != 0 {
		t.Error("an object over 1.5 MiB decoded")
	}
	expect(t, "size error", errs, "b.yaml:1: Secret ns/s: object is 1638")
	expect(t, "size error", errs, "over Kubernetes' limit of 1572864 (1.5 MiB)")
}

package ingest_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/pilotfish-mesh/pilotfish/ingest"
	admissionv1 "k8s.io/api/admission/v1"
)

// reviewBody builds the AdmissionReview v1 the API server would post for an
// operation on an object of the given group/version/kind.
func reviewBody(t testing.TB, op, group, version, kind, ns, name, object string) []byte {
	t.Helper()
	req := map[string]any{
		"uid":       "0d7a3c2e-5b1f-4d7e-9c11-3f6f2f7b0a01",
		"kind":      map[string]string{"group": group, "version": version, "kind": kind},
		"resource":  map[string]string{"group": group, "version": version, "resource": strings.ToLower(kind) + "s"},
		"name":      name,
		"namespace": ns,
		"operation": op,
		"userInfo":  map[string]any{"username": "admin"},
	}
	if object != "" {
		req["object"] = json.RawMessage(object)
	}
	b, err := json.Marshal(map[string]any{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

const (
	goodVS = `{"apiVersion":"networking.istio.io/v1","kind":"VirtualService","metadata":{"name":"reviews","namespace":"bookinfo","uid":"u1","resourceVersion":"12","generation":1,"creationTimestamp":"2026-01-01T00:00:00Z","managedFields":[{"manager":"kubectl","operation":"Apply","apiVersion":"networking.istio.io/v1","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{}}}]},"spec":{"hosts":["reviews"],"http":[{"route":[{"destination":{"host":"reviews","subset":"v1"},"weight":100}]}]},"status":{}}`
	badVS  = `{"apiVersion":"networking.istio.io/v1","kind":"VirtualService","metadata":{"name":"reviews","namespace":"bookinfo"},"spec":{"hosts":["reviews"],"http":[{"route":[{"destination":{"host":"reviews"},"weight":50},{"destination":{}}]}]}}`
	badSvc = `{"apiVersion":"v1","kind":"Service","metadata":{"name":"Not_A_DNS_Name"},"spec":{}}`
)

func TestReviewAdmission(t *testing.T) {
	tests := []struct {
		name     string
		body     []byte
		allowed  bool
		contains []string // in the denial message
	}{
		{name: "good VirtualService", body: reviewBody(t, "CREATE", "networking.istio.io", "v1", "VirtualService", "bookinfo", "reviews", goodVS), allowed: true},
		{name: "good VirtualService update", body: reviewBody(t, "UPDATE", "networking.istio.io", "v1", "VirtualService", "bookinfo", "reviews", goodVS), allowed: true},
		{name: "bad VirtualService", body: reviewBody(t, "CREATE", "networking.istio.io", "v1", "VirtualService", "bookinfo", "reviews", badVS),
			contains: []string{"configuration is invalid: ", "VirtualService bookinfo/reviews: spec.http[0].route[1].destination.host: required"}},
		{name: "bad VirtualService deleted", body: reviewBody(t, "DELETE", "networking.istio.io", "v1", "VirtualService", "bookinfo", "reviews", ""), allowed: true},
		{name: "Kubernetes kind left to Kubernetes", body: reviewBody(t, "CREATE", "", "v1", "Service", "default", "x", badSvc), allowed: true},
		{name: "kind pilotfish does not read", body: reviewBody(t, "CREATE", "networking.istio.io", "v1beta1", "ProxyConfig", "default", "x", `{"spec":{"bogus":1}}`), allowed: true},
		{name: "object of another kind than the request", body: reviewBody(t, "CREATE", "networking.istio.io", "v1", "VirtualService", "default", "x", badSvc),
			contains: []string{"is not a networking.istio.io/v1"}},
		{name: "no object", body: reviewBody(t, "CREATE", "networking.istio.io", "v1", "VirtualService", "default", "x", ""),
			contains: []string{"no object"}},
		{name: "unknown field", body: reviewBody(t, "CREATE", "security.istio.io", "v1", "AuthorizationPolicy", "default", "deny",
			`{"apiVersion":"security.istio.io/v1","kind":"AuthorizationPolicy","metadata":{"name":"deny"},"spec":{"acton":"DENY"}}`),
			contains: []string{"AuthorizationPolicy default/deny: spec.acton: unknown field"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, resp, err := ingest.ReviewAdmission(tc.body)
			if err != nil {
				t.Fatal(err)
			}
			var back admissionv1.AdmissionReview
			if err := json.Unmarshal(out, &back); err != nil {
				t.Fatal(err)
			}
			if back.APIVersion != "admission.k8s.io/v1" || back.Kind != "AdmissionReview" || back.Request != nil || back.Response == nil {
				t.Fatalf("response review: %s", out)
			}
			if back.Response.UID != "0d7a3c2e-5b1f-4d7e-9c11-3f6f2f7b0a01" || resp.UID != back.Response.UID {
				t.Fatalf("uid %q, want the request's", back.Response.UID)
			}
			if back.Response.Allowed != tc.allowed {
				t.Fatalf("allowed %v, want %v: %s", back.Response.Allowed, tc.allowed, out)
			}
			if tc.allowed {
				if back.Response.Result != nil {
					t.Fatalf("allowed with a result: %s", out)
				}
				return
			}
			if back.Response.Result == nil || back.Response.Result.Code != 422 || back.Response.Result.Reason != "Invalid" {
				t.Fatalf("denial result: %s", out)
			}
			for _, s := range tc.contains {
				if !strings.Contains(back.Response.Result.Message, s) {
					t.Errorf("message %q lacks %q", back.Response.Result.Message, s)
				}
			}
		})
	}
}

func TestReviewAdmissionMalformed(t *testing.T) {
	for name, body := range map[string]string{
		"not JSON":       `{`,
		"wrong version":  `{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{"uid":"1"}}`,
		"wrong kind":     `{"apiVersion":"admission.k8s.io/v1","kind":"Status","request":{"uid":"1"}}`,
		"no request":     `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`,
		"object not raw": `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":1}}`,
	} {
		t.Run(name, func(t *testing.T) {
			out, resp, err := ingest.ReviewAdmission([]byte(body))
			if !errors.Is(err, ingest.ErrAdmissionReview) || out != nil || resp != nil {
				t.Fatalf("got %s, %v, %v; want ErrAdmissionReview", out, resp, err)
			}
		})
	}
}

func TestWebhookHTTP(t *testing.T) {
	srv := httptest.NewServer(ingest.NewWebhook(nil))
	defer srv.Close()
	post := func(ct string, body []byte) *http.Response {
		t.Helper()
		resp, err := http.Post(srv.URL+ingest.WebhookPath, ct, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	bad := reviewBody(t, "CREATE", "networking.istio.io", "v1", "VirtualService", "bookinfo", "reviews", badVS)
	if r := post("application/json; charset=utf-8", bad); r.StatusCode != 200 || r.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("review: %d %q", r.StatusCode, r.Header.Get("Content-Type"))
	}
	if r := post("text/plain", bad); r.StatusCode != http.StatusUnsupportedMediaType {
		t.Fatalf("text/plain: %d", r.StatusCode)
	}
	if r := post("application/json", []byte(`{}`)); r.StatusCode != http.StatusBadRequest {
		t.Fatalf("empty review: %d", r.StatusCode)
	}
	if r := post("application/json", bytes.Repeat([]byte(" "), ingest.MaxAdmissionReviewBytes+1)); r.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("oversized review: %d", r.StatusCode)
	}
	resp, err := http.Get(srv.URL + ingest.WebhookPath)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("GET: %d", resp.StatusCode)
	}
}

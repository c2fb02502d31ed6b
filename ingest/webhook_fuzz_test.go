package ingest_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/pilotfish-mesh/pilotfish/ingest"
	admissionv1 "k8s.io/api/admission/v1"
)

// FuzzAdmissionReview feeds arbitrary bodies to the webhook: it must never
// panic, and must either refuse the body as a malformed review or answer
// with a review carrying the request's UID and, on denial, a message.
func FuzzAdmissionReview(f *testing.F) {
	f.Add(reviewBody(f, "CREATE", "networking.istio.io", "v1", "VirtualService", "bookinfo", "reviews", goodVS))
	f.Add(reviewBody(f, "UPDATE", "networking.istio.io", "v1beta1", "VirtualService", "bookinfo", "reviews", badVS))
	f.Add(reviewBody(f, "DELETE", "networking.istio.io", "v1", "VirtualService", "bookinfo", "reviews", ""))
	f.Add(reviewBody(f, "CREATE", "security.istio.io", "v1", "AuthorizationPolicy", "default", "deny",
		`{"apiVersion":"security.istio.io/v1","kind":"AuthorizationPolicy","metadata":{"name":"deny"},"spec":{"action":"DENY","rules":[{"from":[{"source":{"principals":["*"]}}]}]}}`))
	f.Add(reviewBody(f, "CREATE", "networking.istio.io", "v1", "DestinationRule", "default", "r",
		`{"apiVersion":"networking.istio.io/v1","kind":"DestinationRule","metadata":{"name":"r"},"spec":{"host":"r","trafficPolicy":{"loadBalancer":{"simple":"ROUND_ROBIN"}}}}`))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"1","operation":"CREATE","kind":{"group":"networking.istio.io","version":"v1","kind":"Gateway"},"object":[]}}`))
	// Unsupported fields, and a supported field's value the ledger warns
	// about (targets that attach to waypoints only).
	f.Add(reviewBody(f, "CREATE", "networking.istio.io", "v1", "VirtualService", "shop", "reviews",
		`{"apiVersion":"networking.istio.io/v1","kind":"VirtualService","metadata":{"name":"reviews"},"spec":{"hosts":["reviews"],`+
			`"tcp":[{"match":[{"port":5432},{"sourceSubnet":"10.0.0.0/8"}],"route":[{"destination":{"host":"reviews"}}]}]}}`))
	f.Add(reviewBody(f, "CREATE", "networking.istio.io", "v1", "Gateway", "shop", "gw",
		`{"apiVersion":"networking.istio.io/v1","kind":"Gateway","metadata":{"name":"gw"},"spec":{"servers":[`+
			`{"port":{"number":443,"name":"https","protocol":"HTTPS"},"hosts":["*/*"],"bind":"10.0.0.1","defaultEndpoint":"127.0.0.1:8080",`+
			`"tls":{"mode":"MUTUAL","credentialName":"c","caCertCredentialName":"ca","insecureSkipVerify":true}}]}}`))
	f.Add(reviewBody(f, "CREATE", "security.istio.io", "v1", "AuthorizationPolicy", "shop", "svc",
		`{"apiVersion":"security.istio.io/v1","kind":"AuthorizationPolicy","metadata":{"name":"svc"},`+
			`"spec":{"targetRefs":[{"kind":"Service","name":"reviews"}],"action":"DENY","rules":[{}]}}`))
	f.Add([]byte(`{`))
	f.Fuzz(func(t *testing.T, body []byte) {
		out, resp, err := ingest.ReviewAdmission(body)
		if err != nil {
			if !errors.Is(err, ingest.ErrAdmissionReview) || out != nil || resp != nil {
				t.Fatalf("error %v with output %s", err, out)
			}
			return
		}
		var in, back admissionv1.AdmissionReview
		if err := json.Unmarshal(body, &in); err != nil {
			t.Fatalf("accepted a body that does not decode: %v", err)
		}
		if err := json.Unmarshal(out, &back); err != nil {
			t.Fatalf("response does not decode: %v\n%s", err, out)
		}
		if back.Response == nil || back.Response.UID != in.Request.UID {
			t.Fatalf("response %s does not answer uid %q", out, in.Request.UID)
		}
		if !back.Response.Allowed && (back.Response.Result == nil || back.Response.Result.Message == "") {
			t.Fatalf("denial without a message: %s", out)
		}
		// Warnings stay within what the API server passes on untruncated.
		total := 0
		for _, w := range back.Response.Warnings {
			if len(w) > 256 || w == "" {
				t.Fatalf("warning of %d bytes: %q", len(w), w)
			}
			total += len(w)
		}
		if total > 4096 {
			t.Fatalf("warnings of %d bytes in all", total)
		}
	})
}

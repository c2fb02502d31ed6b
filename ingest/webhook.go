package ingest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// WebhookPath is where the API server posts AdmissionReviews: istiod's
// validation path, so an existing ValidatingWebhookConfiguration works.
const WebhookPath = "/validate"

// MaxAdmissionReviewBytes bounds a review's body: the API server's 3 MiB
// object limit, twice (object and oldObject of an update), plus the
// review's own fields.
const MaxAdmissionReviewBytes = 7 << 20

// ErrAdmissionReview: a request that is not a well-formed AdmissionReview v1
// (the API server never sends one; the HTTP answer is 400).
var ErrAdmissionReview = errors.New("bad AdmissionReview")

// NewWebhook returns the validating admission webhook's handler: it answers
// AdmissionReview v1 requests for the Istio kinds pilotfish reads with
// exactly the checks of `pilotfish validate` (Decode, then Validate), and
// admits every other kind and every DELETE or CONNECT untouched. Fields
// pilotfish does not support (Unsupported, the field ledger) come back as
// the response's warnings, which kubectl prints ("Warning: ..."); they do
// not deny. log gets one Info line per denial; nil discards.
func NewWebhook(log *slog.Logger) http.Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &webhook{log: log}
}

type webhook struct{ log *slog.Logger }

func (w *webhook) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		rw.Header().Set("Allow", http.MethodPost)
		http.Error(rw, "POST an AdmissionReview", http.StatusMethodNotAllowed)
		return
	}
	if ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); ct != "application/json" {
		http.Error(rw, "Content-Type must be application/json", http.StatusUnsupportedMediaType)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxAdmissionReviewBytes+1))
	if err != nil {
		http.Error(rw, "reading the body: "+err.Error(), http.StatusBadRequest)
		return
	}
	if len(body) > MaxAdmissionReviewBytes {
		http.Error(rw, fmt.Sprintf("AdmissionReview larger than %d bytes", MaxAdmissionReviewBytes), http.StatusRequestEntityTooLarge)
		return
	}
	out, resp, err := ReviewAdmission(body)
	if err != nil {
		http.Error(rw, err.Error(), http.StatusBadRequest)
		return
	}
	if !resp.Allowed {
		w.log.Info("admission denied", "uid", resp.UID, "reason", resp.Result.Message)
	}
	rw.Header().Set("Content-Type", "application/json")
	_, _ = rw.Write(out)
}

// ReviewAdmission answers one AdmissionReview v1 body: the response review
// (JSON) and its decoded Response. A denial's Result.Message lists each
// problem as "Kind namespace/name: field.path: message", the lines of
// `pilotfish validate` without the file position (the API server's JSON
// has none worth giving). err wraps ErrAdmissionReview.
func ReviewAdmission(body []byte) ([]byte, *admissionv1.AdmissionResponse, error) {
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &review); err != nil {
		return nil, nil, fmt.Errorf("%w: %s", ErrAdmissionReview, cleanJSONError(err))
	}
	if gv := admissionv1.SchemeGroupVersion.String(); review.APIVersion != gv || review.Kind != "AdmissionReview" {
		return nil, nil, fmt.Errorf("%w: apiVersion %q kind %q, want %s AdmissionReview", ErrAdmissionReview, review.APIVersion, review.Kind, gv)
	}
	if review.Request == nil {
		return nil, nil, fmt.Errorf("%w: no request", ErrAdmissionReview)
	}
	resp := admit(review.Request)
	out, err := json.Marshal(admissionv1.AdmissionReview{TypeMeta: review.TypeMeta, Response: resp})
	if err != nil {
		return nil, nil, err // a response of plain strings always marshals
	}
	return out, resp, nil
}

// admit decides one request.
func admit(req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	allow := &admissionv1.AdmissionResponse{UID: req.UID, Allowed: true}
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return allow
	}
	apiVersion := req.Kind.Version
	if req.Kind.Group != "" {
		apiVersion = req.Kind.Group + "/" + req.Kind.Version
	}
	k, known, _ := lookupKind(apiVersion, req.Kind.Kind)
	if !known || !kinds[k].istio() {
		// Registered for more than it checks (a wildcard rule): pilotfish
		// validates only the Istio kinds it reads; Kubernetes validates
		// its own kinds.
		return allow
	}
	if len(req.Object.Raw) == 0 {
		return deny(req.UID, []string{fmt.Sprintf("%s %s: no object in the request", req.Kind.Kind, req.Name)})
	}
	objs, errs := Decode("", req.Object.Raw)
	if len(errs) == 0 && (len(objs) != 1 || objs[0].Kind != k) {
		// The object's own apiVersion/kind is not the request's: refuse
		// what cannot be checked as what it claims to be.
		return deny(req.UID, []string{fmt.Sprintf("%s %s: object is not a %s %s", req.Kind.Kind, req.Name, apiVersion, req.Kind.Kind)})
	}
	var warnings []string
	if len(errs) == 0 {
		errs = Validate(&objs[0])
		warnings = admissionWarnings(req, Unsupported(&objs[0]))
	}
	if len(errs) == 0 {
		allow.Warnings = warnings
		return allow
	}
	msgs := make([]string, 0, len(errs))
	for _, err := range errs {
		msgs = append(msgs, admissionMessage(req, err))
	}
	resp := deny(req.UID, msgs)
	resp.Warnings = warnings
	return resp
}

// admissionMessage renders a problem as "Kind namespace/name: field.path:
// message": without the file position ("line 1" of the API server's
// one-line JSON says nothing), in the request's namespace when the object
// omits its own.
func admissionMessage(req *admissionv1.AdmissionRequest, err error) string {
	var e *Error
	if !errors.As(err, &e) {
		return err.Error()
	}
	c := *e
	c.Pos = Position{}
	if req.Namespace != "" && (c.Namespace == "" || c.Namespace == "default") {
		c.Namespace = req.Namespace
	}
	if c.cause == ErrIgnored {
		c.cause = nil // kubectl prints "Warning: " itself
	}
	return c.Error()
}

// The API server truncates each warning past 256 characters once the
// warnings of a response pass 4096 (k8s.io/apiserver's warning recorder);
// the webhook keeps under both, so what kubectl prints is whole.
const (
	maxWarningLen     = 200 // a ledger message; checked by TestLedgerComplete
	maxAdmissionWarn  = 256
	maxAdmissionTotal = 3500 // room for the API server's own warnings
)

// admissionWarnings renders the ledger's warnings for an admission
// response, each at most maxAdmissionWarn characters and together at most
// maxAdmissionTotal; what does not fit is summed up in a last warning.
func admissionWarnings(req *admissionv1.AdmissionRequest, warns []error) []string {
	if len(warns) == 0 {
		return nil
	}
	out := make([]string, 0, len(warns))
	total := 0
	for i, w := range warns {
		msg := admissionMessage(req, w)
		if len(msg) > maxAdmissionWarn {
			msg = msg[:maxAdmissionWarn-3] + "..."
		}
		if total+len(msg) > maxAdmissionTotal {
			out = append(out, fmt.Sprintf("%d more fields not supported by pilotfish: run `pilotfish validate` on the object to list them", len(warns)-i))
			break
		}
		total += len(msg)
		out = append(out, msg)
	}
	return out
}

func deny(uid types.UID, msgs []string) *admissionv1.AdmissionResponse {
	return &admissionv1.AdmissionResponse{
		UID:     uid,
		Allowed: false,
		Result: &metav1.Status{
			Status:  metav1.StatusFailure,
			Reason:  metav1.StatusReasonInvalid,
			Code:    http.StatusUnprocessableEntity,
			Message: "configuration is invalid: " + strings.Join(msgs, "; "),
		},
	}
}

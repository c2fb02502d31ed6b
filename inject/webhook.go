package inject

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Path is where the API server posts a pod for injection: istiod's, so
// istiod's MutatingWebhookConfiguration works unchanged. Below it,
// /inject/cluster/<id>/net/<network> sets the proxy's cluster and network
// (istiod's path parameters, for a webhook serving remote clusters).
const Path = "/inject"

// MaxReviewBytes bounds a review's body: the API server's 3 MiB object
// limit, twice (object and oldObject), plus the review's own fields.
const MaxReviewBytes = 7 << 20

// The AdmissionReview versions served: istiod answers both, each in the
// version it was asked in.
var reviewVersions = []string{"admission.k8s.io/v1", "admission.k8s.io/v1beta1"}

// Metrics receives the webhook's events; cmd names them as istiod does
// (sidecar_injection_*). Every request is a Request; one policy leaves
// alone is also Skipped; one that is not a usable review or whose pod is
// denied is also Failed; every review answered (denials too, as istiod
// counts them) is Answered with the time it took.
type Metrics interface {
	Request()
	Skipped()
	Failed()
	Answered(took time.Duration)
}

type noMetrics struct{}

func (noMetrics) Request()               {}
func (noMetrics) Skipped()               {}
func (noMetrics) Failed()                {}
func (noMetrics) Answered(time.Duration) {}

// NewWebhook returns the injection webhook's handler (mount it at Path
// and Path+"/"). log gets one Info line per denial and a Debug line per
// injection; nil discards. m may be nil.
func NewWebhook(in *Injector, log *slog.Logger, m Metrics) http.Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if m == nil {
		m = noMetrics{}
	}
	return &webhook{in: in, log: log, m: m}
}

type webhook struct {
	in  *Injector
	log *slog.Logger
	m   Metrics
}

func (w *webhook) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	start := time.Now()
	w.m.Request()
	fail := func(msg string, code int) {
		w.m.Failed()
		http.Error(rw, msg, code)
	}
	if r.Method != http.MethodPost {
		rw.Header().Set("Allow", http.MethodPost)
		fail("POST an AdmissionReview", http.StatusMethodNotAllowed)
		return
	}
	if ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); ct != "application/json" {
		fail("Content-Type must be application/json", http.StatusUnsupportedMediaType)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxReviewBytes+1))
	if err != nil {
		fail("reading the body: "+err.Error(), http.StatusBadRequest)
		return
	}
	if len(body) > MaxReviewBytes {
		fail(fmt.Sprintf("AdmissionReview larger than %d bytes", MaxReviewBytes), http.StatusRequestEntityTooLarge)
		return
	}
	out, resp, err := w.in.Review(body, r.URL.Path)
	if err != nil {
		fail(err.Error(), http.StatusBadRequest)
		return
	}
	switch {
	case !resp.Allowed:
		w.m.Failed()
		w.log.Info("injection denied", "uid", resp.UID, "reason", resp.Result.Message)
	case resp.Patch == nil:
		w.m.Skipped()
		w.log.Debug("injection not required", "uid", resp.UID)
	default:
		w.log.Debug("injection reviewed", "uid", resp.UID, "patched", true)
	}
	rw.Header().Set("Content-Type", "application/json")
	if _, err := rw.Write(out); err == nil {
		w.m.Answered(time.Since(start))
	}
}

// Review answers one AdmissionReview body posted to path: the response
// review (JSON, in the request's version) and its Response. A pod that
// policy leaves alone is allowed without a patch; one that cannot be
// injected is denied with the reason. err (wrapping ErrAdmissionReview)
// means the body is not a review at all.
func (in *Injector) Review(body []byte, path string) ([]byte, *admissionv1.AdmissionResponse, error) {
	var review admissionv1.AdmissionReview // v1beta1's JSON is the same shape
	if err := json.Unmarshal(body, &review); err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrAdmissionReview, err)
	}
	if !contains(reviewVersions, review.APIVersion) || review.Kind != "AdmissionReview" {
		return nil, nil, fmt.Errorf("%w: apiVersion %q kind %q, want AdmissionReview of %s", ErrAdmissionReview,
			review.APIVersion, review.Kind, strings.Join(reviewVersions, " or "))
	}
	if review.Request == nil {
		return nil, nil, fmt.Errorf("%w: no request", ErrAdmissionReview)
	}
	resp := in.admit(review.Request, path)
	out, err := json.Marshal(admissionv1.AdmissionReview{TypeMeta: review.TypeMeta, Response: resp})
	if err != nil {
		return nil, nil, err
	}
	return out, resp, nil
}

func (in *Injector) admit(req *admissionv1.AdmissionRequest, path string) *admissionv1.AdmissionResponse {
	if req.Kind.Kind != "" && (req.Kind.Group != "" || req.Kind.Kind != "Pod") {
		return deny(req.UID, fmt.Sprintf("%s %s: the injector reviews Pods, not %s", req.Kind.Kind, req.Name, req.Kind.Kind))
	}
	var pod corev1.Pod
	if err := json.Unmarshal(req.Object.Raw, &pod); err != nil {
		return deny(req.UID, fmt.Sprintf("%v: pod %s/%s: %v", ErrPod, req.Namespace, req.Name, err))
	}
	res, err := in.Inject(Request{Pod: &pod, Namespace: req.Namespace, ProxyEnvs: pathEnvs(path)})
	if err != nil {
		return deny(req.UID, err.Error())
	}
	resp := &admissionv1.AdmissionResponse{UID: req.UID, Allowed: true}
	if res.Injected {
		pt := admissionv1.PatchTypeJSONPatch
		resp.Patch, resp.PatchType = res.Patch, &pt
	}
	return resp
}

func deny(uid types.UID, msg string) *admissionv1.AdmissionResponse {
	return &admissionv1.AdmissionResponse{UID: uid, Allowed: false, Result: &metav1.Status{
		Status:  metav1.StatusFailure,
		Reason:  metav1.StatusReasonBadRequest,
		Code:    http.StatusBadRequest,
		Message: "sidecar injection failed: " + msg,
	}}
}

// pathEnvs reads the proxy envs of a path below Path: /inject/k1/v1/k2/v2
// ("cluster" is ISTIO_META_CLUSTER_ID, "net" ISTIO_META_NETWORK, any
// other key its upper case; "--slash--" in a value is "/"), or istiod's
// older /inject/:ENV:K=V:ENV:K2=V2. A key without a value is ignored.
func pathEnvs(path string) map[string]string {
	rest, ok := strings.CutPrefix(strings.TrimSuffix(path, "/"), Path+"/")
	if !ok || rest == "" {
		return nil
	}
	out := map[string]string{}
	if strings.HasPrefix(rest, ":ENV:") {
		for _, kv := range strings.Split(rest, ":ENV:")[1:] {
			if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
				out[envName(k)] = v
			}
		}
		return out
	}
	parts := strings.Split(rest, "/")
	for i := 0; i+1 < len(parts); i += 2 {
		if parts[i] == "" {
			continue
		}
		out[envName(parts[i])] = strings.ReplaceAll(parts[i+1], "--slash--", "/")
	}
	return out
}

func envName(k string) string {
	switch k {
	case "cluster":
		return "ISTIO_META_CLUSTER_ID"
	case "net":
		return "ISTIO_META_NETWORK"
	}
	return strings.ToUpper(k)
}

package inject_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/pilotfish-mesh/pilotfish/inject"
)

func testInjector(t testing.TB) *inject.Injector {
	t.Helper()
	in, err := inject.New(settings(t, "default", false), nil)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

func review(apiVersion, uid, ns string, pod []byte) []byte {
	return []byte(`{"apiVersion":"` + apiVersion + `","kind":"AdmissionReview","request":{"uid":"` + uid +
		`","kind":{"group":"","version":"v1","kind":"Pod"},"resource":{"group":"","version":"v1","resource":"pods"},` +
		`"namespace":"` + ns + `","operation":"CREATE","object":` + string(pod) + `}}`)
}

const plainPod = `{"apiVersion":"v1","kind":"Pod","metadata":{"generateName":"web-","labels":{"app":"web"}},"spec":{"containers":[{"name":"web","image":"nginx"}]}}`

func post(t *testing.T, h http.Handler, path, ctype string, body []byte) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
	r.Header.Set("Content-Type", ctype)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// TestWebhookReviewVersions: a v1 and a v1beta1 review each get a JSON
// patch in their own version, with the request's UID, and the patch
// applied to the pod gives an injected pod in the request's namespace.
func TestWebhookReviewVersions(t *testing.T) {
	h := inject.NewWebhook(testInjector(t), nil, nil)
	for _, v := range []string{"admission.k8s.io/v1", "admission.k8s.io/v1beta1"} {
		t.Run(v, func(t *testing.T) {
			w := post(t, h, "/inject", "application/json", review(v, "u-7", "shop", []byte(plainPod)))
			if w.Code != http.StatusOK {
				t.Fatalf("status %d: %s", w.Code, w.Body)
			}
			var out admissionv1.AdmissionReview
			if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
				t.Fatal(err)
			}
			r := out.Response
			if out.APIVersion != v || r == nil || r.UID != "u-7" || !r.Allowed || r.PatchType == nil || *r.PatchType != admissionv1.PatchTypeJSONPatch {
				t.Fatalf("response %s", w.Body)
			}
			var pod corev1.Pod
			if err := json.Unmarshal([]byte(plainPod), &pod); err != nil {
				t.Fatal(err)
			}
			got := applyPatch(t, &pod, r.Patch)
			if len(got.Spec.Containers) != 2 || got.Spec.Containers[1].Name != "istio-proxy" ||
				len(got.Spec.InitContainers) != 1 || got.Annotations["sidecar.istio.io/status"] == "" {
				t.Fatalf("patched pod: containers %v init %v", got.Spec.Containers, got.Spec.InitContainers)
			}
		})
	}
}

// TestWebhookLeavesOptOutAlone: policy's "no" is an allowed response
// without a patch.
func TestWebhookLeavesOptOutAlone(t *testing.T) {
	h := inject.NewWebhook(testInjector(t), nil, nil)
	pod := strings.Replace(plainPod, `"labels":{"app":"web"}`, `"labels":{"app":"web","sidecar.istio.io/inject":"false"}`, 1)
	w := post(t, h, "/inject", "application/json", review("admission.k8s.io/v1", "u-1", "shop", []byte(pod)))
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil || out.Response == nil {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if !out.Response.Allowed || out.Response.Patch != nil || out.Response.PatchType != nil {
		t.Fatalf("response %s, want allowed without a patch", w.Body)
	}
}

// TestWebhookDenials: a pod that cannot be injected is denied, naming the
// reason; a body that is not a review is a 400; the wrong method, type
// or size are refused before decoding.
func TestWebhookDenials(t *testing.T) {
	h := inject.NewWebhook(testInjector(t), nil, nil)
	denied := func(pod, want string) {
		t.Helper()
		w := post(t, h, "/inject", "application/json", review("admission.k8s.io/v1", "u-2", "shop", []byte(pod)))
		var out admissionv1.AdmissionReview
		if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil || out.Response == nil {
			t.Fatalf("%d %s", w.Code, w.Body)
		}
		r := out.Response
		if r.Allowed || r.Patch != nil || r.Result == nil || !strings.Contains(r.Result.Message, want) || r.UID != "u-2" {
			t.Fatalf("response %s, want a denial naming %q", w.Body, want)
		}
	}
	denied(strings.Replace(plainPod, `"labels":{"app":"web"}`, `"annotations":{"traffic.sidecar.istio.io/includeOutboundIPRanges":"10.0.0.0/33"}`, 1),
		`traffic.sidecar.istio.io/includeOutboundIPRanges="10.0.0.0/33"`)
	denied(strings.Replace(plainPod, `"labels":{"app":"web"}`, `"annotations":{"inject.istio.io/templates":"nope"}`, 1),
		`"nope" not found; have agentgateway, agentgateway-waypoint, gateway, grpc-agent`)
	denied(`{"spec":{"containers":"not a list"}}`, "bad pod: pod shop/")

	for _, tc := range []struct {
		name, method, ctype string
		body                []byte
		code                int
	}{
		{"get", http.MethodGet, "application/json", nil, http.StatusMethodNotAllowed},
		{"yaml", http.MethodPost, "application/yaml", []byte("{}"), http.StatusUnsupportedMediaType},
		{"not json", http.MethodPost, "application/json", []byte("{"), http.StatusBadRequest},
		{"wrong kind", http.MethodPost, "application/json", []byte(`{"apiVersion":"v1","kind":"Pod"}`), http.StatusBadRequest},
		{"no request", http.MethodPost, "application/json", []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`), http.StatusBadRequest},
		{"too large", http.MethodPost, "application/json", bytes.Repeat([]byte(" "), inject.MaxReviewBytes+1), http.StatusRequestEntityTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(tc.method, "/inject", bytes.NewReader(tc.body))
			r.Header.Set("Content-Type", tc.ctype)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tc.code {
				t.Fatalf("status %d (%s), want %d", w.Code, w.Body, tc.code)
			}
		})
	}
	if _, _, err := testInjector(t).Review([]byte(`{"apiVersion":"admission.k8s.io/v2","kind":"AdmissionReview","request":{}}`), "/inject"); !errors.Is(err, inject.ErrAdmissionReview) {
		t.Fatalf("unknown version: %v", err)
	}
}

// TestWebhookPathParameters: /inject/cluster/X/net/Y set the proxy's
// cluster and network (after the template's envs, in name order) and the
// network label, as istiod's path parameters do.
func TestWebhookPathParameters(t *testing.T) {
	in := testInjector(t)
	for _, path := range []string{"/inject/cluster/east/net/net--slash--1", "/inject/:ENV:cluster=east:ENV:net=net/1"} {
		out, resp, err := in.Review(review("admission.k8s.io/v1", "u-3", "shop", []byte(plainPod)), path)
		if err != nil || !resp.Allowed {
			t.Fatalf("%s: %v %s", path, err, out)
		}
		var pod corev1.Pod
		_ = json.Unmarshal([]byte(plainPod), &pod)
		got := applyPatch(t, &pod, resp.Patch)
		proxy := got.Spec.Containers[len(got.Spec.Containers)-1]
		env := proxy.Env[len(proxy.Env)-2:]
		if env[0].Name != "ISTIO_META_CLUSTER_ID" || env[0].Value != "east" || env[1].Name != "ISTIO_META_NETWORK" || env[1].Value != "net/1" {
			t.Fatalf("%s: last envs %v", path, env)
		}
		if got.Labels["topology.istio.io/network"] != "net/1" {
			t.Fatalf("%s: labels %v", path, got.Labels)
		}
	}
}

// TestPolicy checks the decision istiod makes before any template: the
// config's policy, the selectors, and the explicit opt-in and opt-out.
func TestPolicy(t *testing.T) {
	cfgBytes, err := os.ReadFile("testdata/chart/default/config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	withPolicy := func(policy, extra string) *inject.Injector {
		t.Helper()
		c := strings.Replace(string(cfgBytes), "policy: enabled", "policy: "+policy, 1)
		c = strings.Replace(c, "neverInjectSelector:\n  []", "neverInjectSelector:\n  - matchLabels: {tier: infra}", 1)
		c = strings.Replace(c, "alwaysInjectSelector:\n  []", "alwaysInjectSelector:\n  - matchExpressions: [{key: mesh, operator: In, values: [\"yes\"]}]", 1)
		c = strings.Replace(c, "injectedAnnotations:\n", "injectedAnnotations:\n  example.com/injected: \"yes\"\n"+extra, 1)
		cfg, err := inject.ParseConfig([]byte(c))
		if err != nil {
			t.Fatal(err)
		}
		s := settings(t, "default", false)
		s.Config = cfg
		in, err := inject.New(s, nil)
		if err != nil {
			t.Fatal(err)
		}
		return in
	}
	pod := func(labels, annotations map[string]string) *corev1.Pod {
		return &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "busybox"}}},
			ObjectMeta: metav1ObjectMeta("p", "shop", labels, annotations)}
	}
	for _, tc := range []struct {
		name, policy string
		labels, anns map[string]string
		want         bool
	}{
		{"enabled by default", "enabled", nil, nil, true},
		{"disabled by default", "disabled", nil, nil, false},
		{"disabled, label opts in", "disabled", map[string]string{"sidecar.istio.io/inject": "true"}, nil, true},
		{"disabled, annotation opts in", "disabled", nil, map[string]string{"sidecar.istio.io/inject": "true"}, true},
		{"enabled, annotation opts out", "enabled", nil, map[string]string{"sidecar.istio.io/inject": "false"}, false},
		{"label wins over annotation", "enabled", map[string]string{"sidecar.istio.io/inject": "false"}, map[string]string{"sidecar.istio.io/inject": "true"}, false},
		{"bad value is unset", "disabled", map[string]string{"sidecar.istio.io/inject": "yes"}, nil, false},
		{"never selector", "enabled", map[string]string{"tier": "infra"}, nil, false},
		{"always selector", "disabled", map[string]string{"mesh": "yes"}, nil, true},
		{"never before always", "disabled", map[string]string{"mesh": "yes", "tier": "infra"}, nil, false},
		{"explicit wins over never", "enabled", map[string]string{"tier": "infra", "sidecar.istio.io/inject": "true"}, nil, true},
		{"unknown policy injects nothing", "sometimes", nil, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := withPolicy(tc.policy, "").Inject(inject.Request{Pod: pod(tc.labels, tc.anns)})
			if err != nil {
				t.Fatal(err)
			}
			if res.Injected != tc.want {
				t.Fatalf("injected %v, want %v", res.Injected, tc.want)
			}
			if res.Injected && res.Pod.Annotations["example.com/injected"] != "yes" {
				t.Fatalf("injectedAnnotations not applied: %v", res.Pod.Annotations)
			}
		})
	}
	if _, err := inject.ParseConfig([]byte("neverInjectSelector:\n- matchExpressions: [{key: a, operator: Bogus}]\n")); !errors.Is(err, inject.ErrConfig) ||
		!strings.Contains(err.Error(), "neverInjectSelector[0]") {
		t.Fatalf("bad selector: %v", err)
	}
	if _, err := inject.ParseConfig([]byte("templates:\n  broken: '{{ if }}'\n")); !errors.Is(err, inject.ErrConfig) || !strings.Contains(err.Error(), "templates.broken") {
		t.Fatalf("bad template: %v", err)
	}
}

// countMetrics counts the webhook's events.
type countMetrics struct{ requests, skipped, failed, answered int }

func (c *countMetrics) Request()               { c.requests++ }
func (c *countMetrics) Skipped()               { c.skipped++ }
func (c *countMetrics) Failed()                { c.failed++ }
func (c *countMetrics) Answered(time.Duration) { c.answered++ }

// TestWebhookMetrics: every request counts; a pod policy leaves alone is
// skipped, a denied pod and a body that is not a review failed; every
// review answered (the denial too, as istiod counts it) is answered.
func TestWebhookMetrics(t *testing.T) {
	m := &countMetrics{}
	h := inject.NewWebhook(testInjector(t), nil, m)
	post(t, h, "/inject", "application/json", review("admission.k8s.io/v1", "u-1", "shop", []byte(plainPod)))
	optOut := strings.Replace(plainPod, `"labels":{"app":"web"}`, `"labels":{"app":"web","sidecar.istio.io/inject":"false"}`, 1)
	post(t, h, "/inject", "application/json", review("admission.k8s.io/v1", "u-2", "shop", []byte(optOut)))
	bad := strings.Replace(plainPod, `"labels":{"app":"web"}`, `"annotations":{"traffic.sidecar.istio.io/includeOutboundIPRanges":"10.0.0.0/33"}`, 1)
	post(t, h, "/inject", "application/json", review("admission.k8s.io/v1", "u-3", "shop", []byte(bad)))
	post(t, h, "/inject", "application/json", []byte(`{"kind":"Pod"}`))
	want := countMetrics{requests: 4, skipped: 1, failed: 2, answered: 3}
	if *m != want {
		t.Errorf("metrics %+v, want %+v", *m, want)
	}
}

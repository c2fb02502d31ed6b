package bench

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/pilotfish-mesh/pilotfish/loadgen"
)

// Injection load: AdmissionReviews of a corpus of Pods posted to
// sidecar-injection webhooks (pilotfish's and istiod's answer the same
// request at /inject), at a fixed concurrency, with each server's CPU
// time and resident set read from /proc/PID before and after. The
// targets take turns round by round in one run, so they see the same
// machine load; CPU per injection is the server's own CPU time over the
// reviews it answered, whatever else the machine does.

// ErrInjectLoad reports a driver or target that cannot run.
var ErrInjectLoad = errors.New("injection load")

// InjectTarget is one webhook to drive.
type InjectTarget struct {
	Name string
	// URL is the webhook's endpoint (https://127.0.0.1:15017/inject).
	URL string
	// PID is the server's process; its CPU and RSS are read from /proc.
	PID int
}

// InjectOptions shape an injection load run.
type InjectOptions struct {
	Targets []InjectTarget
	// Reviews are AdmissionReview bodies (JSON), posted in turn.
	Reviews [][]byte
	// Concurrency is how many requests are in flight at once (100).
	Concurrency int
	// Requests per target per round; Rounds the rounds (targets take
	// turns within each); Warmup requests per target before the first.
	Requests, Rounds, Warmup int
	// Timeout bounds one request (10 s).
	Timeout time.Duration
}

// InjectResult is one target's figures over every round.
type InjectResult struct {
	Name     string `json:"name"`
	Requests int    `json:"requests"`
	// Patched, Allowed (no patch) and Denied count the reviews by
	// answer; Errors the requests that got no review back.
	Patched int `json:"patched"`
	Allowed int `json:"allowed"`
	Denied  int `json:"denied"`
	Errors  int `json:"errors"`
	// CPUSeconds is the server's user+system time over the rounds;
	// CPUPerRequest that over Requests.
	CPUSeconds    float64       `json:"cpu_seconds"`
	CPUPerRequest time.Duration `json:"cpu_per_request_ns"`
	P50           time.Duration `json:"p50_ns"`
	P99           time.Duration `json:"p99_ns"`
	Wall          time.Duration `json:"wall_ns"`
	// RSSBefore is after the warmup; RSSAfter after the last round.
	RSSBefore int64 `json:"rss_before_bytes"`
	RSSAfter  int64 `json:"rss_after_bytes"`
	// FirstError is the first failed request's error, for the report.
	FirstError string `json:"first_error,omitempty"`
}

// RunInject drives every target and returns their results in order.
func RunInject(ctx context.Context, o InjectOptions) ([]InjectResult, error) {
	if len(o.Targets) == 0 || len(o.Reviews) == 0 {
		return nil, fmt.Errorf("%w: no targets or no reviews", ErrInjectLoad)
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 100
	}
	if o.Rounds <= 0 {
		o.Rounds = 1
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	// Loopback webhooks with their own (self-signed or private) roots:
	// the driver measures them, it does not authenticate them.
	tr := &http.Transport{
		TLSClientConfig:     &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // loopback load test
		MaxIdleConns:        2 * o.Concurrency,
		MaxIdleConnsPerHost: o.Concurrency,
		MaxConnsPerHost:     o.Concurrency,
		IdleConnTimeout:     time.Minute,
	}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: o.Timeout}
	res := make([]InjectResult, len(o.Targets))
	lat := make([][]time.Duration, len(o.Targets))
	for i, t := range o.Targets {
		res[i].Name = t.Name
		if _, _, err := procStat(t.PID); err != nil {
			return nil, fmt.Errorf("%w: target %s: %v", ErrInjectLoad, t.Name, err)
		}
		if o.Warmup > 0 {
			var w InjectResult
			if _, err := injectRound(ctx, hc, t, o, o.Warmup, &w); err != nil {
				return nil, err
			}
			if w.Errors == w.Requests {
				return nil, fmt.Errorf("%w: target %s: every warmup request failed: %s", ErrInjectLoad, t.Name, w.FirstError)
			}
		}
		_, res[i].RSSBefore, _ = procStat(t.PID)
	}
	for range o.Rounds {
		for i, t := range o.Targets {
			cpu0, _, err := procStat(t.PID)
			if err != nil {
				return nil, fmt.Errorf("%w: target %s: %v", ErrInjectLoad, t.Name, err)
			}
			start := time.Now()
			l, err := injectRound(ctx, hc, t, o, o.Requests, &res[i])
			if err != nil {
				return nil, err
			}
			res[i].Wall += time.Since(start)
			cpu1, rss, err := procStat(t.PID)
			if err != nil {
				return nil, fmt.Errorf("%w: target %s: %v", ErrInjectLoad, t.Name, err)
			}
			res[i].CPUSeconds += cpu1 - cpu0
			res[i].RSSAfter = rss
			lat[i] = append(lat[i], l...)
		}
	}
	for i := range res {
		if res[i].Requests > 0 {
			res[i].CPUPerRequest = time.Duration(res[i].CPUSeconds / float64(res[i].Requests) * float64(time.Second))
		}
		slices.Sort(lat[i])
		res[i].P50, res[i].P99 = durationQuantile(lat[i], 0.50), durationQuantile(lat[i], 0.99)
	}
	return res, ctx.Err()
}

func durationQuantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// injectRound posts n reviews with o.Concurrency workers, counting the
// answers into r, and returns each request's latency.
func injectRound(ctx context.Context, hc *http.Client, t InjectTarget, o InjectOptions, n int, r *InjectResult) ([]time.Duration, error) {
	var next atomic.Int64
	lat := make([]time.Duration, n)
	var mu sync.Mutex // guards r
	var wg sync.WaitGroup
	for range min(o.Concurrency, n) {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				start := time.Now()
				kind, err := postReview(ctx, hc, t.URL, o.Reviews[i%len(o.Reviews)])
				lat[i] = time.Since(start)
				mu.Lock()
				r.Requests++
				switch {
				case err != nil:
					r.Errors++
					if r.FirstError == "" {
						r.FirstError = err.Error()
					}
				case kind == reviewPatched:
					r.Patched++
				case kind == reviewAllowed:
					r.Allowed++
				default:
					r.Denied++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return lat, ctx.Err()
}

type reviewAnswer int

const (
	reviewPatched reviewAnswer = iota
	reviewAllowed
	reviewDenied
)

func postReview(ctx context.Context, hc *http.Client, url string, body []byte) (reviewAnswer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("HTTP %d: %.200s", resp.StatusCode, b)
	}
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(b, &out); err != nil || out.Response == nil {
		return 0, fmt.Errorf("not an AdmissionReview: %.200s", b)
	}
	switch {
	case !out.Response.Allowed:
		return reviewDenied, nil
	case len(out.Response.Patch) > 0:
		return reviewPatched, nil
	}
	return reviewAllowed, nil
}

// InjectCorpus reads the Pods and Deployments of dir/*.yaml (inject's
// corpus layout: files ending in .istioctl.yaml are outputs and skipped)
// and returns one AdmissionReview (v1, CREATE) per Pod; a Deployment
// becomes the Pod its ReplicaSet would create (generateName, template
// metadata, the Deployment's namespace).
func InjectCorpus(dir string) ([][]byte, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	var out [][]byte
	for _, f := range files {
		if strings.HasSuffix(f, ".istioctl.yaml") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInjectLoad, err)
		}
		pod, err := corpusPod(b)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrInjectLoad, f, err)
		}
		review, err := podReview(pod, fmt.Sprintf("bench-%d", len(out)))
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrInjectLoad, f, err)
		}
		out = append(out, review)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: no Pods or Deployments in %s", ErrInjectLoad, dir)
	}
	return out, nil
}

func corpusPod(b []byte) (*corev1.Pod, error) {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(b, &tm); err != nil {
		return nil, err
	}
	switch tm.Kind {
	case "Pod":
		var p corev1.Pod
		if err := yaml.Unmarshal(b, &p); err != nil {
			return nil, err
		}
		if p.Namespace == "" {
			p.Namespace = "default"
		}
		return &p, nil
	case "Deployment":
		var d appsv1.Deployment
		if err := yaml.Unmarshal(b, &d); err != nil {
			return nil, err
		}
		ns := d.Namespace
		if ns == "" {
			ns = "default"
		}
		p := &corev1.Pod{TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
			ObjectMeta: *d.Spec.Template.ObjectMeta.DeepCopy(), Spec: *d.Spec.Template.Spec.DeepCopy()}
		p.Namespace, p.Name, p.GenerateName = ns, "", d.Name+"-5d4f8b7c9-"
		return p, nil
	}
	return nil, fmt.Errorf("kind %q, want Pod or Deployment", tm.Kind)
}

func podReview(p *corev1.Pod, uid string) ([]byte, error) {
	raw, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	return json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:       types.UID(uid),
			Kind:      metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
			Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
			Namespace: p.Namespace, Name: p.Name, Operation: admissionv1.Create,
			Object: runtime.RawExtension{Raw: raw},
		},
	})
}

// procStat is the target's CPU seconds and RSS.
func procStat(pid int) (float64, int64, error) { return loadgen.ReadProc(pid) }

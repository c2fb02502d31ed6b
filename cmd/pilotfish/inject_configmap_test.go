package main

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/pilotfish-mesh/pilotfish/engine"
	"github.com/pilotfish-mesh/pilotfish/inject"
	"github.com/pilotfish-mesh/pilotfish/internal/kubetest"
)

// TestInjectorConfigMaps runs the injector on istiod's ConfigMaps in a
// real kube-apiserver: /inject answers 503 until istio-sidecar-injector
// exists, then injects with its config and values and the mesh config of
// ConfigMap istio, which the mesh config reader watches (the injector
// subscribes to it: one watch of ConfigMap istio); an update is in force
// without a restart; one that does not parse is logged, counted,
// reported by Errors (for /debug/config_errors) and leaves the last good
// settings; a --inject-* file overrides its ConfigMap. The webhook counts
// under istiod's sidecar_injection_* names.
func TestInjectorConfigMaps(t *testing.T) {
	c := kubetest.Start(t, kubetest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const ns = "istio-system"
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(chartDir, "default", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	reg := prometheus.NewRegistry()
	st := newInjectState(injectOptions{configMaps: true, namespace: ns}, reg, slog.New(slog.DiscardHandler))
	watchCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { watchInjectConfigMaps(watchCtx, c.Client, st); close(done) }()
	defer func() { stop(); <-done }()
	mesh := watchTestMesh(t, watchCtx, c.Client, ns)
	mesh.subscribe(st.useMesh)

	rec := httptest.NewRecorder()
	st.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, inject.Path, strings.NewReader("{}")))
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("/inject before the ConfigMap: %d, want 503", rec.Code)
	}
	// proxyFirst: the mesh's holdApplicationUntilProxyStarts puts the
	// proxy first.
	var proxyFirst bool
	proxy := func() *corev1.Container {
		in := st.injector()
		if in == nil {
			return nil
		}
		res, err := in.Inject(inject.Request{Pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "shop"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "busybox"}}}}})
		if err != nil || !res.Injected {
			t.Fatalf("inject: %v", err)
		}
		proxyFirst = res.Pod.Spec.Containers[0].Name == "istio-proxy"
		for i := range res.Pod.Spec.Containers {
			if res.Pod.Spec.Containers[i].Name == "istio-proxy" {
				return &res.Pod.Spec.Containers[i]
			}
		}
		t.Fatal("no istio-proxy")
		return nil
	}
	image := func() string {
		if p := proxy(); p != nil {
			return p.Image
		}
		return "<no injector>"
	}
	cms := c.Client.CoreV1().ConfigMaps(ns)
	injCM := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "istio-sidecar-injector", Namespace: ns},
		Data: map[string]string{"config": read("config.yaml"), "values": read("values.json")}}
	if _, err := cms.Create(ctx, injCM, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	meshCM := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "istio", Namespace: ns},
		Data: map[string]string{"mesh": strings.Replace(read("mesh.yaml"), "defaultConfig:\n", "defaultConfig:\n  holdApplicationUntilProxyStarts: true\n", 1)}}
	if _, err := cms.Create(ctx, meshCM, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "injecting with the ConfigMaps", func() string {
		if img := image(); img != "registry.istio.io/testing/proxyv2:latest" {
			return img
		}
		if !proxyFirst {
			return "mesh ConfigMap not read: the proxy is not first"
		}
		return ""
	})

	// The webhook counts under istiod's metric names.
	review := `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u1","kind":{"group":"","version":"v1","kind":"Pod"},` +
		`"namespace":"shop","operation":"CREATE","object":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"app","image":"busybox"}]}}}}`
	req := httptest.NewRequest(http.MethodPost, inject.Path, strings.NewReader(review))
	req.Header.Set("Content-Type", "application/json")
	rec = httptest.NewRecorder()
	st.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"patch"`) {
		t.Errorf("/inject: %d %s", rec.Code, rec.Body)
	}
	for name, want := range map[string]float64{"sidecar_injection_requests_total": 1, "sidecar_injection_success_total": 1,
		"sidecar_injection_skip_total": 0, "sidecar_injection_failure_total": 0} {
		if got := counterValue(t, reg, name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}

	injCM.Data["values"] = strings.Replace(injCM.Data["values"], `"hub": "registry.istio.io/testing"`, `"hub": "mirror.example/istio"`, 1)
	if _, err := cms.Update(ctx, injCM, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "updated values in force", func() string {
		if img := image(); img != "mirror.example/istio/proxyv2:latest" {
			return img
		}
		return ""
	})

	good := injCM.Data["config"]
	injCM.Data["config"] = "templates:\n  sidecar: '{{ if }}'\n"
	if _, err := cms.Update(ctx, injCM, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "broken config reported", func() string {
		errs := st.Errors()
		if len(errs) != 1 || !strings.Contains(errs[0].Error(), "ConfigMap istio-system/istio-sidecar-injector key config") {
			return "errors: " + strings.TrimSpace(strings.Join(strings.Fields(strings.ReplaceAll(strings.Join(errStrings(errs), ";"), "\n", " ")), " "))
		}
		return ""
	})
	if n := counterValue(t, reg, "pilotfish_inject_config_errors_total"); n != 1 {
		t.Errorf("pilotfish_inject_config_errors_total = %v, want 1", n)
	}
	if img := image(); img != "mirror.example/istio/proxyv2:latest" {
		t.Errorf("after a broken update the image is %q: the last good settings were lost", img)
	}
	injCM.Data["config"] = good
	if _, err := cms.Update(ctx, injCM, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "fixed config clears the error", func() string {
		if errs := st.Errors(); len(errs) > 0 {
			return errs[0].Error()
		}
		return ""
	})

	// A --inject-mesh-config file overrides ConfigMap istio.
	meshFile := filepath.Join(t.TempDir(), "mesh.yaml")
	if err := os.WriteFile(meshFile, []byte(read("mesh.yaml")), 0o644); err != nil {
		t.Fatal(err)
	}
	st2 := newInjectState(injectOptions{configMaps: true, namespace: ns, meshFile: meshFile}, nil, slog.New(slog.DiscardHandler))
	files, err := (&injectFiles{o: st2.o}).read()
	if err != nil {
		t.Fatal(err)
	}
	if err := st2.set(files); err != nil {
		t.Fatal(err)
	}
	mesh.subscribe(st2.useMesh)
	done2 := make(chan struct{})
	go func() { watchInjectConfigMaps(watchCtx, c.Client, st2); close(done2) }()
	defer func() { stop(); <-done2 }()
	eventually(t, "second injector from the ConfigMap", func() string {
		if st2.injector() == nil {
			return "none yet"
		}
		return ""
	})
	st = st2
	if proxy(); proxyFirst {
		t.Error("the mesh ConfigMap won over --inject-mesh-config: the proxy is first")
	}
}

// watchTestMesh is the mesh config reader of serve on ConfigMap istio
// in ns (mesh_watch.go), applying nowhere, until ctx ends.
func watchTestMesh(t *testing.T, ctx context.Context, client kubernetes.Interface, ns string) *meshState {
	t.Helper()
	s := &meshState{log: slog.New(slog.DiscardHandler), overrides: map[string]bool{}, errCount: newTestCounter(),
		apply: func(engine.MeshSettings) error { return nil }}
	if err := s.set(meshFromAPI, meshInput{}); err != nil { // istiod's defaults until the ConfigMap exists
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { watchMeshConfigMap(ctx, client, s, ns, meshConfigMap); close(done) }()
	t.Cleanup(func() { <-done })
	return s
}

func errStrings(errs []error) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

// counterValue is a counter's value in reg (-1 when absent).
func counterValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return -1
}

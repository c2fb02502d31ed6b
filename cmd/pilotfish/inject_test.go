package main

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionregv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/pilotfish-mesh/pilotfish/inject"
	"github.com/pilotfish-mesh/pilotfish/internal/kubetest"
)

// chartDir holds the injector config, values and mesh config rendered
// from istio's chart, and its MutatingWebhookConfiguration (inject's
// corpus test data).
var chartDir = filepath.Join("..", "..", "inject", "testdata", "chart")

// startInjector runs `pilotfish serve` with the webhook and sidecar
// injection from the chart's config, and returns the webhook's address and
// the PEM roots of its certificate.
func startInjector(t *testing.T) (addr string, roots []byte) {
	t.Helper()
	dir := t.TempDir()
	rootsFile := filepath.Join(dir, "root-cert.pem")
	def := filepath.Join(chartDir, "default")
	o := &serveOptions{configDir: t.TempDir(), grpcAddr: "127.0.0.1:0", httpAddr: "127.0.0.1:0", domain: "cluster.local",
		logLevel: "error", debounceAfter: 10 * time.Millisecond, debounceMax: time.Second, enableEDSDebounce: true,
		pushThrottle: 10, resync: 200 * time.Millisecond, shutdownGrace: time.Second, webhook: webhookOptions{addr: "127.0.0.1:0"},
		inject: injectOptions{configFile: filepath.Join(def, "config.yaml"), valuesFile: filepath.Join(def, "values.json"),
			meshFile: filepath.Join(def, "mesh.yaml")},
		ca: caOptions{tlsSANs: []string{"127.0.0.1"}, rootCertOut: rootsFile}}
	ctx, cancel := context.WithCancel(context.Background())
	addrs := make(chan started, 1)
	done := make(chan error, 1)
	go func() { done <- runServe(ctx, o, func(s started) { addrs <- s }) }()
	var s started
	select {
	case s = <-addrs:
	case err := <-done:
		t.Fatalf("serve exited: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not start")
	}
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serve shutdown: %v", err)
			}
		case <-time.After(15 * time.Second):
			t.Error("serve did not shut down")
		}
	})
	roots, err := os.ReadFile(rootsFile)
	if err != nil {
		t.Fatal(err)
	}
	return s.webhookAddr.String(), roots
}

// TestInjectionWithAPIServer registers pilotfish as the injector with the
// chart's own MutatingWebhookConfiguration (its namespace and object
// selectors; the clientConfig a URL with pilotfish's root as caBundle) in
// a real kube-apiserver: a Pod created in a namespace with
// istio-injection=enabled or istio.io/rev=default is stored injected, one
// in an unlabelled namespace or one that opts out is stored untouched, and
// one the injector cannot inject is refused with the reason.
func TestInjectionWithAPIServer(t *testing.T) {
	c := kubetest.Start(t, kubetest.Options{})
	addr, roots := startInjector(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	b, err := os.ReadFile(filepath.Join(chartDir, "webhook.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg admissionregv1.MutatingWebhookConfiguration
	if err := yaml.UnmarshalStrict(b, &cfg); err != nil {
		t.Fatal(err)
	}
	url := "https://" + addr + "/inject"
	for i := range cfg.Webhooks {
		if p := cfg.Webhooks[i].ClientConfig.Service; p == nil || p.Path == nil || *p.Path != "/inject" {
			t.Fatalf("chart webhook %s does not call /inject: %+v", cfg.Webhooks[i].Name, cfg.Webhooks[i].ClientConfig)
		}
		cfg.Webhooks[i].ClientConfig = admissionregv1.WebhookClientConfig{URL: &url, CABundle: roots}
	}
	if _, err := c.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, &cfg, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for ns, labels := range map[string]map[string]string{
		"enabled": {"istio-injection": "enabled"},
		"rev":     {"istio.io/rev": "default"},
		"plain":   nil,
	} {
		if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pods := c.Client.CoreV1()
	newPod := func(ns, name string, labels, annotations map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels, Annotations: annotations},
			// The harness's apiserver runs without the ServiceAccount
			// admission plugin, which would default this (and the
			// injected token volume needs it).
			Spec: corev1.PodSpec{ServiceAccountName: "default", Containers: []corev1.Container{{Name: "app", Image: "nginx",
				Ports:          []corev1.ContainerPort{{ContainerPort: 8080}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromInt32(8080)}}}}}}}
	}
	names := func(cs []corev1.Container) string {
		var n []string
		for _, c := range cs {
			n = append(n, c.Name)
		}
		return strings.Join(n, ",")
	}
	// The apiserver reads webhook configurations through an informer:
	// retry until injection is in force (a pod admitted before is deleted).
	eventuallyFor(t, 30*time.Second, "injection in force", func() string {
		p, err := pods.Pods("enabled").Create(ctx, newPod("enabled", "probe", nil, nil), metav1.CreateOptions{})
		if err != nil {
			return err.Error()
		}
		_ = pods.Pods("enabled").Delete(ctx, "probe", metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
		if names(p.Spec.Containers) != "app,istio-proxy" {
			return "stored with containers " + names(p.Spec.Containers)
		}
		return ""
	})

	for _, tc := range []struct {
		name, ns            string
		labels, annotations map[string]string
		injected            bool
	}{
		{"injected", "enabled", map[string]string{"app": "web"}, nil, true},
		{"revision-namespace", "rev", nil, nil, true},
		{"unlabelled-namespace", "plain", nil, nil, false},
		{"opt-out-label", "enabled", map[string]string{"sidecar.istio.io/inject": "false"}, nil, false},
		{"opt-out-annotation", "enabled", nil, map[string]string{"sidecar.istio.io/inject": "false"}, false},
		{"opt-in-object", "plain", map[string]string{"istio.io/rev": "default"}, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := newPod(tc.ns, tc.name, tc.labels, tc.annotations)
			p, err := pods.Pods(tc.ns).Create(ctx, in, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !tc.injected {
				if names(p.Spec.Containers) != "app" || len(p.Spec.InitContainers) != 0 || p.Annotations["sidecar.istio.io/status"] != "" ||
					p.Spec.Containers[0].ReadinessProbe.HTTPGet.Port.IntVal != 8080 {
					t.Fatalf("stored pod was changed: containers %s, init %s, annotations %v", names(p.Spec.Containers), names(p.Spec.InitContainers), p.Annotations)
				}
				return
			}
			if names(p.Spec.Containers) != "app,istio-proxy" || names(p.Spec.InitContainers) != "istio-init" {
				t.Fatalf("stored pod: containers %s, init %s", names(p.Spec.Containers), names(p.Spec.InitContainers))
			}
			var st struct {
				Containers []string `json:"containers"`
				Volumes    []string `json:"volumes"`
				Revision   string   `json:"revision"`
			}
			if err := json.Unmarshal([]byte(p.Annotations["sidecar.istio.io/status"]), &st); err != nil || st.Revision != "default" || len(st.Volumes) != 9 {
				t.Fatalf("status annotation %q: %v", p.Annotations["sidecar.istio.io/status"], err)
			}
			probe := p.Spec.Containers[0].ReadinessProbe.HTTPGet
			if probe.Path != "/app-health/app/readyz" || probe.Port.IntVal != 15020 {
				t.Fatalf("readiness probe not rewritten to the agent: %+v", probe)
			}
			proxy := p.Spec.Containers[1]
			if proxy.Image != "registry.istio.io/testing/proxyv2:latest" || p.Labels["security.istio.io/tlsMode"] != "istio" {
				t.Fatalf("proxy image %q, labels %v", proxy.Image, p.Labels)
			}
		})
	}

	bad := newPod("enabled", "bad", nil, map[string]string{"traffic.sidecar.istio.io/excludeInboundPorts": "80,notaport"})
	_, err = pods.Pods("enabled").Create(ctx, bad, metav1.CreateOptions{})
	want := `admission webhook "namespace.sidecar-injector.istio.io" denied the request: sidecar injection failed: pod enabled/bad: invalid annotation: traffic.sidecar.istio.io/excludeInboundPorts="80,notaport"`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("pod with a bad annotation: %v, want an error containing %q", err, want)
	}
	if _, err := pods.Pods("enabled").Get(ctx, "bad", metav1.GetOptions{}); err == nil {
		t.Fatal("the refused pod was stored")
	}
}

// TestInjectorReload: a change to the injector's files reaches the
// injector; a file that does not parse leaves the last good settings in
// force.
func TestInjectorReload(t *testing.T) {
	dir := t.TempDir()
	cp := func(name string) string {
		b, err := os.ReadFile(filepath.Join(chartDir, "default", name))
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	o := injectOptions{configFile: cp("config.yaml"), valuesFile: cp("values.json"), meshFile: cp("mesh.yaml")}
	files := &injectFiles{o: o}
	st := newInjectState(o, nil, slog.New(slog.DiscardHandler))
	first, err := files.read()
	if err != nil {
		t.Fatal(err)
	}
	if err := st.set(first); err != nil {
		t.Fatal(err)
	}
	in := st.injector()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := make(chan struct{})
	go func() {
		reloadInjector(ctx, st, files, 10*time.Millisecond)
		close(done)
	}()
	defer func() { cancel(); <-done }()

	proxyImage := func() string {
		res, err := in.Inject(inject.Request{Pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "shop"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "busybox"}}}}})
		if err != nil || !res.Injected {
			t.Fatalf("inject: %v", err)
		}
		return res.Pod.Spec.Containers[1].Image
	}
	if got := proxyImage(); got != "registry.istio.io/testing/proxyv2:latest" {
		t.Fatalf("image %q", got)
	}
	vals, _ := os.ReadFile(o.valuesFile)
	vals = []byte(strings.Replace(string(vals), `"hub": "registry.istio.io/testing"`, `"hub": "mirror.example/istio"`, 1))
	if err := os.WriteFile(o.valuesFile, vals, 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, "new hub in force", func() string {
		if got := proxyImage(); got != "mirror.example/istio/proxyv2:latest" {
			return got
		}
		return ""
	})
	before := in.Settings()
	if err := os.WriteFile(o.configFile, []byte("templates:\n  sidecar: '{{ if }}'\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The broken file is read (its size differs) and refused: wait until
	// the reloader has seen it, then check nothing changed.
	eventually(t, "broken config seen", func() string {
		if files.changed() {
			return "not yet read"
		}
		return ""
	})
	if got := proxyImage(); in.Settings() != before || got != "mirror.example/istio/proxyv2:latest" {
		t.Fatalf("a config that does not parse replaced the last good one (same settings %v, image %s)", in.Settings() == before, got)
	}
	if errs := st.Errors(); len(errs) != 1 || !strings.Contains(errs[0].Error(), "--inject-config "+o.configFile) {
		t.Errorf("reported errors %v, want one naming --inject-config %s", errs, o.configFile)
	}
}

// TestInjectorFileEmptied: an injector file that had content and reads
// empty (an editor saving in place truncates it first) is not taken as a
// new set: the reloader keeps the settings in force and reads it again.
func TestInjectorFileEmptied(t *testing.T) {
	dir := t.TempDir()
	var paths [3]string
	for i, name := range []string{"config.yaml", "values.json", "mesh.yaml"} {
		b, err := os.ReadFile(filepath.Join(chartDir, "default", name))
		if err != nil {
			t.Fatal(err)
		}
		paths[i] = filepath.Join(dir, name)
		if err := os.WriteFile(paths[i], b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	files := &injectFiles{o: injectOptions{configFile: paths[0], valuesFile: paths[1], meshFile: paths[2]}}
	if _, err := files.read(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(paths[0], nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if !files.changed() {
		t.Fatal("the emptied file is not seen as changed")
	}
	if _, err := files.read(); !errors.Is(err, errInjectFileEmpty) {
		t.Fatalf("read of an emptied file: %v, want errInjectFileEmpty", err)
	}
	if !files.changed() {
		t.Error("after the refused read the file no longer counts as changed: it would not be read again")
	}
}

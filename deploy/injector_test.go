package deploy_test

import (
	"bytes"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/pilotfish-mesh/pilotfish/inject"
)

// TestInjectorConfigMapChart: the chart's istio-sidecar-injector ConfigMap
// (istio's templates and values, re-serialised by Helm, with the chart's
// hub and tag) parses, and injects a pod exactly as the istioctl-rendered
// files inject's corpus is checked with, but for the proxy image.
func TestInjectorConfigMapChart(t *testing.T) {
	out := runHelm(t, "template", "pilotfish", "charts/pilotfish", "--namespace", namespace,
		"--set", "global.hub=mirror.example/istio", "--set", "global.tag=9.9.9")
	var cm *corev1.ConfigMap
	for _, doc := range bytes.Split(out, []byte("\n---\n")) {
		var c corev1.ConfigMap
		if yaml.Unmarshal(doc, &c) == nil && c.Kind == "ConfigMap" && c.Name == "istio-sidecar-injector" {
			cm = &c
		}
	}
	if cm == nil {
		t.Fatal("the chart renders no ConfigMap istio-sidecar-injector")
	}
	chart := settings(t, []byte(cm.Data["config"]), []byte(cm.Data["values"]))
	ref := settings(t, read(t, "../inject/testdata/chart/default/config.yaml"), read(t, "../inject/testdata/chart/default/values.json"))
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx", Ports: []corev1.ContainerPort{{ContainerPort: 8080}}}}}}
	got := injectPatch(t, chart, pod)
	want := injectPatch(t, ref, pod)
	want = strings.ReplaceAll(want, "registry.istio.io/testing/proxyv2:latest", "mirror.example/istio/proxyv2:9.9.9")
	if got != want {
		t.Errorf("the chart's injector config injects differently from istio's:\nchart: %s\nistio: %s", got, want)
	}
	if !strings.Contains(got, "mirror.example/istio/proxyv2:9.9.9") {
		t.Errorf("the chart's global.hub/tag are not the proxy image: %s", got)
	}
}

func read(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func settings(t *testing.T, config, values []byte) *inject.Settings {
	t.Helper()
	c, err := inject.ParseConfig(config)
	if err != nil {
		t.Fatal(err)
	}
	v, err := inject.ParseValues(values)
	if err != nil {
		t.Fatal(err)
	}
	return &inject.Settings{Config: c, Values: v, Mesh: inject.DefaultMesh()}
}

func injectPatch(t *testing.T, s *inject.Settings, pod *corev1.Pod) string {
	t.Helper()
	in, err := inject.New(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := in.Inject(inject.Request{Pod: pod})
	if err != nil || !res.Injected {
		t.Fatalf("inject: %v", err)
	}
	return string(res.Patch)
}

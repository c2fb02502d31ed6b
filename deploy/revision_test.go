package deploy_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/pilotfish-mesh/pilotfish/inject"
	"github.com/pilotfish-mesh/pilotfish/internal/kubetest"
)

// istiodChart returns istiod's own chart (istio-discovery) in the istio
// module tools/pilot-agent pins, the istio pilotfish is compared with.
// Absent (the module is not downloaded), the test is skipped locally and
// fails when $CI is set, as for helm.
func istiodChart(t *testing.T) string {
	t.Helper()
	root, err := kubetest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "istio.io/istio")
	cmd.Dir = filepath.Join(root, "tools", "pilot-agent")
	out, err := cmd.Output()
	dir := filepath.Join(strings.TrimSpace(string(out)), "manifests", "charts", "istio-control", "istio-discovery")
	if _, serr := os.Stat(filepath.Join(dir, "Chart.yaml")); err != nil || serr != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("istio's chart: go list -m istio.io/istio: %v %v (make pilot-agent downloads it)", err, serr)
		}
		t.Skipf("istio's chart not on disk (%v %v): run `make pilot-agent` (make test does)", err, serr)
	}
	return dir
}

// objects splits a rendered chart into its objects of kind, by name.
func objects[T any](t *testing.T, rendered []byte, kind string) map[string]*T {
	t.Helper()
	out := map[string]*T{}
	for _, doc := range bytes.Split(rendered, []byte("\n---\n")) {
		var meta metav1.PartialObjectMetadata
		if yaml.Unmarshal(doc, &meta) != nil || meta.Kind != kind {
			continue
		}
		var o T
		if err := yaml.UnmarshalStrict(doc, &o); err != nil {
			t.Fatalf("%s %s: %v", kind, meta.Name, err)
		}
		out[meta.Name] = &o
	}
	return out
}

// TestRevisionWebhooksMatchIstiodChart renders pilotfish's chart and
// istiod's own chart with the same revision and revision tags and compares
// their injection webhooks: the revision's
// istio-sidecar-injector-<revision> and every istio-revision-tag-<tag>
// have the same webhooks (names, namespace and object selectors, rules,
// policies) and the labels istioctl and istiod select them by
// (istio.io/rev, istio.io/tag), and call the chart's Service at /inject
// where istiod's call istiod-<revision>.
func TestRevisionWebhooksMatchIstiodChart(t *testing.T) {
	args := []string{"--namespace", namespace, "--set", "revision=canary", "--set", "revisionTags={prod,default}"}
	ours := objects[admissionregv1.MutatingWebhookConfiguration](t,
		runHelm(t, append([]string{"template", "pilotfish", "charts/pilotfish", "--set", "serviceName=pilotfish"}, args...)...), "MutatingWebhookConfiguration")
	theirs := objects[admissionregv1.MutatingWebhookConfiguration](t,
		runHelm(t, append([]string{"template", "istiod", istiodChart(t)}, args...)...), "MutatingWebhookConfiguration")
	for _, name := range []string{"istio-sidecar-injector-canary", "istio-revision-tag-prod", "istio-revision-tag-default"} {
		o, i := ours[name], theirs[name]
		if i == nil {
			t.Fatalf("istiod's chart renders no %s (has %v)", name, keys(theirs))
		}
		if o == nil {
			t.Fatalf("pilotfish's chart renders no %s (has %v)", name, keys(ours))
		}
		for _, l := range []string{"istio.io/rev", "istio.io/tag", "app"} {
			if o.Labels[l] != i.Labels[l] {
				t.Errorf("%s: label %s %q, istiod's %q", name, l, o.Labels[l], i.Labels[l])
			}
		}
		if len(o.Webhooks) != len(i.Webhooks) {
			t.Fatalf("%s: %d webhooks, istiod's %d", name, len(o.Webhooks), len(i.Webhooks))
		}
		for k := range o.Webhooks {
			ow, iw := o.Webhooks[k], i.Webhooks[k]
			svc := ow.ClientConfig.Service
			if svc == nil || svc.Name != "pilotfish" || svc.Namespace != namespace || svc.Path == nil || *svc.Path != "/inject" ||
				svc.Port == nil || *svc.Port != 443 || iw.ClientConfig.Service.Name != "istiod-canary" {
				t.Errorf("%s/%s calls %+v (istiod's %+v)", name, ow.Name, svc, iw.ClientConfig.Service)
			}
			// What decides which pods go where, as istiod's.
			ow.ClientConfig, iw.ClientConfig = admissionregv1.WebhookClientConfig{}, admissionregv1.WebhookClientConfig{}
			ow.TimeoutSeconds, iw.TimeoutSeconds = nil, nil // istiod's chart leaves the API server's default (10)
			if !reflect.DeepEqual(ow, iw) {
				o, _ := json.Marshal(ow)
				i, _ := json.Marshal(iw)
				t.Errorf("%s webhook %d differs from istiod's:\npilotfish: %s\nistiod:    %s", name, k, o, i)
			}
		}
	}
	if n := len(ours); n != 3 {
		t.Errorf("pilotfish's chart renders %d MutatingWebhookConfigurations, want 3: %v", n, keys(ours))
	}
}

func keys[T any](m map[string]T) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestMeshConfigMapChart: the chart renders the mesh ConfigMap istiod's
// chart renders for the revision (istio-<revision>, keys mesh and
// meshNetworks), meshConfig values merged over the defaults as istiod's
// chart merges them; the mesh parses as istiod reads it and equals
// istiod's chart's for the same values but for the discoveryAddress (the
// chart's Service) and the telemetry istiod's chart turns on (Prometheus
// merge and metrics provider, which pilotfish does not generate). The
// injector reading it with the chart's injector ConfigMap points injected
// proxies (PROXY_CONFIG's discoveryAddress, CA_ADDR) at pilotfish.
func TestMeshConfigMapChart(t *testing.T) {
	args := []string{"--namespace", namespace, "--set", "revision=canary",
		"--set", "meshConfig.outboundTrafficPolicy.mode=REGISTRY_ONLY",
		"--set", "meshConfig.trustDomainAliases={old.example}",
		"--set", "meshConfig.defaultConfig.holdApplicationUntilProxyStarts=true",
		"--set", "meshConfig.rootNamespace=mesh-root", "--set", "meshConfig.connectTimeout=3s",
		"--set", "global.meshNetworks.net1.gateways[0].port=15443",
		"--set", "global.meshNetworks.net1.gateways[0].address=192.0.2.1"}
	rendered := runHelm(t, append([]string{"template", "pilotfish", "charts/pilotfish", "--set", "serviceName=pilotfish"}, args...)...)
	ours := objects[corev1.ConfigMap](t, rendered, "ConfigMap")
	theirs := objects[corev1.ConfigMap](t, runHelm(t, append([]string{"template", "istiod", istiodChart(t)}, args...)...), "ConfigMap")
	o, i := ours["istio-canary"], theirs["istio-canary"]
	if o == nil || i == nil {
		t.Fatalf("ConfigMap istio-canary: pilotfish's chart %v, istiod's %v", keys(ours), keys(theirs))
	}
	if o.Labels["istio.io/rev"] != "canary" {
		t.Errorf("labels %v", o.Labels)
	}
	var on, in any
	if err := yaml.Unmarshal([]byte(o.Data["meshNetworks"]), &on); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal([]byte(i.Data["meshNetworks"]), &in); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(on, in) {
		t.Errorf("meshNetworks %v, istiod's %v", on, in)
	}
	om, err := inject.ParseMesh([]byte(o.Data["mesh"]))
	if err != nil {
		t.Fatalf("mesh: %v\n%s", err, o.Data["mesh"])
	}
	im, err := inject.ParseMesh([]byte(i.Data["mesh"]))
	if err != nil {
		t.Fatal(err)
	}
	if got := om.GetDefaultConfig().GetDiscoveryAddress(); got != "pilotfish.istio-system.svc:15012" {
		t.Errorf("discoveryAddress %q", got)
	}
	if om.GetRootNamespace() != "mesh-root" || om.GetOutboundTrafficPolicy().GetMode().String() != "REGISTRY_ONLY" ||
		!om.GetDefaultConfig().GetHoldApplicationUntilProxyStarts().GetValue() {
		t.Errorf("meshConfig values not in the mesh: %s", o.Data["mesh"])
	}
	im.DefaultConfig.DiscoveryAddress = om.DefaultConfig.DiscoveryAddress
	im.DefaultProviders, im.EnablePrometheusMerge = om.DefaultProviders, om.EnablePrometheusMerge
	if !proto.Equal(om, im) {
		t.Errorf("the mesh differs from istiod's chart's:\npilotfish:\n%s\nistiod:\n%s", o.Data["mesh"], i.Data["mesh"])
	}

	// The injector with the chart's ConfigMaps.
	inj := objects[corev1.ConfigMap](t, rendered, "ConfigMap")["istio-sidecar-injector-canary"]
	if inj == nil {
		t.Fatal("no istio-sidecar-injector-canary")
	}
	s := settings(t, []byte(inj.Data["config"]), []byte(inj.Data["values"]))
	s.Mesh, s.Revision = om, "canary"
	in2, err := inject.New(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := in2.Inject(inject.Request{Pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx"}}}}})
	if err != nil || !res.Injected {
		t.Fatalf("inject: %v", err)
	}
	env := map[string]string{}
	for _, c := range res.Pod.Spec.Containers {
		if c.Name == "istio-proxy" {
			for _, e := range c.Env {
				env[e.Name] = e.Value
			}
		}
	}
	if env["CA_ADDR"] != "pilotfish.istio-system.svc:15012" || !strings.Contains(env["PROXY_CONFIG"], `"discoveryAddress":"pilotfish.istio-system.svc:15012"`) {
		t.Errorf("injected proxy: CA_ADDR %q, PROXY_CONFIG %s", env["CA_ADDR"], env["PROXY_CONFIG"])
	}
}

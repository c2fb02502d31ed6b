package inject

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"text/template"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"
)

// foldPods are the corpus inputs' pods with their owners.
func foldPods(t testing.TB) []*job {
	t.Helper()
	files, err := filepath.Glob("testdata/corpus/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var out []*job
	for _, f := range files {
		if strings.HasSuffix(f, ".istioctl.yaml") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(b, &tm); err != nil {
			t.Fatal(err)
		}
		j := &job{}
		switch tm.Kind {
		case "Pod":
			j.pod = &corev1.Pod{}
			if err := yaml.Unmarshal(b, j.pod); err != nil {
				t.Fatal(err)
			}
			j.owner, j.ownerType = ownerOf(j.pod)
		case "Deployment":
			var d appsv1.Deployment
			if err := yaml.Unmarshal(b, &d); err != nil {
				t.Fatal(err)
			}
			j.pod = &corev1.Pod{ObjectMeta: d.Spec.Template.ObjectMeta, Spec: d.Spec.Template.Spec}
			j.owner, j.ownerType = types.NamespacedName{Namespace: d.Namespace, Name: d.Name}, d.TypeMeta
		default:
			t.Fatalf("%s: kind %q", f, tm.Kind)
		}
		out = append(out, j)
	}
	if len(out) < 25 {
		t.Fatalf("%d corpus inputs", len(out))
	}
	return out
}

// foldSettings are the chart's variants, and settings that turn the
// templates' other branches on: every settings field the templates read
// takes another value.
func foldSettings(t testing.TB) map[string]*Settings {
	t.Helper()
	read := func(variant, name string) []byte {
		b, err := os.ReadFile(filepath.Join("testdata", "chart", variant, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	out := map[string]*Settings{}
	for _, variant := range []string{"default", "cni"} {
		cfg, err := ParseConfig(read(variant, "config.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		vals, err := ParseValues(read(variant, "values.json"))
		if err != nil {
			t.Fatal(err)
		}
		mesh, err := ParseMesh(read(variant, "mesh.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		out[variant] = &Settings{Config: cfg, Values: vals, Mesh: mesh}
		if variant != "default" {
			continue
		}
		vals2, err := ParseValues(read(variant, "values.json"))
		if err != nil {
			t.Fatal(err)
		}
		g := vals2.m["global"].(map[string]any)
		g["logAsJson"], g["imagePullPolicy"], g["meshID"], g["caAddress"] = true, "Always", "mesh1", "ca.example:15012"
		g["network"], g["mountMtlsCerts"], g["imagePullSecrets"] = "net1", true, []any{"reg1", "reg2"}
		p := g["proxy"].(map[string]any)
		p["holdApplicationUntilProxyStarts"], p["privileged"], p["tracer"] = true, true, "datadog"
		p["lifecycle"] = map[string]any{"preStop": map[string]any{"exec": map[string]any{"command": []any{"sleep", "5"}}}}
		p["resources"] = map[string]any{"requests": map[string]any{"cpu": "50m", "memory": nil}}
		p["excludeOutboundPorts"], p["includeOutboundPorts"] = "9000", "80"
		mesh2, err := ParseMesh([]byte("trustDomain: td.example\ninboundTrafficPolicy:\n  mode: LOCALHOST\n"))
		if err != nil {
			t.Fatal(err)
		}
		out["other"] = &Settings{Config: cfg, Values: vals2, Mesh: mesh2, Revision: "canary",
			NativeSidecars: true, CompliancePolicy: "fips-140-3"}
	}
	return out
}

// TestFoldedTemplatesRenderTheSame renders every template of the chart
// for every corpus pod, under several settings, folded and as written:
// the outputs (or the errors) are the same.
func TestFoldedTemplatesRenderTheSame(t *testing.T) {
	pods := foldPods(t)
	for name, s := range foldSettings(t) {
		st := newState(s)
		for _, tn := range s.Config.TemplateNames() {
			folded, ok := st.template(tn)
			if !ok {
				t.Fatalf("%s: no template %s", name, tn)
			}
			orig := s.Config.templates[tn]
			if folded == orig {
				t.Fatalf("%s: template %s was not folded", name, tn)
			}
			if a, b := len(orig.Tree.Root.String()), len(folded.Tree.Root.String()); b >= a {
				t.Errorf("%s: template %s folded is %d bytes of source, as written %d", name, tn, b, a)
			}
			for i, p := range pods {
				j := &job{st: st, s: s, pod: p.pod.DeepCopy(), owner: p.owner, ownerType: p.ownerType, envs: map[string]string{}}
				if j.pod.Namespace == "" {
					j.pod.Namespace = "default"
				}
				if err := j.prepare(); err != nil {
					continue // denied before rendering
				}
				data, err := j.templateData()
				if err != nil {
					continue
				}
				want, werr := execString(orig, data)
				got, gerr := execString(folded, data)
				if want != got || (werr == nil) != (gerr == nil) {
					t.Fatalf("%s: template %s, pod %d: folded output differs (errors %v, %v):\n%s",
						name, tn, i, werr, gerr, lineDiffText(want, got))
				}
			}
		}
	}
}

func execString(t *template.Template, data *TemplateData) (string, error) {
	var b bytes.Buffer
	err := t.Execute(&b, data)
	return b.String(), err
}

// lineDiffText shows the lines only one side has (want "-", got "+").
func lineDiffText(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var out []string
	for i := 0; i < max(len(w), len(g)); i++ {
		var a, b string
		if i < len(w) {
			a = w[i]
		}
		if i < len(g) {
			b = g[i]
		}
		if a != b {
			out = append(out, "-"+a, "+"+b)
		}
	}
	return strings.Join(out, "\n")
}

// TestOverlayCacheUnchanged: injections share the parsed templates of the
// overlay cache (each merges a copy); after every corpus pod is injected
// twice under each settings, every cached overlay still equals its text
// parsed afresh.
func TestOverlayCacheUnchanged(t *testing.T) {
	pods := foldPods(t)
	for name, s := range foldSettings(t) {
		in, err := New(s, nil)
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			for _, p := range pods {
				pod := p.pod.DeepCopy()
				pod.Namespace = "default"
				_, _ = in.Inject(Request{Pod: pod, Owner: p.owner, OwnerType: p.ownerType})
			}
		}
		c := s.Config.overlays
		c.mu.Lock()
		if len(c.m) == 0 {
			t.Fatalf("%s: nothing cached", name)
		}
		for text, ov := range c.m {
			fresh := map[string]any{}
			if err := yaml.Unmarshal([]byte(text), &fresh); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(ov.m, fresh) {
				t.Errorf("%s: a cached overlay was modified by the injections:\n%s", name, text)
			}
		}
		c.mu.Unlock()
	}
}

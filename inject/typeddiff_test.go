package inject

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strconv"
	"testing"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// jsonDiff is the patch computed on the two pods' JSON, the reference
// typedPatch is checked against.
func jsonDiff(ops []patchOp, path string, a, b any) []patchOp {
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok {
			return append(ops, replaceOp(path, b))
		}
		keys := make([]string, 0, len(av)+len(bv))
		for k := range av {
			keys = append(keys, k)
		}
		for k := range bv {
			if _, ok := av[k]; !ok {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			p := path + "/" + escapePointer(k)
			x, inA := av[k]
			y, inB := bv[k]
			switch {
			case !inB:
				ops = append(ops, patchOp{Op: "remove", Path: p})
			case !inA:
				ops = append(ops, addOp(p, y))
			default:
				ops = jsonDiff(ops, p, x, y)
			}
		}
		return ops
	case []any:
		bv, ok := b.([]any)
		if !ok || len(av) != len(bv) {
			return append(ops, replaceOp(path, b))
		}
		for i := range av {
			ops = jsonDiff(ops, path+"/"+strconv.Itoa(i), av[i], bv[i])
		}
		return ops
	default:
		if !reflect.DeepEqual(a, b) {
			ops = append(ops, replaceOp(path, b))
		}
		return ops
	}
}

func addOp(path string, v any) patchOp {
	return patchOp{Op: "add", Path: path, Value: v}
}

func replaceOp(path string, v any) patchOp {
	return patchOp{Op: "replace", Path: path, Value: v}
}

// jsonValue is v's JSON decoded, numbers as json.Number.
func jsonValue(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return decodeJSON(b) // numbers as json.Number: they compare and re-encode exactly
}

// applyOps applies ops to from's JSON and returns the result as generic
// JSON.
func applyOps(t *testing.T, from *corev1.Pod, ops []patchOp) any {
	t.Helper()
	b, err := appendPatch(nil, ops)
	if err != nil {
		t.Fatal(err)
	}
	p, err := jsonpatch.DecodePatch(b)
	if err != nil {
		t.Fatalf("patch %s: %v", b, err)
	}
	doc, err := json.Marshal(from)
	if err != nil {
		t.Fatal(err)
	}
	out, err := p.Apply(doc)
	if err != nil {
		t.Fatalf("applying %s: %v", b, err)
	}
	var v any
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func genericJSON(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// checkTypedPatch: typedPatch(a, b) applied to a's JSON gives b's, as the
// JSON diff's does.
func checkTypedPatch(t *testing.T, name string, a, b *corev1.Pod) {
	t.Helper()
	ops, err := typedPatch(a, b, new(bytes.Buffer))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	want := genericJSON(t, b)
	if got := applyOps(t, a, ops); !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: typed patch gives\n%v\nwant\n%v", name, got, want)
	}
	ja, err := jsonValue(a)
	if err != nil {
		t.Fatal(err)
	}
	jb, err := jsonValue(b)
	if err != nil {
		t.Fatal(err)
	}
	if got := applyOps(t, a, jsonDiff(nil, "", ja, jb)); !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: the reference JSON diff is wrong", name)
	}
}

// TestTypedPatch: for every corpus pod injected, and for changes the
// corpus does not make (removals, zero values, quantities, ports by
// name), the typed patch turns the pod into the other.
func TestTypedPatch(t *testing.T) {
	in, err := New(foldSettings(t)["default"], nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range foldPods(t) {
		pod := p.pod.DeepCopy()
		if pod.Namespace == "" {
			pod.Namespace = "default"
		}
		res, err := in.Inject(Request{Pod: pod, Owner: p.owner, OwnerType: p.ownerType})
		if err != nil || !res.Injected {
			continue
		}
		checkTypedPatch(t, "corpus "+strconv.Itoa(i), pod, res.Pod)
	}
	one := int64(1)
	base := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{"a": "1", "x/y~z": "2"},
			Annotations: map[string]string{"k": "v"}, CreationTimestamp: metav1.Now()},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "app", Image: "i", Ports: []corev1.ContainerPort{{ContainerPort: 80}},
				Resources:      corev1.ResourceRequirements{Limits: corev1.ResourceList{"cpu": resource.MustParse("1")}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(80)}}}}},
			SecurityContext: &corev1.PodSecurityContext{RunAsUser: &one},
			NodeSelector:    map[string]string{},
		},
	}
	for name, change := range map[string]func(p *corev1.Pod){
		"nothing":          func(*corev1.Pod) {},
		"label removed":    func(p *corev1.Pod) { delete(p.Labels, "x/y~z") },
		"labels emptied":   func(p *corev1.Pod) { p.Labels = map[string]string{} },
		"labels nil":       func(p *corev1.Pod) { p.Labels = nil },
		"annotation added": func(p *corev1.Pod) { p.Annotations["n/e~w"] = "1" },
		"name cleared":     func(p *corev1.Pod) { p.Name = "" },
		"timestamp zeroed": func(p *corev1.Pod) { p.CreationTimestamp = metav1.Time{} },
		"quantity changed": func(p *corev1.Pod) { p.Spec.Containers[0].Resources.Limits["cpu"] = resource.MustParse("1000m") },
		"quantity added": func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{"memory": resource.MustParse("1Gi")}
		},
		"port by name":         func(p *corev1.Pod) { p.Spec.Containers[0].ReadinessProbe.HTTPGet.Port = intstr.FromString("http") },
		"probe removed":        func(p *corev1.Pod) { p.Spec.Containers[0].ReadinessProbe = nil },
		"pointer zeroed":       func(p *corev1.Pod) { zero := int64(0); p.Spec.SecurityContext.RunAsUser = &zero },
		"security context nil": func(p *corev1.Pod) { p.Spec.SecurityContext = nil },
		"container added":      func(p *corev1.Pod) { p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "b"}) },
		"containers reordered": func(p *corev1.Pod) { p.Spec.Containers = append([]corev1.Container{{Name: "b"}}, p.Spec.Containers...) },
		"env appended": func(p *corev1.Pod) {
			p.Spec.Containers[0].Env = append(p.Spec.Containers[0].Env, corev1.EnvVar{Name: "E"})
		},
		"empty selector filled": func(p *corev1.Pod) { p.Spec.NodeSelector["n"] = "1" },
		"kind set":              func(p *corev1.Pod) { p.Kind, p.APIVersion = "Pod", "v1" },
		"status set":            func(p *corev1.Pod) { p.Status.Phase = corev1.PodRunning },
		"volumes emptied":       func(p *corev1.Pod) { p.Spec.Volumes = []corev1.Volume{} },
	} {
		b := base.DeepCopy()
		change(b)
		checkTypedPatch(t, name, base, b)
		checkTypedPatch(t, name+" (reverse)", b, base)
	}
}

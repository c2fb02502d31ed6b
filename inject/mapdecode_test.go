package inject

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// foldedKeys: some object of v has two keys equal but for case (which
// of them json.Unmarshal stores depends on their order, and a map has
// none).
func foldedKeys(v any) bool {
	switch x := v.(type) {
	case map[string]any:
		seen := map[string]bool{}
		for k, e := range x {
			if seen[strings.ToLower(k)] || foldedKeys(e) {
				return true
			}
			seen[strings.ToLower(k)] = true
		}
	case []any:
		for _, e := range x {
			if foldedKeys(e) {
				return true
			}
		}
	}
	return false
}

// FuzzFromJSONValue: a JSON value stored into a Pod by fromJSONValue is
// the Pod json.Unmarshal makes of the value's text (appendJSON's), and
// one fails when the other does.
func FuzzFromJSONValue(f *testing.F) {
	in, err := New(foldSettings(f)["default"], nil)
	if err != nil {
		f.Fatal(err)
	}
	for _, p := range foldPods(f)[:8] {
		pod := p.pod.DeepCopy()
		pod.Namespace = "default"
		res, err := in.Inject(Request{Pod: pod, Owner: p.owner, OwnerType: p.ownerType})
		if err != nil || !res.Injected {
			continue
		}
		b, err := json.Marshal(res.Pod)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{
		`{"spec":{"containers":[{"name":"a","ports":[{"containerPort":1.5}]}]}}`,
		`{"spec":{"containers":[{"name":"a","ports":[{"containerPort":"80"}]}]}}`,
		`{"spec":{"containers":[{"resources":{"limits":{"cpu":0.5,"memory":"1Gi"}},"readinessProbe":{"httpGet":{"port":"http"}}}]}}`,
		`{"metadata":{"creationTimestamp":null,"labels":null,"Name":"x","deletionTimestamp":"2024-01-01T00:00:00Z"}}`,
		`{"spec":{"securityContext":{"runAsUser":1e3,"fsGroup":-1}},"status":{"phase":1}}`,
		`{"spec":{"overhead":{"cpu":"x"}}}`, `[]`, `"pod"`, `null`,
		`{"metadata":{"labels":{"a":null}},"spec":{"containers":[{"args":["x",null]}]}}`,
		`{"metadata":{"labels":{"a":null,"b":1}},"spec":{"containers":[{"args":["x",null,2]}]}}`,
		`{"spec":{"containers":[{"ports":[{"containerPort":4294967296,"hostPort":-1}]}],"priority":-2147483649}}`,
		`{"spec":{"containers":[{"resources":{"limits":{"cpu":null}}}],"volumes":[{"emptyDir":null,"name":"v"}]}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var v any
		if json.Unmarshal(b, &v) != nil || foldedKeys(v) {
			return
		}
		text, err := appendJSON(nil, v)
		if err != nil {
			return
		}
		var want, got corev1.Pod
		werr := json.Unmarshal(text, &want)
		gerr := fromJSONValue(&got, v)
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("%s: fromJSONValue error %v, json.Unmarshal %v", b, gerr, werr)
		}
		if werr == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: fromJSONValue\n%+v\njson.Unmarshal\n%+v", b, got, want)
		}
	})
}

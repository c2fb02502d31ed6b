package inject_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/pilotfish-mesh/pilotfish/inject"
)

// FuzzReview feeds arbitrary bodies and paths to the webhook's decoding
// and injection: it must never panic, must answer a review or fail with
// ErrAdmissionReview, and an allowed patch must apply to the pod it was
// computed for. Seeds: every corpus pod as a review.
func FuzzReview(f *testing.F) {
	files, _ := filepath.Glob("testdata/corpus/*.yaml")
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		js, err := yaml.YAMLToJSON(b)
		if err != nil {
			continue
		}
		f.Add(review("admission.k8s.io/v1", "u", "shop", js), "/inject")
	}
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{"object":{}}}`), "/inject/cluster/c/net/n")
	f.Add([]byte(`{}`), "/inject/:ENV:A=1")
	in := testInjector(f)
	f.Fuzz(func(t *testing.T, body []byte, path string) {
		_, resp, err := in.Review(body, path)
		if err != nil {
			if !errors.Is(err, inject.ErrAdmissionReview) {
				t.Fatalf("error %v does not wrap ErrAdmissionReview", err)
			}
			return
		}
		if !resp.Allowed || resp.Patch == nil {
			return
		}
		var ar struct {
			Request struct {
				Object json.RawMessage `json:"object"`
			} `json:"request"`
		}
		var pod corev1.Pod
		if json.Unmarshal(body, &ar) != nil || json.Unmarshal(ar.Request.Object, &pod) != nil {
			t.Fatal("a patch for a body that does not decode")
		}
		applyPatch(t, &pod, resp.Patch)
	})
}

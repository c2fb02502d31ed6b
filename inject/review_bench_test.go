package inject_test

import (
	"encoding/json"
	"strconv"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pilotfish-mesh/pilotfish/inject"
)

// corpusReviews are AdmissionReviews of every corpus input (injected,
// skipped and denied ones), as `pilotfish bench inject` posts them: a
// Deployment's pod with a generated name, in namespace default unless
// the input names one.
func corpusReviews(t testing.TB) [][]byte {
	t.Helper()
	var out [][]byte
	for i, c := range loadCorpus(t) {
		w := parseWorkload(t, c.input)
		p := w.pod.DeepCopy()
		p.Kind, p.APIVersion = "Pod", "v1"
		if w.deploy != nil {
			p.Namespace, p.Name, p.GenerateName = w.deploy.Namespace, "", w.deploy.Name+"-5d4f8b7c9-"
		}
		if p.Namespace == "" {
			p.Namespace = "default"
		}
		raw, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(admissionv1.AdmissionReview{
			TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
			Request: &admissionv1.AdmissionRequest{
				UID:       types.UID("bench-" + strconv.Itoa(i)),
				Kind:      metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
				Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
				Namespace: p.Namespace, Name: p.Name, Operation: admissionv1.Create,
				Object: runtime.RawExtension{Raw: raw},
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// BenchmarkReview answers the AdmissionReview of every corpus input in
// turn with the chart's default settings: what the webhook server does
// per request (decoding the review, injecting, encoding the answer), as
// TestInjectVersusIstiod drives it.
func BenchmarkReview(b *testing.B) {
	reviews := corpusReviews(b)
	in, err := inject.New(settings(b, "default", false), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	cpu := processCPU(b)
	for i := 0; b.Loop(); i++ {
		if _, _, err := in.Review(reviews[i%len(reviews)], inject.Path); err != nil {
			b.Fatal(err)
		}
	}
	cpu.report(b)
}

package meshgen

import (
	"bytes"
	"testing"
)

func TestKubernetesShape(t *testing.T) {
	out := Kubernetes(Params{Services: 3, EndpointsPerService: 250, Namespaces: 2, Pods: true})
	docs := bytes.Count(out, []byte("\n---\n")) + 0
	// 3 services × (1 Service + 3 slices of ≤100 + 250 pods)
	if want := 3 * (1 + 3 + 250); docs != want {
		t.Fatalf("%d documents, want %d", docs, want)
	}
	if !bytes.Contains(out, []byte("namespace: ns-1")) || !bytes.Contains(out, []byte("name: svc-2-2\n")) {
		t.Fatal("namespaces or slice names missing")
	}
}

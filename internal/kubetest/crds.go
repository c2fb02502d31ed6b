package kubetest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/yaml"
)

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// IstioCRDsFile returns the path of Istio's CRDs in the istio.io/api module
// of pilotfish's build list, the same release its types come from.
func IstioCRDsFile(t testing.TB) string {
	t.Helper()
	return filepath.Join(moduleDir(t, "istio.io/api"), "kubernetes", "customresourcedefinitions.gen.yaml")
}

// InstallIstioCRDs creates Istio's CRDs (a test may call it after Start to
// install them into a running cluster) and waits until each is Established.
func (c *Cluster) InstallIstioCRDs(t testing.TB) {
	t.Helper()
	c.InstallCRDs(t, IstioCRDsFile(t))
}

// InstallCRDs creates every CustomResourceDefinition of a multi-document
// YAML file, skipping those that exist, and waits until all are Established.
func (c *Cluster) InstallCRDs(t testing.TB, file string) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 1<<16)
	var names []string
	for {
		var u unstructured.Unstructured
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatalf("kubetest: %s: %v", file, err)
		}
		if u.GetKind() != "CustomResourceDefinition" {
			continue
		}
		_, err := c.Dynamic.Resource(crdResource).Create(ctx, &u, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("kubetest: create CRD %s: %v", u.GetName(), err)
		}
		names = append(names, u.GetName())
	}
	if len(names) == 0 {
		t.Fatalf("kubetest: %s holds no CustomResourceDefinition", file)
	}
	for _, name := range names {
		c.waitEstablished(ctx, t, name)
	}
}

func (c *Cluster) waitEstablished(ctx context.Context, t testing.TB, name string) {
	t.Helper()
	for {
		u, err := c.Dynamic.Resource(crdResource).Get(ctx, name, metav1.GetOptions{})
		if err == nil && established(u) {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("kubetest: CRD %s not Established: %v", name, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func established(u *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}

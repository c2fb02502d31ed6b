package ingest

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/wrapperspb"
	typev1beta1 "istio.io/api/type/v1beta1"
	extensionsv1alpha1 "istio.io/client-go/pkg/apis/extensions/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pilotfish-mesh/pilotfish/index"
)

// TestKubeSourceWasmPlugin checks that the Kubernetes source watches
// WasmPlugins (v1alpha1) once their CRD is served: the row appears with
// its priority and selector, an invalid update keeps the last good row and
// names the field, and a delete retires the row.
func TestKubeSourceWasmPlugin(t *testing.T) {
	f := newKubeFixture(t, true)
	f.kube.disco.set(append(istioResources(), &metav1.APIResourceList{GroupVersion: extensionsGroupVersion,
		APIResources: []metav1.APIResource{{Name: "wasmplugins"}}}))
	wp := &extensionsv1alpha1.WasmPlugin{ObjectMeta: metav1.ObjectMeta{Name: "authn", Namespace: "shop", Generation: 1}}
	wp.Spec.Url = "oci://ghcr.io/example/authn:v1"
	wp.Spec.Priority = wrapperspb.Int32(7)
	wp.Spec.Selector = &typev1beta1.WorkloadSelector{MatchLabels: map[string]string{"app": "reviews"}}
	ctx, cancel := context.WithTimeout(context.Background(), 20e9)
	defer cancel()
	api := f.istio.ExtensionsV1alpha1().WasmPlugins("shop")
	if _, err := api.Create(ctx, wp, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	row := func() *index.Config {
		snap := f.w.Snapshot()
		ns, _ := snap.Symbols.Lookup("shop")
		n, _ := snap.Symbols.Lookup("authn")
		c, _ := snap.Config(index.ConfigWasmPlugin, index.ConfigKey{Namespace: ns, Name: n})
		return c
	}
	f.eventually("WasmPlugin row", func() bool { return row() != nil })
	if r := row(); r.Priority != 7 || !r.HasSelector {
		t.Errorf("row: priority %d, selector %v", r.Priority, r.HasSelector)
	}
	bad := wp.DeepCopy()
	bad.Generation = 2
	bad.Spec.Priority = wrapperspb.Int32(9)
	bad.Spec.Sha256 = "nothex"
	if _, err := api.Update(ctx, bad, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.eventually("error reported", func() bool {
		for _, e := range f.src.Errors() {
			if strings.Contains(e.Error(), "WasmPlugin shop/authn: spec.sha256: must be 64 lower-case hexadecimal digits") {
				return true
			}
		}
		return false
	})
	if r := row(); r == nil || r.Priority != 7 {
		t.Errorf("after a bad update: %+v, want the last good row (priority 7)", r)
	}
	if err := api.Delete(ctx, "authn", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.eventually("row deleted", func() bool { return row() == nil && len(f.src.Errors()) == 0 })
}

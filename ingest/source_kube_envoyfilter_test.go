package ingest

import (
	"context"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"
	networking "istio.io/api/networking/v1alpha3"
	typev1beta1 "istio.io/api/type/v1beta1"
	networkingv1alpha3 "istio.io/client-go/pkg/apis/networking/v1alpha3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pilotfish-mesh/pilotfish/index"
)

// TestKubeSourceEnvoyFilter checks that the Kubernetes source watches
// EnvoyFilters (v1alpha3) once their CRD is served: the row appears with
// its priority, no problem is reported for its applied patches
// (/debug/config_errors), an invalid update keeps the last good row and
// names the field, and a delete retires the row.
func TestKubeSourceEnvoyFilter(t *testing.T) {
	f := newKubeFixture(t, true)
	f.kube.disco.set(append(istioResources(), &metav1.APIResourceList{GroupVersion: networkingV1alpha3GroupVersion,
		APIResources: []metav1.APIResource{{Name: "envoyfilters"}}}))
	value, err := structpb.NewStruct(map[string]any{"connect_timeout": "3s"})
	if err != nil {
		t.Fatal(err)
	}
	ef := &networkingv1alpha3.EnvoyFilter{ObjectMeta: metav1.ObjectMeta{Name: "timeouts", Namespace: "shop", Generation: 1}}
	ef.Spec.Priority = 7
	ef.Spec.WorkloadSelector = &networking.WorkloadSelector{Labels: map[string]string{"app": "reviews"}}
	ef.Spec.ConfigPatches = []*networking.EnvoyFilter_EnvoyConfigObjectPatch{{
		ApplyTo: networking.EnvoyFilter_CLUSTER,
		Match:   &networking.EnvoyFilter_EnvoyConfigObjectMatch{ObjectTypes: &networking.EnvoyFilter_EnvoyConfigObjectMatch_Cluster{Cluster: &networking.EnvoyFilter_ClusterMatch{Service: "reviews.shop.svc.cluster.local"}}},
		Patch:   &networking.EnvoyFilter_Patch{Operation: networking.EnvoyFilter_Patch_MERGE, Value: value},
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 20e9)
	defer cancel()
	api := f.istio.NetworkingV1alpha3().EnvoyFilters("shop")
	if _, err := api.Create(ctx, ef, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	row := func() *index.Config {
		snap := f.w.Snapshot()
		ns, _ := snap.Symbols.Lookup("shop")
		n, _ := snap.Symbols.Lookup("timeouts")
		c, _ := snap.Config(index.ConfigEnvoyFilter, index.ConfigKey{Namespace: ns, Name: n})
		return c
	}
	f.eventually("EnvoyFilter row", func() bool { return row() != nil })
	if r := row(); r.Priority != 7 || !r.HasSelector {
		t.Errorf("row: priority %d, selector %v", r.Priority, r.HasSelector)
	}
	// Its patch is applied: no warning among the source's problems.
	if errs := f.src.Errors(); len(errs) != 0 {
		t.Errorf("problems: %v", errs)
	}

	bad := ef.DeepCopy()
	bad.Generation = 2
	bad.Spec.Priority = 9
	bad.Spec.ConfigPatches[0].Patch.Operation = networking.EnvoyFilter_Patch_INVALID
	if _, err := api.Update(ctx, bad, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.eventually("error reported", func() bool {
		for _, e := range f.src.Errors() {
			if strings.Contains(e.Error(), "spec.configPatches[0].patch.operation: required") {
				return true
			}
		}
		return false
	})
	if r := row(); r == nil || r.Priority != 7 {
		t.Errorf("after a bad update: %+v, want the last good row (priority 7)", r)
	}

	targeted := ef.DeepCopy()
	targeted.Generation = 3
	targeted.Spec.WorkloadSelector = nil
	targeted.Spec.TargetRefs = []*typev1beta1.PolicyTargetReference{{Kind: "Service", Name: "reviews"}}
	if _, err := api.Update(ctx, targeted, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.eventually("targetRefs row", func() bool { r := row(); return r != nil && !r.HasSelector })
	if err := api.Delete(ctx, "timeouts", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.eventually("row deleted", func() bool { return row() == nil && len(f.src.Errors()) == 0 })
}

// TestIstioGroupVersionsCoverKinds checks that discovery is asked about
// the group-version of every watched Istio kind (EnvoyFilter's is
// v1alpha3 only).
func TestIstioGroupVersionsCoverKinds(t *testing.T) {
	for _, ik := range istioKinds {
		if !slices.Contains(istioGroupVersions, ik.groupVersion) {
			t.Errorf("%v: group-version %s is not in istioGroupVersions", ik.kind, ik.groupVersion)
		}
	}
}

package ingest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	networking "istio.io/api/networking/v1alpha3"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// hasWarning reports whether errs has a warning containing each of parts.
func hasWarning(errs []error, parts ...string) bool {
	for _, err := range errs {
		if !IsWarning(err) {
			continue
		}
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(err.Error(), p)
		}
		if ok {
			return true
		}
	}
	return false
}

// TestFileSourceReportsUnsupportedFields: the config directory's objects
// that set unsupported fields apply, and each field is a warning of
// Errors, at its line, until the file drops it or goes.
func TestFileSourceReportsUnsupportedFields(t *testing.T) {
	f := newSourceFixture(t)
	f.write("dr.yaml", `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: reviews, namespace: shop}
spec:
  host: reviews
  trafficPolicy:
    outlierDetection: {consecutiveErrors: 5}
`)
	f.sync()
	errs := f.src.Errors()
	if len(errs) != 1 || !hasWarning(errs,
		"dr.yaml:7: warning: DestinationRule shop/reviews: spec.trafficPolicy.outlierDetection.consecutiveErrors: not supported by pilotfish") {
		t.Fatalf("errors %v, want the consecutiveErrors warning", errs)
	}
	drKey := ObjectKey{Kind: KindDestinationRule, Namespace: "shop", Name: "reviews"}
	if _, ok := f.src.applied[drKey]; !ok {
		t.Fatal("the DestinationRule was not applied")
	}

	// Dropping the field clears the warning; the object stays.
	f.write("dr.yaml", `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: reviews, namespace: shop}
spec:
  host: reviews
`)
	f.sync()
	if errs := f.src.Errors(); len(errs) != 0 {
		t.Fatalf("errors after the fix: %v", errs)
	}
	if _, ok := f.src.applied[drKey]; !ok {
		t.Fatal("the fixed DestinationRule is not applied")
	}

	// Set again, then the file removed: gone too.
	f.write("dr.yaml", `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: reviews, namespace: shop}
spec:
  host: reviews
  trafficPolicy:
    loadBalancer: {zoneAwareLbSetting: {enabled: true}}
`)
	f.sync()
	if errs := f.src.Errors(); len(errs) != 1 || !hasWarning(errs, "spec.trafficPolicy.loadBalancer.zoneAwareLbSetting: not supported by pilotfish") {
		t.Fatalf("errors %v, want the zoneAwareLbSetting's warning", errs)
	}
	if err := os.Remove(filepath.Join(f.dir, "dr.yaml")); err != nil {
		t.Fatal(err)
	}
	f.sync()
	if errs := f.src.Errors(); len(errs) != 0 {
		t.Fatalf("errors after the file went: %v", errs)
	}
}

// TestKubeSourceReportsUnsupportedFields: an API server object that sets
// an unsupported field is applied, and its warning is listed until an
// update drops the field, and again until the object is deleted.
func TestKubeSourceReportsUnsupportedFields(t *testing.T) {
	vs := &networkingv1.VirtualService{ObjectMeta: metav1.ObjectMeta{Name: "reviews", Namespace: "shop", Generation: 1}}
	vs.Spec.Hosts = []string{"reviews"}
	vs.Spec.Tcp = []*networking.TCPRoute{{
		Match: []*networking.L4MatchAttributes{{SourceSubnet: "10.0.0.0/8"}},
		Route: []*networking.RouteDestination{{Destination: &networking.Destination{Host: "reviews"}}},
	}}
	f := newKubeFixture(t, true, vs)
	f.eventually("applied", func() bool { return len(f.vsHosts("reviews")) == 1 })
	want := "VirtualService shop/reviews: spec.tcp[0].match[0].sourceSubnet: not supported by pilotfish"
	f.eventually("warning listed", func() bool { return hasWarning(f.src.Errors(), want) })
	if errs := f.src.Errors(); len(errs) != 1 {
		t.Fatalf("errors %v, want the one warning", errs)
	}

	ctx := context.Background()
	fixed := vs.DeepCopy()
	fixed.Generation = 2
	fixed.Spec.Tcp[0].Match = nil
	if _, err := f.istio.NetworkingV1().VirtualServices("shop").Update(ctx, fixed, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.eventually("warning cleared", func() bool { return len(f.src.Errors()) == 0 })

	again := fixed.DeepCopy()
	again.Generation = 3
	again.Spec.Tcp[0].Match = []*networking.L4MatchAttributes{{Port: 5432}, {SourceSubnet: "10.1.0.0/16"}}
	if _, err := f.istio.NetworkingV1().VirtualServices("shop").Update(ctx, again, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.eventually("warning of the second match", func() bool {
		return hasWarning(f.src.Errors(), "spec.tcp[0].match[1].sourceSubnet: not supported")
	})
	if err := f.istio.NetworkingV1().VirtualServices("shop").Delete(ctx, "reviews", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.eventually("cleared on delete", func() bool { return len(f.src.Errors()) == 0 })
}

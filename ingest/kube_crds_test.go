package ingest

import (
	"testing"

	networking "istio.io/api/networking/v1alpha3"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestKubeSourceCRDsRemoved: when discovery stops serving the Istio CRDs
// their objects leave the index (nothing may route by config the API no
// longer has), and they come back when the CRDs are installed again.
func TestKubeSourceCRDsRemoved(t *testing.T) {
	vs := &networkingv1.VirtualService{ObjectMeta: metav1.ObjectMeta{Name: "gone", Namespace: "shop", Generation: 1}}
	vs.Spec.Hosts = []string{"gone"}
	vs.Spec.Http = []*networking.HTTPRoute{{Route: []*networking.HTTPRouteDestination{{Destination: &networking.Destination{Host: "gone"}}}}}
	f := newKubeFixture(t, true, vs)
	f.eventually("VirtualService indexed", func() bool { return len(f.vsHosts("gone")) == 1 })
	f.kube.disco.set(nil)
	f.eventually("VirtualService deleted with its CRD", func() bool { return f.vsHosts("gone") == nil })
	f.kube.disco.set(istioResources())
	f.eventually("VirtualService back with its CRD", func() bool { return len(f.vsHosts("gone")) == 1 })
}

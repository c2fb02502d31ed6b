package ingest

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pilotfish-mesh/pilotfish/index"
	networking "istio.io/api/networking/v1alpha3"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	istiofake "istio.io/client-go/pkg/clientset/versioned/fake"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	fakediscovery "k8s.io/client-go/discovery/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// These tests use client-go's fake clientsets: they check the source's
// conversion, batching and bookkeeping, not the API server's behaviour
// (watch expiry, restarts, CRD installation), which the integration tests
// in cmd/pilotfish check against a real kube-apiserver.

func istioResources() []*metav1.APIResourceList {
	return []*metav1.APIResourceList{
		{GroupVersion: networkingGroupVersion, APIResources: []metav1.APIResource{
			{Name: "virtualservices"}, {Name: "virtualservices/status"}, {Name: "destinationrules"}}},
	}
}

// lockedDiscovery lets a test change the fake's discovery while the source
// polls it (the fake's Resources field is not synchronized).
type lockedDiscovery struct {
	*fakediscovery.FakeDiscovery
	mu        sync.Mutex
	resources []*metav1.APIResourceList
}

func (d *lockedDiscovery) set(r []*metav1.APIResourceList) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.resources = r
}

func (d *lockedDiscovery) ServerResourcesForGroupVersion(gv string) (*metav1.APIResourceList, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, r := range d.resources {
		if r.GroupVersion == gv {
			return r, nil
		}
	}
	return nil, apierrors.NewNotFound(k8sschema.GroupResource{}, gv)
}

type fakeKube struct {
	*kubefake.Clientset
	disco *lockedDiscovery
}

func (c *fakeKube) Discovery() discovery.DiscoveryInterface { return c.disco }

// TestMain turns off client-go's streaming lists: the fake clientsets of
// istio.io/client-go do not send the bookmark they end with (a real API
// server does).
func TestMain(m *testing.M) {
	os.Setenv("KUBE_FEATURE_WatchListClient", "false")
	os.Exit(m.Run())
}

type kubeFixture struct {
	t     *testing.T
	kube  *fakeKube
	istio *istiofake.Clientset
	w     *index.Writer
	src   *KubeSource
}

func newKubeFixture(t *testing.T, withCRDs bool, objs ...any) *kubeFixture {
	t.Helper()
	return newKubeFixtureWith(t, newKubeFixtureClient(), withCRDs, objs...)
}

// newKubeFixtureClient is the fake clientset a fixture runs on; tests add
// reactors to it before newKubeFixtureWith starts the source.
func newKubeFixtureClient() *kubefake.Clientset { return kubefake.NewClientset() }

func newKubeFixtureWith(t *testing.T, cs *kubefake.Clientset, withCRDs bool, objs ...any) *kubeFixture {
	t.Helper()
	return newKubeFixtureOpts(t, cs, withCRDs, KubeSourceOptions{}, objs...)
}

// newKubeFixtureOpts is newKubeFixtureWith with source options (the
// fixture sets the clients and the timings).
func newKubeFixtureOpts(t *testing.T, cs *kubefake.Clientset, withCRDs bool, opts KubeSourceOptions, objs ...any) *kubeFixture {
	t.Helper()
	kube := &fakeKube{Clientset: cs, disco: &lockedDiscovery{FakeDiscovery: cs.Discovery().(*fakediscovery.FakeDiscovery)}}
	f := &kubeFixture{t: t, kube: kube, istio: istiofake.NewSimpleClientset(), w: index.NewWriter()}
	if withCRDs {
		kube.disco.set(istioResources())
	}
	for _, o := range objs {
		f.create(o)
	}
	opts.Client, opts.Istio, opts.BatchWindow, opts.DiscoveryInterval = f.kube, f.istio, time.Millisecond, 20*time.Millisecond
	f.src = NewKubeSource(f.w, opts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.src.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	f.eventually("initial sync", f.src.Synced)
	return f
}

func (f *kubeFixture) create(o any) {
	f.t.Helper()
	ctx := context.Background()
	var err error
	switch x := o.(type) {
	case *corev1.Node:
		_, err = f.kube.CoreV1().Nodes().Create(ctx, x, metav1.CreateOptions{})
	case *corev1.Pod:
		_, err = f.kube.CoreV1().Pods(x.Namespace).Create(ctx, x, metav1.CreateOptions{})
	case *corev1.Service:
		_, err = f.kube.CoreV1().Services(x.Namespace).Create(ctx, x, metav1.CreateOptions{})
	case *discoveryv1.EndpointSlice:
		_, err = f.kube.DiscoveryV1().EndpointSlices(x.Namespace).Create(ctx, x, metav1.CreateOptions{})
	case *networkingv1.VirtualService:
		_, err = f.istio.NetworkingV1().VirtualServices(x.Namespace).Create(ctx, x, metav1.CreateOptions{})
	case *corev1.Secret:
		_, err = f.kube.CoreV1().Secrets(x.Namespace).Create(ctx, x, metav1.CreateOptions{})
	default:
		f.t.Fatalf("create %T", o)
	}
	if err != nil {
		f.t.Fatal(err)
	}
}

func (f *kubeFixture) eventually(what string, cond func() bool) {
	f.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			f.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// locality returns the locality of the service's endpoints ("-" when the
// service has none).
func (f *kubeFixture) locality(host string) string {
	snap := f.w.Snapshot()
	svc, _, ok := snap.LookupService(host, "shop")
	if !ok {
		return "-"
	}
	sh := snap.Endpoints(svc.Key)
	if sh == nil || sh.Len() == 0 {
		return "-"
	}
	return snap.String(sh.Groups[0].Endpoints[0].Locality)
}

func (f *kubeFixture) vsHosts(name string) []string {
	snap := f.w.Snapshot()
	ns, _ := snap.Symbols.Lookup("shop")
	n, _ := snap.Symbols.Lookup(name)
	c, ok := snap.Config(index.ConfigVirtualService, index.ConfigKey{Namespace: ns, Name: n})
	if !ok {
		return nil
	}
	return c.Spec.(*networking.VirtualService).Hosts
}

var (
	kubeNode1 = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", Labels: map[string]string{
		labelRegion: "us-east1", labelZone: "us-east1-b", "kubernetes.io/hostname": "node-1"}}}
	kubeService = &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "reviews", Namespace: "shop"},
		Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.10", Selector: map[string]string{"app": "reviews"},
			Ports: []corev1.ServicePort{{Name: "http", Port: 9080}}},
	}
	testKubeSlice = &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "reviews-abc", Namespace: "shop", Labels: map[string]string{labelServiceName: "reviews"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080)}},
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.244.0.5"}, NodeName: ptr.To("node-1"),
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
	}
)

func TestKubeSourceNodeLocality(t *testing.T) {
	f := newKubeFixture(t, false, kubeNode1, kubeService, testKubeSlice)
	const host = "reviews.shop.svc.cluster.local"
	if got := f.locality(host); got != "us-east1/us-east1-b" {
		t.Fatalf("locality after sync = %q, want the node's us-east1/us-east1-b", got)
	}
	// Relabelling the node moves its endpoints without touching the slice.
	n := kubeNode1.DeepCopy()
	n.Labels[labelZone] = "us-east1-c"
	n.Labels[labelSubzone] = "rack-7"
	if _, err := f.kube.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.eventually("relabelled locality", func() bool { return f.locality(host) == "us-east1/us-east1-c/rack-7" })
	// A node gone: the slice's zone hint, else nothing.
	if err := f.kube.CoreV1().Nodes().Delete(context.Background(), "node-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.eventually("locality without node", func() bool { return f.locality(host) == "" })
}

func TestKubeSourceDeletes(t *testing.T) {
	f := newKubeFixture(t, false, kubeService, testKubeSlice)
	const host = "reviews.shop.svc.cluster.local"
	if f.locality(host) == "-" {
		t.Fatal("no endpoints after sync")
	}
	if err := f.kube.DiscoveryV1().EndpointSlices("shop").Delete(context.Background(), "reviews-abc", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.eventually("endpoints deleted", func() bool { return f.locality(host) == "-" })
	// A deletion seen only on relist arrives as a tombstone.
	f.src.mu.Lock()
	w := f.src.running[KindService]
	f.src.mu.Unlock()
	f.src.handler(w).OnDelete(cache.DeletedFinalStateUnknown{Key: "shop/reviews"})
	f.eventually("service deleted by tombstone", func() bool {
		_, _, ok := f.w.Snapshot().LookupService(host, "shop")
		return !ok
	})
}

func TestKubeSourceInvalidIstioKeepsLastGood(t *testing.T) {
	vs := &networkingv1.VirtualService{ObjectMeta: metav1.ObjectMeta{Name: "reviews", Namespace: "shop", Generation: 1}}
	vs.Spec.Hosts = []string{"reviews"}
	vs.Spec.Http = []*networking.HTTPRoute{{Route: []*networking.HTTPRouteDestination{{Destination: &networking.Destination{Host: "reviews"}}}}}
	f := newKubeFixture(t, true, vs)
	if got := f.vsHosts("reviews"); len(got) != 1 || got[0] != "reviews" {
		t.Fatalf("hosts after sync = %v", got)
	}
	bad := vs.DeepCopy()
	bad.Generation = 2
	bad.Spec.Hosts = []string{"reviews", "other"}
	bad.Spec.Http[0].Route[0].Weight = -5
	if _, err := f.istio.NetworkingV1().VirtualServices("shop").Update(context.Background(), bad, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.eventually("error reported", func() bool { return len(f.src.Errors()) > 0 })
	msg := f.src.Errors()[0].Error()
	if !strings.Contains(msg, "VirtualService shop/reviews") || !strings.Contains(msg, "spec.http[0].route[0].weight") {
		t.Errorf("error %q does not name the object and field", msg)
	}
	if got := f.vsHosts("reviews"); len(got) != 1 {
		t.Errorf("hosts after a bad update = %v, want the last good [reviews]", got)
	}
	good := vs.DeepCopy()
	good.Generation = 3
	good.Spec.Hosts = []string{"reviews", "other"}
	if _, err := f.istio.NetworkingV1().VirtualServices("shop").Update(context.Background(), good, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.eventually("fixed", func() bool { return len(f.vsHosts("reviews")) == 2 && len(f.src.Errors()) == 0 })
}

func TestKubeSourceCRDsLater(t *testing.T) {
	vs := &networkingv1.VirtualService{ObjectMeta: metav1.ObjectMeta{Name: "late", Namespace: "shop", Generation: 1}}
	vs.Spec.Hosts = []string{"late"}
	vs.Spec.Http = []*networking.HTTPRoute{{Route: []*networking.HTTPRouteDestination{{Destination: &networking.Destination{Host: "late"}}}}}
	f := newKubeFixture(t, false, vs)
	if f.vsHosts("late") != nil {
		t.Fatal("a VirtualService was read before its CRD is served")
	}
	f.kube.disco.set(istioResources())
	f.eventually("CRD picked up", func() bool { return len(f.vsHosts("late")) == 1 })
}

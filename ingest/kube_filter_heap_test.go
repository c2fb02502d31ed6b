package ingest

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	networking "istio.io/api/networking/v1alpha3"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/pilotfish-mesh/pilotfish/index"
)

// TestDiscoverySelectorsHeap measures what discovery selectors save: the
// heap a KubeSource and its index hold for a synthetic cluster of 20
// namespaces (each with heapServices Services, an EndpointSlice of 20
// endpoints per Service, and a VirtualService per Service) with every
// namespace read, and with selectors that select 2 of them. The index
// holds a tenth of the rows; the informers still cache every namespace's
// cut-down objects (kube_filter.go), so the saving is the index's and the
// converter's share. The figures are logged; the assertion is only that
// selectors save something, with a wide margin.
func TestDiscoverySelectorsHeap(t *testing.T) {
	if testing.Short() {
		t.Skip("creates 2,000 objects in a real API server")
	}
	const namespaces, heapServices = 20, 50
	e := newFilterEnv(t)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for n := range namespaces {
		ns := fmt.Sprintf("f-heap-%02d", n)
		e.namespace(ns, map[string]string{"selected": fmt.Sprint(n < 2)})
		for i := range heapServices {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				if err := e.heapObjects(ns, n, i); err != nil {
					t.Error(err) // not Fatal: this is not the test's goroutine
				}
			}()
		}
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}

	measure := func(opts KubeSourceOptions) (heap uint64, services int) {
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		w := index.NewWriter()
		opts.Client, opts.Istio = e.c.Client, e.c.Istio
		s := NewKubeSource(w, opts)
		ctx, cancel := context.WithCancel(e.ctx)
		done := make(chan error, 1)
		go func() { done <- s.Run(ctx) }()
		e.waitFor("sync", func() string {
			if !s.Synced() || w.Snapshot().NumConfigs(index.ConfigVirtualService) == 0 {
				return "not synced"
			}
			return ""
		})
		time.Sleep(200 * time.Millisecond) // let the Istio informers' lists land
		runtime.GC()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		services = w.Snapshot().NumServices()
		cancel()
		<-done
		runtime.KeepAlive(w)
		return after.HeapAlloc - min(after.HeapAlloc, before.HeapAlloc), services
	}
	all, allSvcs := measure(KubeSourceOptions{})
	sel, selSvcs := measure(KubeSourceOptions{DiscoverySelectors: []*metav1.LabelSelector{{MatchLabels: map[string]string{"selected": "true"}}}})
	t.Logf("every namespace: %d services indexed, heap %.1f MiB; 2 of %d namespaces selected: %d services, heap %.1f MiB (%.0f%%)",
		allSvcs, float64(all)/(1<<20), namespaces, selSvcs, float64(sel)/(1<<20), 100*float64(sel)/float64(all))
	if selSvcs != 2*heapServices {
		t.Errorf("services indexed with selectors: %d, want %d", selSvcs, 2*heapServices)
	}
	if sel >= all {
		t.Errorf("heap with 2 of %d namespaces selected (%d B) is not below the heap with all (%d B)", namespaces, sel, all)
	}
}

// heapObjects creates Service svc-i in ns, its EndpointSlice of 20
// endpoints and a VirtualService for it.
func (e *filterEnv) heapObjects(ns string, n, i int) error {
	name := fmt.Sprintf("svc-%03d", i)
	_, err := e.c.Client.CoreV1().Services(ns).Create(e.ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": name},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
	}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	eps := make([]discoveryv1.Endpoint, 20)
	for j := range eps {
		eps[j] = discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.%d.%d.%d", n, i, j+1)},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}
	}
	_, err = e.c.Client.DiscoveryV1().EndpointSlices(ns).Create(e.ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name + "-1", Namespace: ns, Labels: map[string]string{labelServiceName: name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](80)}},
		Endpoints:   eps,
	}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	_, err = e.c.Istio.NetworkingV1().VirtualServices(ns).Create(e.ctx, &networkingv1.VirtualService{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: networking.VirtualService{Hosts: []string{name + "." + ns + ".svc.cluster.local"},
			Http: []*networking.HTTPRoute{{Route: []*networking.HTTPRouteDestination{{
				Destination: &networking.Destination{Host: name + "." + ns + ".svc.cluster.local"}}}}}},
	}, metav1.CreateOptions{})
	return err
}

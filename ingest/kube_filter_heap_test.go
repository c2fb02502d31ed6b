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
// holds a tenth of the rows, and the informers cache the other
// namespaces' objects as stubs (kube_stub.go). The figures are logged;
// the assertion has a wide margin.
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

	// What a running source holds: the heap after GC while it runs, less
	// the heap after GC once it has stopped and been dropped.
	measure := func(opts KubeSourceOptions) (heap uint64, services int) {
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
		services = w.Snapshot().NumServices()
		runtime.GC()
		var running runtime.MemStats
		runtime.ReadMemStats(&running)
		runtime.KeepAlive(s)
		runtime.KeepAlive(w)
		cancel()
		<-done
		s, w = nil, nil
		time.Sleep(100 * time.Millisecond) // the informers' goroutines end
		runtime.GC()
		var stopped runtime.MemStats
		runtime.ReadMemStats(&stopped)
		return running.HeapAlloc - min(running.HeapAlloc, stopped.HeapAlloc), services
	}
	// Selected first: what the first run leaves behind (client-go's
	// caches of its own) is then counted against the larger one.
	sel, selSvcs := measure(KubeSourceOptions{DiscoverySelectors: []*metav1.LabelSelector{{MatchLabels: map[string]string{"selected": "true"}}}})
	all, allSvcs := measure(KubeSourceOptions{})
	t.Logf("every namespace: %d services indexed, heap %.1f MiB; 2 of %d namespaces selected: %d services, heap %.1f MiB (%.0f%%)",
		allSvcs, float64(all)/(1<<20), namespaces, selSvcs, float64(sel)/(1<<20), 100*float64(sel)/float64(all))
	if selSvcs != 2*heapServices {
		t.Errorf("services indexed with selectors: %d, want %d", selSvcs, 2*heapServices)
	}
	// Measured 29% (2.2 of 7.7 MiB): the other namespaces cost their
	// stubs only. Half leaves room for noise.
	if sel*2 >= all {
		t.Errorf("heap with 2 of %d namespaces selected (%d B) is not below half the heap with all (%d B)", namespaces, sel, all)
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

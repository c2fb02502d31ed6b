package ingest

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/pilotfish-mesh/pilotfish/index"
	"github.com/pilotfish-mesh/pilotfish/internal/kubetest"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

// BenchmarkKubeSourceScale measures the Kubernetes source against a real
// API server holding 10,000 Services, 1,000 of them with an EndpointSlice
// of 100 endpoints (100,000 endpoints), created through the API: the time
// from the source's start to its initial sync, and the heap held by the
// informer caches and by the index, with the transforms and without
// (KeepWholeObjects), and with discovery selectors that select one
// namespace of the ten. Run it on its own:
//
//	go test -tags vtprotobuf -run '^$' -bench KubeSourceScale -benchtime 1x ./ingest
func BenchmarkKubeSourceScale(b *testing.B) {
	const services, slices, perSlice, namespaces = 10000, 1000, 100, 10
	c := kubetest.Start(b, kubetest.Options{})
	cfg := rest.CopyConfig(c.Config)
	cfg.QPS, cfg.Burst = 2000, 4000
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	populate(b, client, services, slices, perSlice, namespaces)
	b.Logf("created %d services and %d endpoints in %d slices through the API in %v",
		services, slices*perSlice, slices, time.Since(start).Round(time.Millisecond))
	b.ResetTimer()
	// "selected": transformed, with discovery selectors that select one
	// namespace of the ten (the label the API server sets on each).
	oneNS := []*metav1.LabelSelector{{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "ns-0"}}}
	for range b.N {
		for _, name := range []string{"transformed", "whole", "selected"} {
			opts := KubeSourceOptions{Client: client, KeepWholeObjects: name == "whole"}
			want := services
			if name == "selected" {
				opts.DiscoverySelectors, want = oneNS, services/namespaces
			}
			sync, cacheHeap, indexHeap := measureSource(b, opts, want)
			b.ReportMetric(sync.Seconds(), "sync-s-"+name)
			b.ReportMetric(float64(cacheHeap)/(1<<20), "cache-MiB-"+name)
			b.ReportMetric(float64(indexHeap)/(1<<20), "index-MiB-"+name)
			b.Logf("%s objects: initial sync %v; heap: informer caches %.1f MiB, index %.1f MiB",
				name, sync.Round(time.Millisecond), float64(cacheHeap)/(1<<20), float64(indexHeap)/(1<<20))
		}
	}
}

func heapNow() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// measureSource syncs a new source and index, and returns the time to sync,
// the heap the source's caches held and the heap the index holds alone.
func measureSource(b *testing.B, opts KubeSourceOptions, services int) (time.Duration, uint64, uint64) {
	base := heapNow()
	w := index.NewWriter()
	src := NewKubeSource(w, opts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	start := time.Now()
	go func() { _ = src.Run(ctx); close(done) }()
	for !src.Synced() {
		time.Sleep(5 * time.Millisecond)
	}
	sync := time.Since(start)
	if n := w.Snapshot().NumServices(); n < services {
		b.Fatalf("index holds %d services after sync", n)
	}
	both := heapNow()
	cancel()
	<-done
	src = nil
	indexOnly := heapNow()
	runtime.KeepAlive(w)
	return sync, both - indexOnly, indexOnly - base
}

// populate creates the services and slices with parallel clients.
func populate(b *testing.B, client kubernetes.Interface, services, slices, perSlice, namespaces int) {
	ctx := context.Background()
	for n := range namespaces {
		if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("ns-%d", n)}}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	work := make(chan int)
	var wg sync.WaitGroup
	var once sync.Once
	var firstErr error
	for range 32 {
		wg.Go(func() {
			for i := range work {
				ns := fmt.Sprintf("ns-%d", i%namespaces)
				name := fmt.Sprintf("svc-%d", i)
				_, err := client.CoreV1().Services(ns).Create(ctx, &corev1.Service{
					ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": name}},
					Spec: corev1.ServiceSpec{Selector: map[string]string{"app": name},
						Ports: []corev1.ServicePort{{Name: "http", Port: 80}, {Name: "grpc", Port: 9090}}},
				}, metav1.CreateOptions{})
				if err == nil && i < slices {
					eps := make([]discoveryv1.Endpoint, perSlice)
					for j := range eps {
						ip := fmt.Sprintf("10.%d.%d.%d", 128+i/256, i%256, j+1)
						eps[j] = discoveryv1.Endpoint{Addresses: []string{ip}, NodeName: ptr.To(fmt.Sprintf("node-%d", j%50)),
							Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
							TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: fmt.Sprintf("%s-%d", name, j)}}
					}
					_, err = client.DiscoveryV1().EndpointSlices(ns).Create(ctx, &discoveryv1.EndpointSlice{
						ObjectMeta: metav1.ObjectMeta{Name: name + "-abcde", Namespace: ns, Labels: map[string]string{
							labelServiceName: name, "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io"}},
						AddressType: discoveryv1.AddressTypeIPv4,
						Ports: []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080)},
							{Name: ptr.To("grpc"), Port: ptr.To[int32](9090)}},
						Endpoints: eps,
					}, metav1.CreateOptions{})
				}
				if err != nil {
					once.Do(func() { firstErr = err })
				}
			}
		})
	}
	for i := range services {
		work <- i
	}
	close(work)
	wg.Wait()
	if firstErr != nil {
		b.Fatal(firstErr)
	}
}

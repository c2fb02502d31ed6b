package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/pilotfish-mesh/pilotfish/internal/kubetest"
	"github.com/pilotfish-mesh/pilotfish/loadgen"
)

// BenchmarkKubeServe measures `pilotfish serve --kubeconfig` against a real
// API server. Run one part at a time; each creates its objects through the
// API first:
//
//	go test -tags vtprotobuf -run '^$' -bench 'KubeServe/Scale' -benchtime 1x ./cmd/pilotfish
//	go test -tags vtprotobuf -run '^$' -bench 'KubeServe/Convergence' -benchtime 1x ./cmd/pilotfish
//
// Scale: 10,000 Services, 1,000 of them with an EndpointSlice of 100
// endpoints (100,000 endpoints); the time from serve's start to /ready and
// the heap it then holds. Convergence: 100 Services of 10 endpoints, 1,000
// loadgen sidecars, and the time an EndpointSlice change takes to reach all
// of them.
func BenchmarkKubeServe(b *testing.B) {
	b.Run("Scale", func(b *testing.B) {
		c := kubetest.Start(b, kubetest.Options{})
		client := fastClient(b, c)
		start := time.Now()
		populateMesh(b, client, "ns", 10, 10000, 1000, 100)
		b.Logf("created 10,000 services and 100,000 endpoints through the API in %v", time.Since(start).Round(time.Second))
		for range b.N {
			base := heapAlloc()
			start := time.Now()
			s := benchServe(b, c.Kubeconfig)
			ready := time.Since(start)
			heap := heapAlloc() - base
			b.ReportMetric(ready.Seconds(), "s-to-ready")
			b.ReportMetric(float64(heap)/(1<<20), "heap-MiB")
			b.Logf("serve: /ready after %v; heap %.1f MiB (index, informer caches, engine)", ready.Round(time.Millisecond), float64(heap)/(1<<20))
			s()
		}
	})
	b.Run("Convergence", func(b *testing.B) {
		c := kubetest.Start(b, kubetest.Options{})
		client := fastClient(b, c)
		populateMesh(b, client, "load-", 1, 100, 100, 10)
		for range b.N {
			stop := benchServe(b, c.Kubeconfig, func(addr string) {
				change := 0
				rep, err := loadgen.Run(context.Background(), loadgen.Config{
					XDS: addr, Proxies: 1000, Ramp: 250, Changes: 5, ChangeTimeout: time.Minute,
					ChangeFunc: func(ctx context.Context) error {
						change++
						es, err := client.DiscoveryV1().EndpointSlices("load-0").Get(ctx, "svc-0-abcde", metav1.GetOptions{})
						if err != nil {
							return err
						}
						es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.200.0.%d", change)},
							Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
						_, err = client.DiscoveryV1().EndpointSlices("load-0").Update(ctx, es, metav1.UpdateOptions{})
						return err
					},
				})
				if err != nil {
					b.Fatal(err)
				}
				_ = rep.WriteTable(os.Stdout) // b.Log truncates long output
			})
			stop()
		}
	})
}

func fastClient(b *testing.B, c *kubetest.Cluster) kubernetes.Interface {
	cfg := rest.CopyConfig(c.Config)
	cfg.QPS, cfg.Burst = 2000, 4000
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	return client
}

func heapAlloc() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// benchServe runs serve on the cluster until it is ready, calls each of
// with its gRPC address, and returns a function that stops it.
func benchServe(b *testing.B, kubeconfig string, with ...func(addr string)) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	addrs := make(chan started, 1)
	done := make(chan error, 1)
	o := &serveOptions{grpcAddr: "127.0.0.1:0", httpAddr: "127.0.0.1:0", domain: "cluster.local", logLevel: "error",
		debounceAfter: 100 * time.Millisecond, debounceMax: 10 * time.Second, enableEDSDebounce: true, pushThrottle: 100,
		shutdownGrace: time.Second, kube: kubeOptions{kubeconfig: kubeconfig, clusterID: "Kubernetes", discoveryInterval: 10 * time.Second}}
	go func() { done <- runServe(ctx, o, func(s started) { addrs <- s }) }()
	var s started
	select {
	case s = <-addrs:
	case err := <-done:
		b.Fatalf("serve exited: %v", err)
	}
	for {
		resp, err := http.Get("http://" + s.httpAddr.String() + "/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, f := range with {
		f(s.grpcAddr.String())
	}
	return func() { cancel(); <-done }
}

// populateMesh creates services Services spread over namespaces
// PREFIX0..., the first withSlices of them with an EndpointSlice of
// perSlice endpoints, with 32 parallel clients.
func populateMesh(b *testing.B, client kubernetes.Interface, prefix string, namespaces, services, withSlices, perSlice int) {
	ctx := context.Background()
	for n := range namespaces {
		if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s%d", prefix, n)}}, metav1.CreateOptions{}); err != nil {
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
				ns := fmt.Sprintf("%s%d", prefix, i%namespaces)
				name := fmt.Sprintf("svc-%d", i)
				_, err := client.CoreV1().Services(ns).Create(ctx, &corev1.Service{
					ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
					Spec: corev1.ServiceSpec{Selector: map[string]string{"app": name},
						Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
				}, metav1.CreateOptions{})
				if err == nil && i < withSlices {
					eps := make([]discoveryv1.Endpoint, perSlice)
					for j := range eps {
						eps[j] = discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.%d.%d.%d", 128+i/256, i%256, j+1)},
							NodeName: ptr.To(fmt.Sprintf("node-%d", j%50)), Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}
					}
					_, err = client.DiscoveryV1().EndpointSlices(ns).Create(ctx, &discoveryv1.EndpointSlice{
						ObjectMeta:  metav1.ObjectMeta{Name: name + "-abcde", Namespace: ns, Labels: map[string]string{"kubernetes.io/service-name": name}},
						AddressType: discoveryv1.AddressTypeIPv4,
						Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080)}},
						Endpoints:   eps,
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

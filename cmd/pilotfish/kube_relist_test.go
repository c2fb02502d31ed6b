package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/pilotfish-mesh/pilotfish/internal/kubetest"
)

// TestKubeE2EWatchExpiryRelist: pilotfish reaches the API server through a
// TCP relay the test can cut. While it is cut, objects are deleted and
// created; etcd is then compacted past them and the API server restarted
// (emptying its watch cache), so the informers' watches, resumed from the
// resourceVersion they last saw, end in 410 Gone and client-go relists.
// Afterwards /debug/registryz, /debug/configz and a sidecar's xDS hold
// exactly the API's state: nothing lost, nothing deleted kept, nothing
// twice.
func TestKubeE2EWatchExpiryRelist(t *testing.T) {
	c := kubetest.Start(t, kubetest.Options{IstioCRDs: true})
	m := newKubeMesh(t, c, true)
	m.route("v1")
	relay := newCutRelay(t, strings.TrimPrefix(c.URL, "https://"))
	s := startKubeServe(t, kubeconfigVia(t, c.Kubeconfig, relay.addr()))
	ads := newSidecarProxy(t, s.grpc)
	eventually(t, "sidecar EDS", func() string {
		if got := ads.endpoints(echoCluster); len(got) != 2 {
			return fmt.Sprintf("%s endpoints = %v", echoCluster, got)
		}
		return ""
	})
	svcs, err := c.Client.CoreV1().Services(kubeNS).List(m.ctx(), metav1.ListOptions{})
	m.check(err)
	seen := svcs.ResourceVersion // at least what the informers have seen

	relay.cut()
	m.check(c.Client.DiscoveryV1().EndpointSlices(kubeNS).Delete(m.ctx(), "echo-v2", metav1.DeleteOptions{}))
	m.check(c.Istio.NetworkingV1().VirtualServices(kubeNS).Delete(m.ctx(), "echo", metav1.DeleteOptions{}))
	_, err = c.Client.CoreV1().Services(kubeNS).Create(m.ctx(), &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "cart", Namespace: kubeNS},
		Spec:       corev1.ServiceSpec{Selector: map[string]string{"app": "cart"}, Ports: []corev1.ServicePort{{Name: "http", Port: 8080}}},
	}, metav1.CreateOptions{})
	m.check(err)
	_, err = c.Client.DiscoveryV1().EndpointSlices(kubeNS).Create(m.ctx(), &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "cart-1", Namespace: kubeNS, Labels: map[string]string{"kubernetes.io/service-name": "cart"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(int32(8080))}},
		Endpoints:   endpointsOf("10.244.0.20"),
	}, metav1.CreateOptions{})
	m.check(err)
	c.CompactEtcd(t)
	c.RestartAPIServer(t)
	expectGone(t, c, seen)
	relay.restore()

	const cartCluster = "outbound|8080||cart.shop.svc.cluster.local"
	eventuallyFor(t, time.Minute, "relisted state", func() string {
		_, reg := get(t, s.http+"/debug/registryz")
		switch {
		case bodyHas(reg, "10.244.0.6"):
			return "registryz still has the deleted slice's endpoint"
		case strings.Count(string(reg), `"cart.shop.svc.cluster.local"`) != 1 || !bodyHas(reg, "10.244.0.20"):
			return "registryz lacks the new Service or its endpoint, or holds it twice: " + string(reg)
		case strings.Count(string(reg), `"echo.shop.svc.cluster.local"`) != 1 || !bodyHas(reg, "10.244.0.5"):
			return "registryz lost echo or holds it twice: " + string(reg)
		}
		if _, cfg := get(t, s.http+"/debug/configz"); bodyHas(cfg, `"VirtualService"`) || !bodyHas(cfg, `"DestinationRule"`) {
			return "configz keeps the deleted VirtualService or lost the DestinationRule: " + string(cfg)
		}
		if got := ads.endpoints(echoCluster); len(got) != 1 || got[0] != "10.244.0.5" {
			return fmt.Sprintf("xDS %s endpoints = %v", echoCluster, got)
		}
		if got := ads.endpoints(cartCluster); len(got) != 1 || got[0] != "10.244.0.20" {
			return fmt.Sprintf("xDS %s endpoints = %v", cartCluster, got)
		}
		return ""
	})
	if n := relay.accepted(); n < 2 {
		t.Fatalf("pilotfish opened %d connections to the API server: it never came back after the cut", n)
	}
}

// expectGone checks that a watch from rv, the resourceVersion the informers
// last saw, is answered 410 Gone: the relist this test checks is forced.
func expectGone(t *testing.T, c *kubetest.Cluster, rv string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w, err := c.Client.CoreV1().Services(kubeNS).Watch(ctx, metav1.ListOptions{ResourceVersion: rv})
	if err != nil {
		if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
			return
		}
		t.Fatalf("watch from %s: %v, want 410 Gone", rv, err)
	}
	defer w.Stop()
	for ev := range w.ResultChan() {
		if ev.Type != watch.Error {
			t.Fatalf("watch from compacted resourceVersion %s delivered %s, want 410 Gone", rv, ev.Type)
		}
		if st, ok := ev.Object.(*metav1.Status); !ok || st.Code != http.StatusGone {
			t.Fatalf("watch from %s ended with %v, want 410 Gone", rv, ev.Object)
		}
		return
	}
	t.Fatalf("watch from %s ended without an event, want 410 Gone", rv)
}

// kubeconfigVia writes a copy of a kubeconfig whose server is addr (the
// API server's certificate names 127.0.0.1, so TLS still verifies).
func kubeconfigVia(t *testing.T, kubeconfig, addr string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, cl := range cfg.Clusters {
		cl.Server = "https://" + addr
	}
	path := filepath.Join(t.TempDir(), "kubeconfig-relay")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// cutRelay forwards TCP connections to target until cut, which closes
// every open connection and closes new ones at once, as a network
// partition between pilotfish and the API server would.
type cutRelay struct {
	l      net.Listener
	target string

	mu    sync.Mutex
	down  bool
	conns map[net.Conn]bool
	n     int
}

func newCutRelay(t *testing.T, target string) *cutRelay {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &cutRelay{l: l, target: target, conns: map[net.Conn]bool{}}
	t.Cleanup(func() { _ = l.Close(); r.cut() })
	go r.serve()
	return r
}

func (r *cutRelay) addr() string { return r.l.Addr().String() }

func (r *cutRelay) serve() {
	for {
		in, err := r.l.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		} else if err != nil {
			continue
		}
		r.mu.Lock()
		if r.down {
			r.mu.Unlock()
			_ = in.Close()
			continue
		}
		r.n++
		r.mu.Unlock()
		go r.relay(in)
	}
}

func (r *cutRelay) relay(in net.Conn) {
	out, err := net.Dial("tcp", r.target)
	if err != nil {
		_ = in.Close()
		return
	}
	if !r.track(in, out) {
		return
	}
	go func() { _, _ = io.Copy(out, in); _ = out.Close() }()
	_, _ = io.Copy(in, out)
	_ = in.Close()
}

// track registers a relayed pair, or closes it if the relay was cut
// meanwhile.
func (r *cutRelay) track(in, out net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.down {
		_, _ = in.Close(), out.Close()
		return false
	}
	r.conns[in], r.conns[out] = true, true
	return true
}

func (r *cutRelay) cut() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.down = true
	for c := range r.conns {
		_ = c.Close()
	}
	clear(r.conns)
}

func (r *cutRelay) restore() {
	r.mu.Lock()
	r.down = false
	r.mu.Unlock()
}

// accepted counts the connections relayed so far.
func (r *cutRelay) accepted() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

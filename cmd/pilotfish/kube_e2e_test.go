package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/xds"
	networking "istio.io/api/networking/v1alpha3"
	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/pilotfish-mesh/pilotfish/internal/kubetest"
)

// Integration tests of the Kubernetes source against a real etcd and
// kube-apiserver (internal/kubetest), with real xDS clients: grpc-go's xDS
// resolver routing RPCs to real backends, and a raw ADS client standing in
// for an Envoy sidecar. Endpoint addresses are stand-in pod IPs
// (10.244.0.x; the API server refuses loopback ones) with the backends'
// real ports; the gRPC dialer maps them to 127.0.0.1.

const kubeNS = "shop"

// kubeClusterID is the replicas' --cluster-id; the test proxies say
// CLUSTER_ID "Kubernetes", so endpoint metadata naming kubeClusterID shows
// the flag, not the proxy, decides it.
const kubeClusterID = "east-1"

// kubeServer is one pilotfish replica watching the test's API server.
type kubeServer struct {
	grpc, http string
	stop       func()
}

func startKubeServe(t *testing.T, kubeconfig string, opts ...func(*serveOptions)) *kubeServer {
	t.Helper()
	ks := startKubeServeUnready(t, kubeconfig, opts...)
	eventually(t, "ready", func() string {
		if code, _ := get(t, ks.http+"/ready"); code != 200 {
			return fmt.Sprintf("/ready = %d", code)
		}
		return ""
	})
	return ks
}

// startKubeServeUnready starts the replica without waiting for its sync;
// opts change its options (a test adds --config-dir).
func startKubeServeUnready(t *testing.T, kubeconfig string, opts ...func(*serveOptions)) *kubeServer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addrs := make(chan started, 1)
	done := make(chan error, 1)
	o := &serveOptions{grpcAddr: "127.0.0.1:0", httpAddr: "127.0.0.1:0", domain: "cluster.local",
		logLevel: "error", debounceAfter: 10 * time.Millisecond, debounceMax: time.Second, enableEDSDebounce: true,
		pushThrottle: 100, shutdownGrace: time.Second,
		kube: kubeOptions{kubeconfig: kubeconfig, clusterID: kubeClusterID, discoveryInterval: 200 * time.Millisecond}}
	for _, opt := range opts {
		opt(o)
	}
	go func() { done <- runServe(ctx, o, func(s started) { addrs <- s }) }()
	var s started
	select {
	case s = <-addrs:
	case err := <-done:
		t.Fatalf("serve exited: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not start")
	}
	ks := &kubeServer{grpc: s.grpcAddr.String(), http: "http://" + s.httpAddr.String()}
	var stopped bool
	ks.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serve shutdown: %v", err)
			}
		case <-time.After(15 * time.Second):
			t.Error("serve did not shut down")
		}
	}
	t.Cleanup(ks.stop)
	return ks
}

// kubeMesh writes the echo mesh of xds_e2e_test.go through the API: a
// Service, a Pod per version (status set as a kubelet would), an
// EndpointSlice per version, a DestinationRule with subsets per version.
type kubeMesh struct {
	t       *testing.T
	c       *kubetest.Cluster
	v1, v2  *echoBackend
	p1, p2  int
	xdsAddr string
}

func (m *kubeMesh) ctx() context.Context { return context.Background() }

func (m *kubeMesh) check(err error) {
	m.t.Helper()
	if err != nil {
		m.t.Fatal(err)
	}
}

func newKubeMesh(t *testing.T, c *kubetest.Cluster, istio bool) *kubeMesh {
	m := &kubeMesh{t: t, c: c}
	m.p1, m.v1 = startBackend(t, healthpb.HealthCheckResponse_SERVING)
	m.p2, m.v2 = startBackend(t, healthpb.HealthCheckResponse_NOT_SERVING)
	c.EnsureNamespace(t, kubeNS)
	_, err := c.Client.CoreV1().Nodes().Create(m.ctx(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1",
		Labels: map[string]string{"topology.kubernetes.io/region": "us-east1", "topology.kubernetes.io/zone": "us-east1-b"}}}, metav1.CreateOptions{})
	m.check(err)
	_, err = c.Client.CoreV1().Services(kubeNS).Create(m.ctx(), &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: kubeNS},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "echo"},
			Ports: []corev1.ServicePort{{Name: "grpc", Port: 9080}}},
	}, metav1.CreateOptions{})
	m.check(err)
	for i, v := range []string{"v1", "v2"} {
		m.pod("echo-"+v+"-0", v, fmt.Sprintf("10.244.0.%d", 5+i))
	}
	m.slice("echo-v1", m.p1, "10.244.0.5")
	m.slice("echo-v2", m.p2, "10.244.0.6")
	if istio {
		dr := &networkingv1.DestinationRule{ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: kubeNS}}
		dr.Spec.Host = "echo.shop.svc.cluster.local"
		dr.Spec.Subsets = []*networking.Subset{
			{Name: "v1", Labels: map[string]string{"version": "v1"}},
			{Name: "v2", Labels: map[string]string{"version": "v2"}}}
		_, err = c.Istio.NetworkingV1().DestinationRules(kubeNS).Create(m.ctx(), dr, metav1.CreateOptions{})
		m.check(err)
	}
	return m
}

func (m *kubeMesh) pod(name, version, ip string) {
	m.t.Helper()
	p, err := m.c.Client.CoreV1().Pods(kubeNS).Create(m.ctx(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: kubeNS, Labels: map[string]string{"app": "echo", "version": version}},
		Spec:       corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "echo", Image: "echo"}}},
	}, metav1.CreateOptions{})
	m.check(err)
	p.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}},
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	_, err = m.c.Client.CoreV1().Pods(kubeNS).UpdateStatus(m.ctx(), p, metav1.UpdateOptions{})
	m.check(err)
}

func endpointsOf(ips ...string) []discoveryv1.Endpoint {
	var eps []discoveryv1.Endpoint
	for _, ip := range ips {
		eps = append(eps, discoveryv1.Endpoint{Addresses: []string{ip}, NodeName: ptr.To("node-1"),
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
	}
	return eps
}

func (m *kubeMesh) slice(name string, port int, ips ...string) {
	m.t.Helper()
	_, err := m.c.Client.DiscoveryV1().EndpointSlices(kubeNS).Create(m.ctx(), &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name, Namespace: kubeNS, Labels: map[string]string{"kubernetes.io/service-name": "echo"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("grpc"), Port: ptr.To(int32(port))}},
		Endpoints:   endpointsOf(ips...),
	}, metav1.CreateOptions{})
	m.check(err)
}

// scale replaces the addresses of an EndpointSlice.
func (m *kubeMesh) scale(name string, ips ...string) {
	m.t.Helper()
	es, err := m.c.Client.DiscoveryV1().EndpointSlices(kubeNS).Get(m.ctx(), name, metav1.GetOptions{})
	m.check(err)
	es.Endpoints = endpointsOf(ips...)
	_, err = m.c.Client.DiscoveryV1().EndpointSlices(kubeNS).Update(m.ctx(), es, metav1.UpdateOptions{})
	m.check(err)
}

// route writes the echo VirtualService sending every call to subset.
func (m *kubeMesh) route(subset string) {
	m.t.Helper()
	vsc := m.c.Istio.NetworkingV1().VirtualServices(kubeNS)
	vs, err := vsc.Get(m.ctx(), "echo", metav1.GetOptions{})
	if err != nil {
		vs = &networkingv1.VirtualService{ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: kubeNS}}
	}
	vs.Spec.Hosts = []string{"echo.shop.svc.cluster.local"}
	vs.Spec.Http = []*networking.HTTPRoute{{Route: []*networking.HTTPRouteDestination{
		{Destination: &networking.Destination{Host: "echo.shop.svc.cluster.local", Subset: subset}}}}}
	if vs.ResourceVersion == "" {
		_, err = vsc.Create(m.ctx(), vs, metav1.CreateOptions{})
	} else {
		_, err = vsc.Update(m.ctx(), vs, metav1.UpdateOptions{})
	}
	m.check(err)
}

// grpcClient is a proxyless gRPC client of echo through pilotfish at addr.
func grpcClient(t *testing.T, addr string) healthpb.HealthClient {
	bootstrap := fmt.Sprintf(`{
		"xds_servers": [{"server_uri": %q, "channel_creds": [{"type": "insecure"}], "server_features": ["xds_v3"]}],
		"node": {"id": "sidecar~10.244.9.9~client-0.shop~shop.svc.cluster.local",
		         "metadata": {"GENERATOR": "grpc", "NAMESPACE": "shop", "ISTIO_VERSION": "1.31.0"}}
	}`, addr)
	resolver, err := xds.NewXDSResolverWithConfigForTesting([]byte(bootstrap))
	if err != nil {
		t.Fatal(err)
	}
	cc, err := grpc.NewClient("xds:///echo.shop.svc.cluster.local:9080",
		grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithResolvers(resolver),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			_, port, _ := net.SplitHostPort(addr)
			return (&net.Dialer{}).DialContext(ctx, "tcp", "127.0.0.1:"+port)
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return healthpb.NewHealthClient(cc)
}

// answeredBy makes one call and names the version that answered.
func answeredBy(h healthpb.HealthClient) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := h.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true))
	switch {
	case err != nil:
		return "error: " + err.Error()
	case resp.Status == healthpb.HealthCheckResponse_SERVING:
		return "v1"
	default:
		return "v2"
	}
}

// allBy reports "" once n calls in a row are answered by version.
func allBy(h healthpb.HealthClient, version string, n int) string {
	for i := 0; i < n; i++ {
		if got := answeredBy(h); got != version {
			return "answered by " + got + ", want " + version
		}
	}
	return ""
}

// counter reads one sample of a Prometheus text exposition, 0 if absent.
func metricSample(t *testing.T, base, name, label string) float64 {
	t.Helper()
	_, b := get(t, base+"/metrics")
	want := name
	if label != "" {
		want += "{" + label + "}"
	}
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, want+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return v
		}
	}
	return 0
}

func bodyHas(body []byte, s string) bool { return strings.Contains(string(body), s) }

// echoCluster is the sidecar's cluster of every echo endpoint (the subset
// clusters hold only endpoints whose Pod carries the subset's labels).
const echoCluster = "outbound|9080||echo.shop.svc.cluster.local"

func TestKubeE2E(t *testing.T) {
	c := kubetest.Start(t, kubetest.Options{IstioCRDs: true})
	m := newKubeMesh(t, c, true)
	m.route("v2")
	a := startKubeServe(t, c.Kubeconfig)
	h := grpcClient(t, a.grpc)

	t.Run("RoutesThroughTheAPI", func(t *testing.T) {
		eventually(t, "VirtualService to v2", func() string { return allBy(h, "v2", 5) })
		m.route("v1")
		eventually(t, "VirtualService to v1", func() string { return allBy(h, "v1", 5) })
		// Locality comes from the endpoint's Node.
		_, reg := get(t, a.http+"/debug/registryz")
		if !bodyHas(reg, "us-east1/us-east1-b") {
			t.Errorf("registryz lacks the node's locality: %s", reg)
		}
	})

	ads := newSidecarProxy(t, a.grpc)
	eventually(t, "sidecar EDS", func() string {
		if got := ads.endpoints(echoCluster); len(got) != 2 {
			return fmt.Sprintf("%s endpoints = %v", echoCluster, got)
		}
		return ""
	})
	t.Run("EndpointsCarryClusterID", func(t *testing.T) {
		ws := ads.workloadMetadata(echoCluster)
		if len(ws) != 2 {
			t.Fatalf("istio.workload of %s = %q, want one per endpoint", echoCluster, ws)
		}
		for _, w := range ws {
			if f := strings.Split(w, ";"); len(f) != 5 || f[1] != kubeNS || f[4] != kubeClusterID {
				t.Errorf("istio.workload %q: want namespace %s and --cluster-id %s", w, kubeNS, kubeClusterID)
			}
		}
	})

	t.Run("ScaleUsesEndpointFastPath", func(t *testing.T) {
		time.Sleep(300 * time.Millisecond) // let earlier pushes settle (debounce is 10ms)
		cds, lds := ads.count(resourcev3.ClusterType), ads.count(resourcev3.ListenerType)
		configPushes := metricSample(t, a.http, "pilotfish_push_triggers_total", `reason="config"`)
		endpointPushes := metricSample(t, a.http, "pilotfish_push_triggers_total", `reason="endpoint"`)
		m.scale("echo-v1", "10.244.0.5", "10.244.0.7", "10.244.0.8")
		eventually(t, "scaled EDS", func() string {
			if got := ads.endpoints(echoCluster); len(got) != 4 {
				return fmt.Sprintf("%s endpoints = %v", echoCluster, got)
			}
			return ""
		})
		time.Sleep(200 * time.Millisecond) // a config push would have followed by now
		if c2, l2 := ads.count(resourcev3.ClusterType), ads.count(resourcev3.ListenerType); c2 != cds || l2 != lds {
			t.Errorf("scaling sent CDS %d→%d, LDS %d→%d responses; want EDS only", cds, c2, lds, l2)
		}
		if got := metricSample(t, a.http, "pilotfish_push_triggers_total", `reason="config"`); got != configPushes {
			t.Errorf("config push triggers %v → %v on an endpoint-only change", configPushes, got)
		}
		if got := metricSample(t, a.http, "pilotfish_push_triggers_total", `reason="endpoint"`); got <= endpointPushes {
			t.Errorf("endpoint push triggers %v → %v: the fast path did not run", endpointPushes, got)
		}
		eventually(t, "traffic after scaling", func() string { return allBy(h, "v1", 3) })
	})

	t.Run("InvalidVirtualServiceKeepsLastGood", func(t *testing.T) {
		vs, err := c.Istio.NetworkingV1().VirtualServices(kubeNS).Get(m.ctx(), "echo", metav1.GetOptions{})
		m.check(err)
		vs.Spec.Http[0].Route[0].Destination.Subset = "v2"
		vs.Spec.Http[0].Route[0].Weight = 50 // a single route weighing 50: istiod's validation rejects it
		vs.Spec.Http[0].Route = append(vs.Spec.Http[0].Route, &networking.HTTPRouteDestination{
			Destination: &networking.Destination{Host: "echo.shop.svc.cluster.local", Subset: "v2"}, Weight: -1})
		if _, err := c.Istio.NetworkingV1().VirtualServices(kubeNS).Update(m.ctx(), vs, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("update with an invalid VirtualService: %v", err)
		}
		eventually(t, "config_errors", func() string {
			if _, b := get(t, a.http+"/debug/config_errors"); !bodyHas(b, "VirtualService shop/echo") || !bodyHas(b, "weight") {
				return "config_errors = " + string(b)
			}
			return ""
		})
		if msg := allBy(h, "v1", 5); msg != "" {
			t.Errorf("after an invalid update: %s (the last good route is to v1)", msg)
		}
		m.route("v1")
		eventually(t, "errors cleared", func() string {
			if _, b := get(t, a.http+"/debug/config_errors"); bodyHas(b, "VirtualService") {
				return "config_errors = " + string(b)
			}
			return ""
		})
	})

	t.Run("APIServerRestart", func(t *testing.T) {
		_, before := get(t, a.http+"/debug/registryz")
		c.RestartAPIServer(t)
		_, after := get(t, a.http+"/debug/registryz")
		if string(before) != string(after) {
			t.Errorf("registry changed across an API server restart:\nbefore %s\nafter  %s", before, after)
		}
		// Changes after the restart still flow (the informers re-watched).
		m.scale("echo-v1", "10.244.0.5", "10.244.0.9")
		eventually(t, "EDS after restart", func() string {
			if got := ads.endpoints(echoCluster); len(got) != 3 || got[2] != "10.244.0.9" {
				return fmt.Sprintf("%s endpoints = %v", echoCluster, got)
			}
			return ""
		})
		m.route("v2")
		eventually(t, "route after restart", func() string { return allBy(h, "v2", 3) })
		// The watches resumed (the changes above flowed): nothing else was
		// lost or duplicated on the way.
		_, reg := get(t, a.http+"/debug/registryz")
		if !bodyHas(reg, "10.244.0.6") || strings.Count(string(reg), `"echo.shop.svc.cluster.local"`) != 1 {
			t.Errorf("registry after the restart lost echo-v2's endpoint or holds echo twice: %s", reg)
		}
		if _, cfg := get(t, a.http+"/debug/configz"); !bodyHas(cfg, `"DestinationRule"`) {
			t.Errorf("configz after the restart lost the DestinationRule: %s", cfg)
		}
	})

	t.Run("TwoReplicas", func(t *testing.T) {
		b := startKubeServe(t, c.Kubeconfig)
		adsB := newSidecarProxy(t, b.grpc)
		eventually(t, "byte-identical config", func() string { return sameXDSResources(ads, adsB) })
		// A's proxy moves to B when A goes away, and converges on B.
		a.stop()
		eventually(t, "stream to A ends", func() string {
			if ads.err() == nil {
				return "stream still open"
			}
			return ""
		})
		m.scale("echo-v1", "10.244.0.5", "10.244.0.10")
		ads.dial(b.grpc)
		eventually(t, "converged on B", func() string {
			if got := ads.endpoints(echoCluster); len(got) != 3 || got[0] != "10.244.0.10" {
				return fmt.Sprintf("%s endpoints = %v", echoCluster, got)
			}
			return sameXDSResources(ads, adsB)
		})
	})

	t.Run("DeletesRemoveConfig", func(t *testing.T) {
		b := startKubeServe(t, c.Kubeconfig) // A is stopped by now
		m.check(c.Istio.NetworkingV1().VirtualServices(kubeNS).Delete(m.ctx(), "echo", metav1.DeleteOptions{}))
		m.check(c.Client.DiscoveryV1().EndpointSlices(kubeNS).Delete(m.ctx(), "echo-v2", metav1.DeleteOptions{}))
		eventually(t, "VirtualService and slice deleted", func() string {
			if _, cfg := get(t, b.http+"/debug/configz"); bodyHas(cfg, `"VirtualService"`) {
				return "configz still has the VirtualService"
			}
			if _, reg := get(t, b.http+"/debug/registryz"); bodyHas(reg, "10.244.0.6") {
				return "registryz still has echo-v2's endpoint"
			}
			return ""
		})
		m.check(c.Client.CoreV1().Services(kubeNS).Delete(m.ctx(), "echo", metav1.DeleteOptions{}))
		eventually(t, "Service deleted", func() string {
			if _, reg := get(t, b.http+"/debug/registryz"); bodyHas(reg, "echo.shop.svc.cluster.local") {
				return "registryz still has the service"
			}
			return ""
		})
	})
}

func TestKubeE2ECRDsInstalledLater(t *testing.T) {
	c := kubetest.Start(t, kubetest.Options{})
	m := newKubeMesh(t, c, false)
	s := startKubeServe(t, c.Kubeconfig) // ready in core-only mode
	h := grpcClient(t, s.grpc)
	eventually(t, "core-only traffic", func() string {
		if got := answeredBy(h); got != "v1" && got != "v2" {
			return got
		}
		return ""
	})
	c.InstallIstioCRDs(t)
	dr := &networkingv1.DestinationRule{ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: kubeNS}}
	dr.Spec.Host = "echo.shop.svc.cluster.local"
	dr.Spec.Subsets = []*networking.Subset{{Name: "v1", Labels: map[string]string{"version": "v1"}},
		{Name: "v2", Labels: map[string]string{"version": "v2"}}}
	_, err := c.Istio.NetworkingV1().DestinationRules(kubeNS).Create(m.ctx(), dr, metav1.CreateOptions{})
	m.check(err)
	m.route("v2")
	eventually(t, "routing by a VirtualService created after its CRD", func() string { return allBy(h, "v2", 5) })
}

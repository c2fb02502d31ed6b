package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/xds"

	"github.com/pilotfish-mesh/pilotfish/engine"
	"github.com/pilotfish-mesh/pilotfish/loadgen"
)

// Failure tests against the real server (runServe): a proxy that NACKs
// everything, a stalled proxy among many, the server killed and restarted
// under a reconnect storm, and a real grpc-go xDS client riding out the
// restart on its last config. Counts and deadlines are bounded; nothing
// asserts a wall-clock time beyond "converges within a generous deadline".

// servicesYAML is n Services (svc-0 ... in namespace shop) with one
// endpoint each.
func servicesYAML(from, n int) string {
	var b strings.Builder
	for i := from; i < from+n; i++ {
		fmt.Fprintf(&b, `apiVersion: v1
kind: Service
metadata: {name: svc-%[1]d, namespace: shop}
spec:
  clusterIP: 10.96.%[2]d.%[3]d
  selector: {app: svc-%[1]d}
  ports: [{name: http, port: 8080}, {name: grpc, port: 9090}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: svc-%[1]d-a, namespace: shop, labels: {kubernetes.io/service-name: svc-%[1]d}}
addressType: IPv4
ports: [{name: http, port: 8080}, {name: grpc, port: 9090}]
endpoints: [{addresses: [10.244.%[2]d.%[3]d], conditions: {ready: true}}]
---
`, i, 1+i/250, 1+i%250)
	}
	return b.String()
}

// resilientServer runs `pilotfish serve` in-process on dir at grpcAddr
// ("127.0.0.1:0" for any port) with the given push throttle and send
// timeout. stop ends it at once (no grace), as a killed process would.
type resilientServer struct {
	addr string
	stop func()
}

func startResilient(t *testing.T, dir, grpcAddr string, throttle int, sendTimeout time.Duration) resilientServer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addrs := make(chan started, 1)
	done := make(chan error, 1)
	o := &serveOptions{configDir: dir, grpcAddr: grpcAddr, httpAddr: "127.0.0.1:0", domain: "cluster.local",
		logLevel: "error", debounceAfter: 10 * time.Millisecond, debounceMax: time.Second, enableEDSDebounce: true,
		pushThrottle: throttle, resync: 200 * time.Millisecond, shutdownGrace: 0,
		limits: limitOptions{sendTimeout: sendTimeout, maxNames: 100000}}
	go func() { done <- runServe(ctx, o, func(s started) { addrs <- s }) }()
	var s started
	select {
	case s = <-addrs:
	case err := <-done:
		t.Fatalf("serve exited: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not start")
	}
	// Ready once the config directory is loaded.
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + s.httpAddr.String() + "/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve not ready: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	var stopped bool
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			<-done
		}
	}
	t.Cleanup(stop)
	return resilientServer{addr: s.grpcAddr.String(), stop: stop}
}

func writeConfig(t *testing.T, dir, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// rawADS is a SotW stream of one simulated sidecar, read by the test.
func rawADS(t *testing.T, addr, nodeID string, opts ...grpc.DialOption) discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesClient {
	t.Helper()
	cc, err := grpc.NewClient(addr, append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	st, err := discoveryv3.NewAggregatedDiscoveryServiceClient(cc).StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func sidecarNode(ip, pod string) *corev3.Node {
	return &corev3.Node{Id: "sidecar~" + ip + "~" + pod + ".shop~shop.svc.cluster.local"}
}

// recvTimeout receives one response or fails after d.
func recvTimeout(t *testing.T, st discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesClient, d time.Duration) *discoveryv3.DiscoveryResponse {
	t.Helper()
	type result struct {
		r   *discoveryv3.DiscoveryResponse
		err error
	}
	ch := make(chan result, 1)
	go func() { r, err := st.Recv(); ch <- result{r, err} }()
	select {
	case res := <-ch:
		if res.err != nil {
			t.Fatalf("recv: %v", res.err)
		}
		return res.r
	case <-time.After(d):
		t.Fatalf("no response within %s", d)
	}
	return nil
}

// TestNACKEverythingOnePushPerChange: a proxy that rejects every CDS
// response gets exactly one response per change of its clusters, and none
// for a change that leaves them as they were (a NACKed version is never
// resent).
func TestNACKEverythingOnePushPerChange(t *testing.T) {
	dir := t.TempDir()
	writeConfig(t, dir, "svc.yaml", servicesYAML(0, 2))
	srv := startResilient(t, dir, "127.0.0.1:0", 100, 0)
	st := rawADS(t, srv.addr, "")
	if err := st.Send(&discoveryv3.DiscoveryRequest{Node: sidecarNode("10.244.9.1", "nacker"), TypeUrl: engine.TypeCluster}); err != nil {
		t.Fatal(err)
	}
	// Every response is NACKed. Responses are numbered by what caused them.
	versions := map[string]bool{}
	nack := func(cause string) *discoveryv3.DiscoveryResponse {
		t.Helper()
		r := recvTimeout(t, st, 60*time.Second)
		if versions[r.VersionInfo] {
			t.Fatalf("%s: version %s sent again", cause, r.VersionInfo)
		}
		versions[r.VersionInfo] = true
		if err := st.Send(&discoveryv3.DiscoveryRequest{TypeUrl: r.TypeUrl, VersionInfo: "", ResponseNonce: r.Nonce,
			ErrorDetail: &rpcstatus.Status{Code: 3, Message: "rejected by test"}}); err != nil {
			t.Fatal(err)
		}
		return r
	}
	clusters := func(r *discoveryv3.DiscoveryResponse) int { return len(r.Resources) }

	first := nack("initial request")
	for i := 1; i <= 3; i++ {
		writeConfig(t, dir, fmt.Sprintf("more-%d.yaml", i), servicesYAML(10*i, 1))
		if r := nack(fmt.Sprintf("change %d", i)); clusters(r) <= clusters(first) {
			t.Fatalf("change %d: %d clusters, want more than %d", i, clusters(r), clusters(first))
		}
	}
	// A config change that leaves the clusters as they are (a
	// VirtualService: a full push, CDS regenerated with the digest the
	// proxy rejected) must not resend the rejected CDS; the marker change
	// after it must be the very next response.
	writeConfig(t, dir, "vs.yaml", `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: svc-0, namespace: shop}
spec:
  hosts: [svc-0.shop.svc.cluster.local]
  http: [{timeout: 3s, route: [{destination: {host: svc-0.shop.svc.cluster.local}}]}]
`)
	time.Sleep(500 * time.Millisecond) // let the full push happen (it must send no CDS)
	writeConfig(t, dir, "marker.yaml", servicesYAML(99, 1))
	marker := nack("marker")
	found := false
	for _, res := range marker.Resources {
		found = found || strings.Contains(string(res.Value), "svc-99.shop")
	}
	if !found {
		t.Fatal("the response after the endpoint change is not the marker change: a rejected version was resent")
	}
	if len(versions) != 5 {
		t.Fatalf("%d distinct responses, want 5 (initial, three changes, marker)", len(versions))
	}
}

// TestStalledProxyAmongMany: with a push throttle of one, a proxy that
// stops reading (its writes blocked by flow control) is signalled in every
// push round; if it held its throttle slot while blocked, no other proxy
// would get a push again. Every other proxy must converge on two changes.
func TestStalledProxyAmongMany(t *testing.T) {
	proxies := envInt("PILOTFISH_TEST_STALL_PROXIES", 1000)
	dir := t.TempDir()
	// 150 services with two ports: a sidecar's CDS response is far beyond
	// the 64 KiB flow-control window, so the stalled proxy's writes block
	// by the second change.
	writeConfig(t, dir, "svc.yaml", servicesYAML(0, 150))
	srv := startResilient(t, dir, "127.0.0.1:0", 1, 0)

	// The stalled proxy: fixed 64 KiB windows, CDS and LDS read once, then
	// nothing is read any more.
	stalled := rawADS(t, srv.addr, "", grpc.WithInitialWindowSize(1<<16), grpc.WithInitialConnWindowSize(1<<16))
	if err := stalled.Send(&discoveryv3.DiscoveryRequest{Node: sidecarNode("10.244.9.2", "stalled"), TypeUrl: engine.TypeCluster}); err != nil {
		t.Fatal(err)
	}
	if err := stalled.Send(&discoveryv3.DiscoveryRequest{TypeUrl: engine.TypeListener}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		r := recvTimeout(t, stalled, 60*time.Second)
		if r.TypeUrl == engine.TypeCluster && len(r.Resources) < 300 {
			t.Fatalf("stalled proxy's %s: %d resources", r.TypeUrl, len(r.Resources))
		}
	}

	change := 0
	cfg := loadgen.Config{
		XDS: srv.addr, Proxies: proxies, StreamsPerConn: 50, Namespaces: 1, NamespacePrefix: "shop",
		Timeout: 10 * time.Minute, Changes: 2, ChangeInterval: 200 * time.Millisecond, ChangeTimeout: 5 * time.Minute,
		// Change i adds service svc-100i.
		ChangeFunc: func(context.Context) error {
			change++
			writeConfig(t, dir, fmt.Sprintf("change-%d.yaml", change), servicesYAML(1000+change, 1))
			return nil
		},
		ExpectResource: "cds/outbound|8080||svc-100{i}.shop.svc.cluster.local",
	}
	rep, err := loadgen.Run(context.Background(), cfg)
	if err != nil {
		t.Fatalf("loadgen: %v", err)
	}
	if rep.FullConfig != proxies {
		t.Fatalf("%d/%d proxies reached full config", rep.FullConfig, proxies)
	}
	for i, c := range rep.Changes {
		if c.Converged != proxies {
			t.Fatalf("change %d converged on %d/%d proxies beside the stalled one", i+1, c.Converged, proxies)
		}
		t.Logf("change %d: converged on %d proxies, p99 %.0f ms", i+1, c.Converged, c.Convergence.P99MS)
	}
	// The stalled proxy was pushed to as well: reading again, it gets both
	// changes.
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		r := recvTimeout(t, stalled, time.Minute)
		if r.TypeUrl != engine.TypeCluster {
			continue
		}
		for _, res := range r.Resources {
			if strings.Contains(string(res.Value), "svc-1002.shop") {
				return
			}
		}
	}
	t.Fatal("the stalled proxy never received the second change once reading again")
}

// TestRestartUnderReconnectStorm kills the server while proxies are
// connected and starts it again on the same address with changed config:
// every proxy reconnects at once (loadgen reconnects as Envoy does) and
// converges on the new config. The heap after convergence is logged (the
// process also holds loadgen's proxies; `make soak` measures the server
// alone).
func TestRestartUnderReconnectStorm(t *testing.T) {
	proxies := envInt("PILOTFISH_TEST_STORM_PROXIES", 1000)
	dir := t.TempDir()
	writeConfig(t, dir, "svc.yaml", servicesYAML(0, 20))
	srv := startResilient(t, dir, "127.0.0.1:0", 100, 30*time.Second)
	addr := srv.addr
	cfg := loadgen.Config{
		XDS: addr, Proxies: proxies, StreamsPerConn: 1, Namespaces: 1, NamespacePrefix: "shop",
		Timeout: 10 * time.Minute, Changes: 1, ChangeInterval: 200 * time.Millisecond, ChangeTimeout: 5 * time.Minute,
		ChangeFunc: func(context.Context) error {
			srv.stop()
			writeConfig(t, dir, "new.yaml", servicesYAML(500, 1))
			srv = startResilient(t, dir, addr, 100, 30*time.Second)
			return nil
		},
		ExpectResource: "cds/outbound|8080||svc-500.shop.svc.cluster.local",
	}
	rep, err := loadgen.Run(context.Background(), cfg)
	if err != nil {
		t.Fatalf("loadgen: %v", err)
	}
	if rep.FullConfig != proxies || len(rep.Changes) != 1 || rep.Changes[0].Converged != proxies {
		t.Fatalf("full config %d/%d, changes %+v", rep.FullConfig, proxies, rep.Changes)
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	t.Logf("%d proxies reconnected and converged after the restart: p99 %.0f ms; heap in use %d MiB (server and loadgen)",
		proxies, rep.Changes[0].Convergence.P99MS, ms.HeapInuse>>20)
}

// TestGRPCClientRidesOutRestart: a real grpc-go xDS client keeps calling
// its service on its last config while the control plane is down, and
// follows a change made while it was down once the server is back.
func TestGRPCClientRidesOutRestart(t *testing.T) {
	v1, _ := startBackend(t, healthpb.HealthCheckResponse_SERVING)
	v2, _ := startBackend(t, healthpb.HealthCheckResponse_NOT_SERVING)
	dir := t.TempDir()
	writeConfig(t, dir, "mesh.yaml", fmt.Sprintf(e2eMesh, v1, v2))
	writeConfig(t, dir, "routing.yaml", fmt.Sprintf(e2eRouting, 100, 0))
	srv := startResilient(t, dir, "127.0.0.1:0", 100, 30*time.Second)

	bootstrap := fmt.Sprintf(`{
		"xds_servers": [{"server_uri": %q, "channel_creds": [{"type": "insecure"}], "server_features": ["xds_v3"]}],
		"node": {"id": "sidecar~10.244.9.9~client-0.shop~shop.svc.cluster.local",
		         "metadata": {"GENERATOR": "grpc", "NAMESPACE": "shop", "ISTIO_VERSION": "1.31.0"}}
	}`, srv.addr)
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
	e := &e2e{t: t, client: healthpb.NewHealthClient(cc)}
	if who, err := e.call(false); err != nil || who != "v1" {
		t.Fatalf("before the restart: %s, %v", who, err)
	}

	srv.stop()
	// Down: every call still goes to v1 on the last config.
	for i := range 20 {
		if who, err := e.call(false); err != nil || who != "v1" {
			t.Fatalf("call %d with the control plane down: %s, %v", i, who, err)
		}
	}
	writeConfig(t, dir, "routing.yaml", fmt.Sprintf(e2eRouting, 0, 100))
	srv = startResilient(t, dir, srv.addr, 100, 30*time.Second)
	e.waitFor("v2 after the restart", func() bool { who, err := e.call(false); return err == nil && who == "v2" })
}

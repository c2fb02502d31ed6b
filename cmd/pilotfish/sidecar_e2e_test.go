package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/xds"
	"google.golang.org/protobuf/types/known/structpb"
)

// One gRPC service in shop; namespace web's Sidecar imports only web.
const sidecarE2EMesh = `apiVersion: v1
kind: Service
metadata: {name: echo, namespace: shop}
spec:
  clusterIP: 10.96.0.20
  selector: {app: echo}
  ports: [{name: grpc, port: 9080}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: echo-1, namespace: shop, labels: {kubernetes.io/service-name: echo}}
addressType: IPv4
ports: [{name: grpc, port: %d}]
endpoints: [{addresses: [10.244.0.5], conditions: {ready: true}}]
`

const sidecarE2EScope = `apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: default, namespace: web}
spec:
  egress:
  - hosts: ["./*"]
`

// sidecarE2EClient dials echo through pilotfish's xDS as a proxyless gRPC
// client in namespace ns.
func sidecarE2EClient(t *testing.T, xdsAddr, ns string) healthpb.HealthClient {
	t.Helper()
	bootstrap := fmt.Sprintf(`{
		"xds_servers": [{"server_uri": %q, "channel_creds": [{"type": "insecure"}], "server_features": ["xds_v3"]}],
		"node": {"id": "sidecar~10.244.9.9~client-0.%s~%s.svc.cluster.local",
		         "metadata": {"GENERATOR": "grpc", "NAMESPACE": %q, "ISTIO_VERSION": "1.31.0"}}
	}`, xdsAddr, ns, ns, ns)
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

func sidecarE2ECall(c healthpb.HealthClient, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	_, err := c.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true))
	return err
}

// TestE2ESidecarScopeHidesService: with real gRPC xDS clients, a Sidecar in
// namespace web that imports only web makes echo.shop unroutable for the
// client in web, while the client in other (no Sidecar) calls it; removing
// the Sidecar makes it routable for the web client too.
func TestE2ESidecarScopeHidesService(t *testing.T) {
	port, backend := startBackend(t, healthpb.HealthCheckResponse_SERVING)
	dir := t.TempDir()
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("mesh.yaml", fmt.Sprintf(sidecarE2EMesh, port))
	write("sidecar.yaml", sidecarE2EScope)

	xdsAddr := startE2EServer(t, dir)
	web := sidecarE2EClient(t, xdsAddr, "web")
	other := sidecarE2EClient(t, xdsAddr, "other")
	if err := sidecarE2ECall(other, 10*time.Second); err != nil {
		t.Fatalf("client in other (no Sidecar): %v", err)
	}
	before := backend.calls.Load()
	if err := sidecarE2ECall(web, 2*time.Second); err == nil {
		t.Fatal("client in web reached echo.shop, which its Sidecar hides")
	}
	if got := backend.calls.Load(); got != before {
		t.Fatalf("backend saw %d calls from the hidden client", got-before)
	}

	// Without the Sidecar the same client converges to a working route.
	if err := os.Remove(filepath.Join(dir, "sidecar.yaml")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := sidecarE2ECall(web, 2*time.Second)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("client in web after the Sidecar was removed: %v", err)
		}
	}
}

// startE2EServer runs pilotfish serve on the config directory dir and
// returns its xDS address; the server stops with the test.
func startE2EServer(t *testing.T, dir string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addrs := make(chan started, 1)
	done := make(chan error, 1)
	o := &serveOptions{configDir: dir, grpcAddr: "127.0.0.1:0", httpAddr: "127.0.0.1:0", domain: "cluster.local",
		logLevel: "error", debounceAfter: 10 * time.Millisecond, debounceMax: time.Second, enableEDSDebounce: true,
		pushThrottle: 100, resync: time.Second, shutdownGrace: time.Second}
	go func() { done <- runServe(ctx, o, func(s started) { addrs <- s }) }()
	select {
	case s := <-addrs:
		t.Cleanup(func() { cancel(); <-done })
		waitReady(t, "http://"+s.httpAddr.String()) // xDS streams are refused before
		return s.grpcAddr.String()
	case err := <-done:
		cancel()
		t.Fatalf("serve exited: %v", err)
	}
	return ""
}

// TestE2ENameTableOnADS: a sidecar whose istio-agent captures DNS asks for
// the NameTable on its ADS stream and gets one table listing what its
// Sidecar imports (the web proxy: nothing of shop; a proxy elsewhere: echo
// with its cluster IP).
func TestE2ENameTableOnADS(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{"mesh.yaml": fmt.Sprintf(sidecarE2EMesh, 9), "sidecar.yaml": sidecarE2EScope} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	xdsAddr := startE2EServer(t, dir)
	cc, err := grpc.NewClient(xdsAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	for _, tc := range []struct {
		ns       string
		wantEcho bool
	}{{"web", false}, {"other", true}} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		stream, err := discoveryv3.NewAggregatedDiscoveryServiceClient(cc).StreamAggregatedResources(ctx)
		if err != nil {
			t.Fatal(err)
		}
		md, _ := structpb.NewStruct(map[string]any{"NAMESPACE": tc.ns, "DNS_CAPTURE": "true", "ISTIO_VERSION": "1.31.0"})
		node := &corev3.Node{Id: "sidecar~10.244.1.1~p-0." + tc.ns + "~" + tc.ns + ".svc.cluster.local", Metadata: md}
		if err := stream.Send(&discoveryv3.DiscoveryRequest{Node: node, TypeUrl: ndsType}); err != nil {
			t.Fatal(err)
		}
		resp, err := stream.Recv()
		if err != nil {
			t.Fatalf("%s: %v", tc.ns, err)
		}
		if resp.TypeUrl != ndsType || len(resp.Resources) != 1 || resp.Resources[0].TypeUrl != ndsType {
			t.Fatalf("%s: response %s with %d resources", tc.ns, resp.TypeUrl, len(resp.Resources))
		}
		// The table is a map from hostname to NameInfo (nds.proto); the
		// hostname and the VIP appear verbatim in its encoding.
		body := string(resp.Resources[0].Value)
		hasEcho := strings.Contains(body, "echo.shop.svc.cluster.local") && strings.Contains(body, "10.96.0.20")
		if hasEcho != tc.wantEcho {
			t.Errorf("proxy in %s: table lists echo.shop = %v, want %v", tc.ns, hasEcho, tc.wantEcho)
		}
		cancel()
	}
}

const ndsType = "type.googleapis.com/istio.networking.nds.v1.NameTable"

package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/xds"
)

// countingProxy forwards TCP connections to target and counts them: how
// many times a client (re)connected.
type countingProxy struct {
	lis   net.Listener
	conns atomic.Int32
	wg    sync.WaitGroup
}

func newCountingProxy(t *testing.T, target string) *countingProxy {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &countingProxy{lis: lis}
	var mu sync.Mutex
	var open []net.Conn
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			p.conns.Add(1)
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			open = append(open, c, up)
			mu.Unlock()
			p.wg.Add(2)
			go func() { defer p.wg.Done(); _, _ = io.Copy(up, c); up.Close() }()
			go func() { defer p.wg.Done(); _, _ = io.Copy(c, up); c.Close() }()
		}
	}()
	t.Cleanup(func() {
		lis.Close()
		mu.Lock()
		for _, c := range open {
			c.Close()
		}
		mu.Unlock()
		p.wg.Wait()
	})
	return p
}

// TestMaxConnectionAge checks --max-connection-age: an xDS stream on a
// connection older than the age ends with the server's GOAWAY (gRPC's
// "max_age"), and a real gRPC xDS client reconnects each time and keeps
// converging on config changes.
func TestMaxConnectionAge(t *testing.T) {
	v1, _ := startBackend(t, healthpb.HealthCheckResponse_SERVING)
	v2, _ := startBackend(t, healthpb.HealthCheckResponse_NOT_SERVING)
	dir := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("mesh.yaml", fmt.Sprintf(e2eMesh, v1, v2))
	write("routing.yaml", fmt.Sprintf(e2eRouting, 100, 0))

	ctx, cancel := context.WithCancel(context.Background())
	addrs := make(chan started, 1)
	done := make(chan error, 1)
	o := &serveOptions{configDir: dir, grpcAddr: "127.0.0.1:0", httpAddr: "127.0.0.1:0", domain: "cluster.local",
		logLevel: "error", debounceAfter: 10 * time.Millisecond, debounceMax: time.Second, enableEDSDebounce: true,
		pushThrottle: 100, resync: time.Second, shutdownGrace: time.Second,
		limits: limitOptions{maxConnAge: time.Second, maxConnAgeGrace: 200 * time.Millisecond}}
	go func() { done <- runServe(ctx, o, func(s started) { addrs <- s }) }()
	var xdsAddr, httpAddr string
	select {
	case s := <-addrs:
		xdsAddr, httpAddr = s.grpcAddr.String(), s.httpAddr.String()
	case err := <-done:
		t.Fatalf("serve exited: %v", err)
	}
	t.Cleanup(func() { cancel(); <-done })
	waitReady(t, "http://"+httpAddr) // xDS streams are refused before

	// A plain ADS stream: answered, then ended by the age's GOAWAY.
	cc, err := grpc.NewClient(xdsAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer scancel()
	stream, err := discoveryv3.NewAggregatedDiscoveryServiceClient(cc).StreamAggregatedResources(sctx)
	if err != nil {
		t.Fatal(err)
	}
	node := &corev3.Node{Id: "sidecar~10.244.9.9~client-0.shop~shop.svc.cluster.local"}
	if err := stream.Send(&discoveryv3.DiscoveryRequest{Node: node, TypeUrl: "type.googleapis.com/envoy.config.cluster.v3.Cluster"}); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatalf("first response: %v", err)
	}
	for {
		_, err = stream.Recv() // pushes may arrive; the stream must end
		if err != nil {
			break
		}
	}
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "max_age") {
		t.Fatalf("stream ended with %v, want Unavailable after a max_age GOAWAY", err)
	}

	// A real gRPC xDS client, through a proxy counting its connections.
	proxy := newCountingProxy(t, xdsAddr)
	bootstrap := fmt.Sprintf(`{
		"xds_servers": [{"server_uri": %q, "channel_creds": [{"type": "insecure"}], "server_features": ["xds_v3"]}],
		"node": {"id": "sidecar~10.244.9.9~client-0.shop~shop.svc.cluster.local",
		         "metadata": {"GENERATOR": "grpc", "NAMESPACE": "shop", "ISTIO_VERSION": "1.31.0"}}
	}`, proxy.lis.Addr().String())
	resolver, err := xds.NewXDSResolverWithConfigForTesting([]byte(bootstrap))
	if err != nil {
		t.Fatal(err)
	}
	app, err := grpc.NewClient("xds:///echo.shop.svc.cluster.local:9080",
		grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithResolvers(resolver),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			_, port, _ := net.SplitHostPort(addr)
			return (&net.Dialer{}).DialContext(ctx, "tcp", "127.0.0.1:"+port)
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	client := healthpb.NewHealthClient(app)
	call := func() (healthpb.HealthCheckResponse_ServingStatus, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := client.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true))
		if err != nil {
			return 0, err
		}
		return resp.Status, nil
	}
	if st, err := call(); err != nil || st != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("first call: %v %v, want v1", st, err)
	}
	eventuallyFor(t, 60*time.Second, "xDS client reconnects", func() string {
		if n := proxy.conns.Load(); n < 3 {
			return fmt.Sprintf("%d connections to the xDS server", n)
		}
		return ""
	})
	// After reconnecting, the client still follows config: all to v2.
	write("routing.yaml", fmt.Sprintf(e2eRouting, 0, 100))
	eventuallyFor(t, 60*time.Second, "route to v2 after reconnects", func() string {
		st, err := call()
		if err != nil {
			return err.Error()
		}
		if st != healthpb.HealthCheckResponse_NOT_SERVING {
			return "still routed to v1"
		}
		return ""
	})
	before := proxy.conns.Load()
	eventuallyFor(t, 60*time.Second, "xDS client keeps reconnecting", func() string {
		if n := proxy.conns.Load(); n <= before {
			return fmt.Sprintf("%d connections", n)
		}
		return ""
	})
	if st, err := call(); err != nil || st != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("after another reconnect: %v %v, want v2", st, err)
	}
}

package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/xds"
)

// A mesh of one gRPC service, echo.shop, with two versions. Each version's
// backend is a real gRPC health server on 127.0.0.1 whose overall status
// tells the versions apart (v1 SERVING, v2 NOT_SERVING). Endpoint addresses
// are stand-in pod IPs; the client's dialer maps them to 127.0.0.1.
const e2eMesh = `apiVersion: v1
kind: Service
metadata: {name: echo, namespace: shop}
spec:
  clusterIP: 10.96.0.20
  selector: {app: echo}
  ports: [{name: grpc, port: 9080}]
---
apiVersion: v1
kind: Pod
metadata: {name: echo-v1-0, namespace: shop, labels: {app: echo, version: v1}}
spec: {containers: [{name: echo, image: echo}]}
status: {podIP: 10.244.0.5}
---
apiVersion: v1
kind: Pod
metadata: {name: echo-v2-0, namespace: shop, labels: {app: echo, version: v2}}
spec: {containers: [{name: echo, image: echo}]}
status: {podIP: 10.244.0.6}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: echo-v1, namespace: shop, labels: {kubernetes.io/service-name: echo}}
addressType: IPv4
ports: [{name: grpc, port: %d}]
endpoints: [{addresses: [10.244.0.5], conditions: {ready: true}}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: echo-v2, namespace: shop, labels: {kubernetes.io/service-name: echo}}
addressType: IPv4
ports: [{name: grpc, port: %d}]
endpoints: [{addresses: [10.244.0.6], conditions: {ready: true}}]
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: echo, namespace: shop}
spec:
  host: echo.shop.svc.cluster.local
  subsets:
  - {name: v1, labels: {version: v1}}
  - {name: v2, labels: {version: v2}}
`

const e2eRouting = `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: echo, namespace: shop}
spec:
  hosts: [echo.shop.svc.cluster.local]
  http:
  - match: [{headers: {x-canary: {exact: "yes"}}}]
    route: [{destination: {host: echo.shop.svc.cluster.local, subset: v2}}]
  - route:
    - {destination: {host: echo.shop.svc.cluster.local, subset: v1}, weight: %d}
    - {destination: {host: echo.shop.svc.cluster.local, subset: v2}, weight: %d}
`

type e2e struct {
	t      *testing.T
	v1, v2 *echoBackend
	dir    string
	xds    string
	client healthpb.HealthClient
}

// echoBackend is a gRPC health server that answers SERVING as v1 and
// NOT_SERVING as v2, can fail its next calls with UNAVAILABLE, and sleeps
// for the duration in the x-sleep request header.
type echoBackend struct {
	healthpb.UnimplementedHealthServer
	status   healthpb.HealthCheckResponse_ServingStatus
	failNext atomic.Int32
	calls    atomic.Int32
}

func (b *echoBackend) Check(ctx context.Context, _ *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	b.calls.Add(1)
	if md, ok := metadata.FromIncomingContext(ctx); ok && len(md.Get("x-sleep")) > 0 {
		if d, err := time.ParseDuration(md.Get("x-sleep")[0]); err == nil {
			select {
			case <-time.After(d):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
	}
	if b.failNext.Add(-1) >= 0 {
		return nil, status.Error(codes.Unavailable, "injected failure")
	}
	return &healthpb.HealthCheckResponse{Status: b.status}, nil
}

func startBackend(t *testing.T, st healthpb.HealthCheckResponse_ServingStatus) (int, *echoBackend) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &echoBackend{status: st}
	gs := grpc.NewServer()
	healthpb.RegisterHealthServer(gs, b)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	return lis.Addr().(*net.TCPAddr).Port, b
}

func newE2E(t *testing.T) *e2e {
	v1, b1 := startBackend(t, healthpb.HealthCheckResponse_SERVING)
	v2, b2 := startBackend(t, healthpb.HealthCheckResponse_NOT_SERVING)
	e := &e2e{t: t, dir: t.TempDir(), v1: b1, v2: b2}
	e.write("mesh.yaml", fmt.Sprintf(e2eMesh, v1, v2))
	e.write("routing.yaml", fmt.Sprintf(e2eRouting, 80, 20))

	ctx, cancel := context.WithCancel(context.Background())
	addrs := make(chan started, 1)
	done := make(chan error, 1)
	o := &serveOptions{configDir: e.dir, grpcAddr: "127.0.0.1:0", httpAddr: "127.0.0.1:0", domain: "cluster.local",
		logLevel: "error", debounceAfter: 10 * time.Millisecond, debounceMax: time.Second, enableEDSDebounce: true,
		pushThrottle: 100, resync: time.Second, shutdownGrace: time.Second}
	go func() { done <- runServe(ctx, o, func(s started) { addrs <- s }) }()
	var httpAddr string
	select {
	case s := <-addrs:
		e.xds, httpAddr = s.grpcAddr.String(), s.httpAddr.String()
	case err := <-done:
		t.Fatalf("serve exited: %v", err)
	}
	t.Cleanup(func() { cancel(); <-done })
	waitReady(t, "http://"+httpAddr) // xDS streams are refused before

	bootstrap := fmt.Sprintf(`{
		"xds_servers": [{"server_uri": %q, "channel_creds": [{"type": "insecure"}], "server_features": ["xds_v3"]}],
		"node": {"id": "sidecar~10.244.9.9~client-0.shop~shop.svc.cluster.local",
		         "metadata": {"GENERATOR": "grpc", "NAMESPACE": "shop", "ISTIO_VERSION": "1.31.0"}}
	}`, e.xds)
	resolver, err := xds.NewXDSResolverWithConfigForTesting([]byte(bootstrap))
	if err != nil {
		t.Fatal(err)
	}
	cc, err := grpc.NewClient("xds:///echo.shop.svc.cluster.local:9080",
		grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithResolvers(resolver),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			// Stand-in pod IPs 10.244.x.y:port are served on 127.0.0.1:port.
			_, port, _ := net.SplitHostPort(addr)
			return (&net.Dialer{}).DialContext(ctx, "tcp", "127.0.0.1:"+port)
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	e.client = healthpb.NewHealthClient(cc)
	return e
}

func (e *e2e) write(name, content string) {
	e.t.Helper()
	if err := os.WriteFile(filepath.Join(e.dir, name), []byte(content), 0o644); err != nil {
		e.t.Fatal(err)
	}
}

// call makes one RPC and returns which version answered.
func (e *e2e) call(canary bool, kv ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if canary {
		ctx = metadata.AppendToOutgoingContext(ctx, "x-canary", "yes")
	}
	if len(kv) > 0 {
		ctx = metadata.AppendToOutgoingContext(ctx, kv...)
	}
	resp, err := e.client.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true))
	if err != nil {
		return "", err
	}
	if resp.Status == healthpb.HealthCheckResponse_SERVING {
		return "v1", nil
	}
	return "v2", nil
}

// split makes n calls and returns the count answered by v1.
func (e *e2e) split(n int) int {
	e.t.Helper()
	v1, err := e.trySplit(n)
	if err != nil {
		e.t.Fatal(err)
	}
	return v1
}

// trySplit is split returning the first failed call's error. While a route
// moves to a cluster the client has not used yet, grpc-go may fail an RPC
// with "unknown cluster selected" until its cluster manager has the new
// cluster: convergence checks retry instead of failing on it.
func (e *e2e) trySplit(n int) (int, error) {
	v1 := 0
	for i := 0; i < n; i++ {
		who, err := e.call(false)
		if err != nil {
			return v1, fmt.Errorf("call %d: %w", i, err)
		}
		if who == "v1" {
			v1++
		}
	}
	return v1, nil
}

// converged is a waitFor check on trySplit: a failed call means not yet.
func (e *e2e) converged(n int, ok func(v1 int) bool) func() bool {
	return func() bool {
		v1, err := e.trySplit(n)
		if err != nil {
			e.t.Logf("not converged yet: %v", err)
			return false
		}
		return ok(v1)
	}
}

// waitFor retries until the traffic check passes.
func (e *e2e) waitFor(what string, ok func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestE2EProxylessGRPCRouting(t *testing.T) {
	e := newE2E(t)
	if _, err := e.call(false); err != nil {
		t.Fatalf("first RPC through pilotfish xDS: %v", err)
	}

	t.Run("weighted split 80/20", func(t *testing.T) {
		const n = 400
		v1 := e.split(n)
		// Binomial(400, 0.8): mean 320, sd 8; 6 sd either side.
		if v1 < 272 || v1 > 368 {
			t.Fatalf("v1 got %d of %d calls, want about 80%%", v1, n)
		}
	})

	t.Run("header match", func(t *testing.T) {
		for i := 0; i < 20; i++ {
			if who, err := e.call(true); err != nil || who != "v2" {
				t.Fatalf("canary call %d answered by %q (%v), want v2", i, who, err)
			}
		}
	})

	t.Run("edit converges without reconnect", func(t *testing.T) {
		e.write("routing.yaml", fmt.Sprintf(e2eRouting, 0, 100))
		e.waitFor("all traffic on v2", e.converged(20, func(v1 int) bool { return v1 == 0 }))
	})

	t.Run("bad YAML keeps the last good config", func(t *testing.T) {
		e.write("routing.yaml", strings.Replace(fmt.Sprintf(e2eRouting, 0, 100), "weight: 100", "weight: 120", 1))
		time.Sleep(300 * time.Millisecond) // longer than debounce: a push, if any, would have landed
		if v1 := e.split(40); v1 != 0 {
			t.Fatalf("after an invalid edit %d of 40 calls went to v1; the last good config sends all to v2", v1)
		}
	})

	t.Run("deleted VirtualService falls back to default routing", func(t *testing.T) {
		if err := os.Remove(filepath.Join(e.dir, "routing.yaml")); err != nil {
			t.Fatal(err)
		}
		// Default routing spreads over both versions.
		e.waitFor("traffic on both versions", e.converged(40, func(v1 int) bool { return v1 > 0 && v1 < 40 }))
	})
}

// policyRouting is a VirtualService exercising faults, retries and timeouts
// on separate match rules, all on v1.
const policyRouting = `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: echo, namespace: shop}
spec:
  hosts: [echo.shop.svc.cluster.local]
  http:
  - match: [{headers: {x-case: {exact: abort}}}]
    fault: {abort: {grpcStatus: PERMISSION_DENIED, percentage: {value: 100}}}
    route: [{destination: {host: echo.shop.svc.cluster.local, subset: v1}}]
  - match: [{headers: {x-case: {exact: delay}}}]
    fault: {delay: {fixedDelay: 300ms, percentage: {value: 100}}}
    route: [{destination: {host: echo.shop.svc.cluster.local, subset: v1}}]
  - match: [{headers: {x-case: {exact: timeout}}}]
    timeout: 100ms
    route: [{destination: {host: echo.shop.svc.cluster.local, subset: v1}}]
  - match: [{headers: {x-case: {exact: retry}}}]
    retries: {attempts: 3, retryOn: unavailable}
    route: [{destination: {host: echo.shop.svc.cluster.local, subset: v1}}]
  - match: [{headers: {x-case: {exact: noretry}}}]
    retries: {attempts: 0}
    route: [{destination: {host: echo.shop.svc.cluster.local, subset: v1}}]
  - route: [{destination: {host: echo.shop.svc.cluster.local, subset: v1}}]
`

func TestE2EProxylessGRPCPolicies(t *testing.T) {
	e := newE2E(t)
	e.write("routing.yaml", policyRouting)
	// Wait until the new routing applies (the default rule sends all to v1).
	e.waitFor("policy routing", func() bool {
		_, err := e.call(false, "x-case", "abort")
		return status.Code(err) == codes.PermissionDenied
	})

	t.Run("fault abort", func(t *testing.T) {
		before := e.v1.calls.Load()
		for i := 0; i < 10; i++ {
			if _, err := e.call(false, "x-case", "abort"); status.Code(err) != codes.PermissionDenied {
				t.Fatalf("call %d: %v, want PermissionDenied from the fault filter", i, err)
			}
		}
		if got := e.v1.calls.Load() - before; got != 0 {
			t.Fatalf("aborted calls reached the backend %d times", got)
		}
	})

	t.Run("fault delay", func(t *testing.T) {
		start := time.Now()
		if _, err := e.call(false, "x-case", "delay"); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d < 300*time.Millisecond {
			t.Fatalf("delayed call took %v, want ≥ 300ms", d)
		}
	})

	t.Run("timeout", func(t *testing.T) {
		_, err := e.call(false, "x-case", "timeout", "x-sleep", "2s")
		if status.Code(err) != codes.DeadlineExceeded {
			t.Fatalf("slow call: %v, want DeadlineExceeded after the route's 100ms timeout", err)
		}
	})

	t.Run("retries", func(t *testing.T) {
		e.v1.failNext.Store(2)
		before := e.v1.calls.Load()
		if who, err := e.call(false, "x-case", "retry"); err != nil || who != "v1" {
			t.Fatalf("retried call: %q, %v; want success after 2 retries", who, err)
		}
		if got := e.v1.calls.Load() - before; got != 3 {
			t.Fatalf("backend saw %d attempts, want 3 (2 failures + 1 success)", got)
		}
		// With retries off (attempts: 0) the same failure reaches the client.
		// (Routes without a retry policy get istiod's default, which retries
		// UNAVAILABLE once.)
		e.v1.failNext.Store(1)
		if _, err := e.call(false, "x-case", "noretry"); status.Code(err) != codes.Unavailable {
			t.Fatalf("call without retries: %v, want Unavailable", err)
		}
		e.v1.failNext.Store(0)
	})
}

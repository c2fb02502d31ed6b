package serve_test

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/xds"

	"github.com/pilotfish-mesh/pilotfish/engine"
	"github.com/pilotfish-mesh/pilotfish/serve"
)

// healthServer starts a plain gRPC server with the health service, where
// service "which" reports st (or is unknown when st is UNKNOWN).
func healthServer(t *testing.T, st healthpb.HealthCheckResponse_ServingStatus) uint32 {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := health.NewServer()
	if st != healthpb.HealthCheckResponse_UNKNOWN {
		hs.SetServingStatus("which", st)
	}
	gs := grpc.NewServer()
	healthpb.RegisterHealthServer(gs, hs)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	return uint32(lis.Addr().(*net.TCPAddr).Port)
}

// TestGRPCXDSClient resolves xds:///svc.test:80 with grpc-go's own xDS client
// against the server and makes RPCs: proof that the assembled wire bytes are
// what a real client accepts (it NACKs anything malformed). It then moves the
// service's endpoint with an EDS-only push and waits for traffic to follow.
func TestGRPCXDSClient(t *testing.T) {
	first := healthServer(t, healthpb.HealthCheckResponse_UNKNOWN)
	second := healthServer(t, healthpb.HealthCheckResponse_SERVING)

	const clusterName = "outbound|80||svc.test"
	b := newTestBackend()
	b.set(t,
		apiListener(t, "svc.test:80", "route-svc"),
		routeConfig("route-svc", "svc.test:80", clusterName),
		cluster(clusterName, 0),
		cla(clusterName, "127.0.0.1", first),
	)
	xdsConn := startServer(t, b, serve.XDSOptions{})
	const nodeID = "sidecar~127.0.0.1~client.default~default.svc.cluster.local"
	bootstrap := fmt.Sprintf(`{
		"xds_servers": [{"server_uri": %q, "channel_creds": [{"type": "insecure"}], "server_features": ["xds_v3"]}],
		"node": {"id": %q}
	}`, xdsConn.Target(), nodeID)
	resolver, err := xds.NewXDSResolverWithConfigForTesting([]byte(bootstrap))
	if err != nil {
		t.Fatal(err)
	}
	cc, err := grpc.NewClient("xds:///svc.test:80",
		grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithResolvers(resolver))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	client := healthpb.NewHealthClient(cc)

	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	resp, err := client.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true))
	if err != nil {
		t.Fatalf("RPC through xDS: %v", err)
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("status %v", resp.GetStatus())
	}
	if _, err := client.Check(ctx, &healthpb.HealthCheckRequest{Service: "which"}); status.Code(err) != codes.NotFound {
		t.Fatalf("first endpoint: got %v, want NotFound", err)
	}
	s := b.session(t, nodeID)
	waitFor(t, "ACKs of LDS, RDS, CDS and EDS", func() bool { a, _ := s.counts(); return a >= 4 })
	if _, n := s.counts(); n != 0 {
		s.mu.Lock()
		t.Fatalf("grpc-go rejected config: %q", s.nacks)
	}

	// The endpoint fast path: only EDS, only this cluster.
	b.set(t, cla(clusterName, "127.0.0.1", second))
	b.push(engine.Push{Types: []string{engine.TypeEndpoint}, Endpoints: []string{clusterName}, Reason: "endpoint"})
	waitFor(t, "traffic on the new endpoint", func() bool {
		resp, err := client.Check(ctx, &healthpb.HealthCheckRequest{Service: "which"})
		return err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING
	})
	if _, n := s.counts(); n != 0 {
		t.Fatal("grpc-go rejected the endpoint update")
	}
}

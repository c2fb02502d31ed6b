package engine_test

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/xds"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/engine"
	"github.com/pilotfish-mesh/pilotfish/index"
	"github.com/pilotfish-mesh/pilotfish/serve"
)

type e2eBackend struct{ e *engine.Engine }

func (b e2eBackend) Connect(ctx context.Context, n *corev3.Node, peer string) (serve.Session, error) {
	c, err := b.e.Connect(ctx, n, peer)
	if err != nil {
		return nil, err
	}
	return c, nil
}

type healthServer struct {
	healthpb.UnimplementedHealthServer
}

func (healthServer) Check(context.Context, *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

// TestE2EXDSServerAndClient runs a real xDS-enabled gRPC server and a real
// proxyless gRPC client (grpc-go's xDS implementation) against pilotfish's
// engine and ADS server, with config written directly to the index.
//
// The server asks for "xds.istio.io/grpc/lds/inbound/127.0.0.1:PORT" (its
// bootstrap's server listener template, as istio-agent writes it) and
// starts serving only once it has a listener it accepts: pilotfish's
// inbound listener with a NonForwardingAction route. The client dials
// xds:///echo.shop.svc.cluster.local:PORT and reaches the server through
// the api_listener, RDS, CDS and EDS; a VirtualService fault then aborts
// its calls, which shows the route configuration is applied.
func TestE2EXDSServerAndClient(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := uint32(lis.Addr().(*net.TCPAddr).Port)

	// The mesh: ServiceEntry echo.shop.svc.cluster.local:PORT (gRPC) whose
	// endpoint is the server, in the server's namespace.
	w := index.NewWriter()
	sy := w.Symbols()
	svc := index.ServiceKey{Host: sy.Intern("echo.shop.svc.cluster.local"), Namespace: sy.Intern("shop")}
	var b index.Batch
	b.PutService(index.Service{Key: svc, Name: sy.Intern("echo"), Origin: index.OriginServiceEntry,
		Addresses: []netip.Prefix{netip.MustParsePrefix("10.96.0.30/32")},
		Ports:     []index.Port{{Name: sy.Intern("grpc"), Number: port, Protocol: index.ProtocolGRPC}}})
	b.PutEndpoints(svc, index.EndpointGroup{Source: sy.Intern("echo"),
		Ports:     []index.EndpointPort{{Name: sy.Intern("grpc"), Port: port, Protocol: index.ProtocolGRPC}},
		Endpoints: []index.Endpoint{{Addr: netip.MustParseAddr("127.0.0.1")}}})
	w.Apply(&b)

	eng := engine.New(w, engine.Options{DebounceAfter: 5 * time.Millisecond, DebounceMax: 100 * time.Millisecond, Mesh: encode.DefaultMesh()})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); eng.Run(ctx) }()
	adsLis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(serve.ServerOptions()...)
	serve.NewXDSServer(e2eBackend{eng}, serve.XDSOptions{}).Register(gs)
	go func() { _ = gs.Serve(adsLis) }()
	t.Cleanup(func() { gs.Stop(); cancel(); wg.Wait() })

	bootstrap := func(node, ns string, server bool) []byte {
		tmpl := ""
		if server {
			tmpl = `"server_listener_resource_name_template": "xds.istio.io/grpc/lds/inbound/%s",`
		}
		return fmt.Appendf(nil, `{
			"xds_servers": [{"server_uri": %q, "channel_creds": [{"type": "insecure"}], "server_features": ["xds_v3"]}],
			%s
			"node": {"id": %q, "metadata": {"GENERATOR": "grpc", "NAMESPACE": %q, "ISTIO_VERSION": "1.31.0", "INSTANCE_IPS": "127.0.0.1"}}
		}`, adsLis.Addr().String(), tmpl, node, ns)
	}

	// The xDS-enabled server.
	serving := make(chan error, 4)
	srv, err := xds.NewGRPCServer(grpc.Creds(insecure.NewCredentials()),
		xds.BootstrapContentsForTesting(bootstrap("sidecar~127.0.0.1~echo-0.shop~shop.svc.cluster.local", "shop", true)),
		xds.ServingModeCallback(func(_ net.Addr, args xds.ServingModeChangeArgs) {
			if args.Mode == connectivity.ServingModeServing {
				serving <- nil
			} else if args.Err != nil {
				serving <- args.Err
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	healthpb.RegisterHealthServer(srv, healthServer{})
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	select {
	case err := <-serving:
		if err != nil {
			t.Fatalf("xDS server not serving: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("xDS server never got its listener")
	}

	// The proxyless client, in another namespace.
	resolver, err := xds.NewXDSResolverWithConfigForTesting(bootstrap("sidecar~10.0.0.200~client-0.default~default.svc.cluster.local", "default", false))
	if err != nil {
		t.Fatal(err)
	}
	cc, err := grpc.NewClient(fmt.Sprintf("xds:///echo.shop.svc.cluster.local:%d", port),
		grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithResolvers(resolver))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	client := healthpb.NewHealthClient(cc)
	call := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := client.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true))
		return err
	}
	if err := call(); err != nil {
		t.Fatalf("call through xDS: %v", err)
	}

	// A VirtualService aborting every call with UNAVAILABLE.
	vs := &networking.VirtualService{
		Hosts: []string{"echo.shop.svc.cluster.local"},
		Http: []*networking.HTTPRoute{{
			Fault: &networking.HTTPFaultInjection{Abort: &networking.HTTPFaultInjection_Abort{
				Percentage: &networking.Percent{Value: 100},
				ErrorType:  &networking.HTTPFaultInjection_Abort_GrpcStatus{GrpcStatus: "RESOURCE_EXHAUSTED"},
			}},
			Route: []*networking.HTTPRouteDestination{{Destination: &networking.Destination{Host: "echo.shop.svc.cluster.local"}}},
		}},
	}
	b = index.Batch{}
	b.PutConfig(index.Config{Kind: index.ConfigVirtualService, Key: index.ConfigKey{Namespace: sy.Intern("shop"), Name: sy.Intern("echo")},
		Spec: vs, Hosts: []index.Sym{svc.Host}, Hash: 42})
	w.Apply(&b)
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := call()
		if status.Code(err) == codes.ResourceExhausted {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("fault never applied; last call: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

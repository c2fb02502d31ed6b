package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	xdscreds "google.golang.org/grpc/credentials/xds"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/xds"
)

// Inbound security of a real xDS-enabled gRPC server, configured by
// pilotfish from PeerAuthentication and AuthorizationPolicy, with
// certificates from pilotfish's CA, checked by real calls.
//
// The server (echo, service account echo) serves grpc.health.v1. Phase 1:
// PeerAuthentication STRICT, an ALLOW policy for the principal of service
// account "client" and a DENY policy for the path of Health/List. The
// client's Check passes; its List is denied; a client with another identity
// of the same CA is denied; a plaintext client cannot connect. Phase 2:
// PERMISSIVE without the ALLOW policy: a plaintext client's Check passes
// and its List is still denied. (A proxyless gRPC server cannot accept mTLS
// and plaintext on one port, gRPC matching no transport protocol: istiod and
// pilotfish serve plaintext for PERMISSIVE unless the workload is labelled
// security.istio.io/tlsMode=istio, which makes it STRICT.)
const authzMesh = `apiVersion: v1
kind: Service
metadata: {name: echo, namespace: shop}
spec:
  clusterIP: 10.96.0.31
  selector: {app: echo}
  ports: [{name: grpc, port: 9080}]
---
apiVersion: v1
kind: Pod
metadata: {name: echo-0, namespace: shop, labels: {app: echo}}
spec: {serviceAccountName: echo, containers: [{name: echo, image: echo}]}
status: {podIP: 10.244.0.8}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: echo-0, namespace: shop, labels: {kubernetes.io/service-name: echo}}
addressType: IPv4
ports: [{name: grpc, port: %d}]
endpoints: [{addresses: [10.244.0.8], conditions: {ready: true}, targetRef: {kind: Pod, name: echo-0, namespace: shop}}]
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: echo, namespace: shop}
spec:
  host: echo.shop.svc.cluster.local
  trafficPolicy: {tls: {mode: ISTIO_MUTUAL}}
---
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: default, namespace: shop}
spec:
  mtls: {mode: %s}
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: no-list, namespace: shop}
spec:
  selector: {matchLabels: {app: echo}}
  action: DENY
  rules:
  - to: [{operation: {paths: [/grpc.health.v1.Health/List]}}]
`

const authzAllowClient = `---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: only-client, namespace: shop}
spec:
  selector: {matchLabels: {app: echo}}
  action: ALLOW
  rules:
  - from: [{source: {principals: [cluster.local/ns/shop/sa/client]}}]
`

// grpcBootstrap is istio-agent's gRPC bootstrap for a proxy at ip with the
// file_watcher certificate provider "default" over certDir.
func grpcBootstrap(xdsAddr, ip, pod, certDir string) []byte {
	return fmt.Appendf(nil, `{
		"xds_servers": [{"server_uri": %q, "channel_creds": [{"type": "insecure"}], "server_features": ["xds_v3"]}],
		"node": {"id": "sidecar~%s~%s.shop~shop.svc.cluster.local",
		         "metadata": {"GENERATOR": "grpc", "NAMESPACE": "shop", "ISTIO_VERSION": "1.31.0", "LABELS": {"app": %q}}},
		"server_listener_resource_name_template": "xds.istio.io/grpc/lds/inbound/%%s",
		"certificate_providers": {"default": {"plugin_name": "file_watcher", "config": {
			"certificate_file": %q, "private_key_file": %q, "ca_certificate_file": %q, "refresh_interval": "900s"}}}
	}`, xdsAddr, ip, pod, pod[:len(pod)-2], filepath.Join(certDir, "cert-chain.pem"), filepath.Join(certDir, "key.pem"), filepath.Join(certDir, "root-cert.pem"))
}

func TestAuthzProxylessGRPCServer(t *testing.T) {
	iss := newTestIssuer(t, "https://issuer.pilotfish.test", "istio-ca")
	dir := t.TempDir()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := lis.Addr().(*net.TCPAddr).Port
	writeMesh := func(mode string, allow bool) {
		y := fmt.Sprintf(authzMesh, port, mode)
		if allow {
			y += authzAllowClient
		}
		tmp := filepath.Join(dir, ".mesh.yaml.tmp")
		if err := os.WriteFile(tmp, []byte(y), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, "mesh.yaml")); err != nil {
			t.Fatal(err)
		}
	}
	writeMesh("STRICT", true)
	s := startCAServeDir(t, dir, caOptions{jwtRule: iss.rule})
	addr := s.grpcAddr.String()

	certs := t.TempDir()
	issueFiles(t, addr, iss.token(t, "shop", "echo", "istio-ca", time.Hour), filepath.Join(certs, "echo"))
	issueFiles(t, addr, iss.token(t, "shop", "client", "istio-ca", time.Hour), filepath.Join(certs, "client"))
	issueFiles(t, addr, iss.token(t, "shop", "impostor", "istio-ca", time.Hour), filepath.Join(certs, "impostor"))

	// The xDS-enabled server: its listener, security and RBAC come from
	// pilotfish ("xds.istio.io/grpc/lds/inbound/127.0.0.1:PORT").
	screds, err := xdscreds.NewServerCredentials(xdscreds.ServerOptions{FallbackCreds: insecure.NewCredentials()})
	if err != nil {
		t.Fatal(err)
	}
	gs, err := xds.NewGRPCServer(grpc.Creds(screds), xds.BootstrapContentsForTesting(grpcBootstrap(addr, "10.244.0.8", "echo-0", filepath.Join(certs, "echo"))))
	if err != nil {
		t.Fatal(err)
	}
	healthpb.RegisterHealthServer(gs, &peerRecorder{})
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)

	dialer := grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) {
		_, p, _ := net.SplitHostPort(a) // stand-in pod IP → 127.0.0.1
		return (&net.Dialer{}).DialContext(ctx, "tcp", "127.0.0.1:"+p)
	})
	xdsClient := func(ip, pod string) *grpc.ClientConn {
		r, err := xds.NewXDSResolverWithConfigForTesting(grpcBootstrap(addr, ip, pod, filepath.Join(certs, pod[:len(pod)-2])))
		if err != nil {
			t.Fatal(err)
		}
		creds, err := xdscreds.NewClientCredentials(xdscreds.ClientOptions{FallbackCreds: insecure.NewCredentials()})
		if err != nil {
			t.Fatal(err)
		}
		cc, err := grpc.NewClient("xds:///echo.shop.svc.cluster.local:9080", grpc.WithTransportCredentials(creds), grpc.WithResolvers(r), dialer)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close() })
		return cc
	}
	plain, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { plain.Close() })

	check := func(cc *grpc.ClientConn, d time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		_, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true))
		return err
	}
	list := func(cc *grpc.ClientConn) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := healthpb.NewHealthClient(cc).List(ctx, &healthpb.HealthListRequest{}, grpc.WaitForReady(true))
		return err
	}
	wantCode := func(what string, err error, code codes.Code) {
		t.Helper()
		if status.Code(err) != code {
			t.Errorf("%s: %v, want %s", what, err, code)
		}
	}

	// Phase 1: STRICT, ALLOW client, DENY List.
	client, impostor := xdsClient("10.244.9.9", "client-0"), xdsClient("10.244.9.10", "impostor-0")
	if err := check(client, 30*time.Second); err != nil {
		t.Fatalf("allowed principal, Check: %v", err)
	}
	wantCode("allowed principal, List (denied path)", list(client), codes.PermissionDenied)
	wantCode("other principal, Check", check(impostor, 10*time.Second), codes.PermissionDenied)
	if err := check(plain, 2*time.Second); err == nil || status.Code(err) == codes.PermissionDenied {
		t.Errorf("plaintext client under STRICT: %v, want the connection refused", err)
	}

	// Phase 2: PERMISSIVE, no ALLOW policy: plaintext is served, and the
	// DENY policy still applies to it.
	writeMesh("PERMISSIVE", false)
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := check(plain, time.Second)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("plaintext client under PERMISSIVE: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	wantCode("plaintext client under PERMISSIVE, List (denied path)", list(plain), codes.PermissionDenied)
}

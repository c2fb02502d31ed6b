package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	xdscreds "google.golang.org/grpc/credentials/xds"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/xds"

	pb "istio.io/api/security/v1alpha1"
)

// mTLS end to end for proxyless gRPC with certificates from pilotfish's CA:
// a DestinationRule with tls ISTIO_MUTUAL makes pilotfish send the client
// a cluster whose UpstreamTlsContext takes its certificate and root from
// the "default" certificate provider instance; the client's bootstrap maps
// that instance to grpc-go's file_watcher plugin reading the files
// istio-agent writes (cert-chain.pem, key.pem, root-cert.pem), exactly as
// istio-agent's gRPC bootstrap does. The server side is a TLS gRPC server
// configured by hand with its own certificate from the CA, requiring a
// client certificate: pilotfish does not yet generate the server half
// (the inbound listener of an xDS-enabled gRPC server is plaintext only,
// PeerAuthentication is not applied to it; see docs/ca.md).
const mtlsMesh = `apiVersion: v1
kind: Service
metadata: {name: echo, namespace: shop}
spec:
  clusterIP: 10.96.0.30
  selector: {app: echo}
  ports: [{name: grpc, port: 9080}]
---
apiVersion: v1
kind: Pod
metadata: {name: echo-0, namespace: shop, labels: {app: echo}}
spec: {serviceAccountName: echo, containers: [{name: echo, image: echo}]}
status: {podIP: 10.244.0.7}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: echo-0, namespace: shop, labels: {kubernetes.io/service-name: echo}}
addressType: IPv4
ports: [{name: grpc, port: %d}]
endpoints: [{addresses: [10.244.0.7], conditions: {ready: true}, targetRef: {kind: Pod, name: echo-0, namespace: shop}}]
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: echo, namespace: shop}
spec:
  host: echo.shop.svc.cluster.local
  trafficPolicy: {tls: {mode: ISTIO_MUTUAL}}
`

// issueFiles asks pilotfish's CA (over gRPC, with a JWT) for a certificate
// of ns/sa and writes it as istio-agent's OUTPUT_CERTS does.
func issueFiles(t *testing.T, caAddr, token, dir string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, key)
	if err != nil {
		t.Fatal(err)
	}
	cc, err := grpc.NewClient(caAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+token)
	resp, err := pb.NewIstioCertificateServiceClient(cc).CreateCertificate(ctx, &pb.IstioCertificateRequest{
		Csr: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})), ValidityDuration: 3600,
	})
	if err != nil {
		t.Fatal(err)
	}
	n := len(resp.CertChain)
	chain := strings.Join(resp.CertChain[:n-1], "")
	keyDER, _ := x509.MarshalPKCS8PrivateKey(key)
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string]string{"cert-chain.pem": chain, "key.pem": string(keyPEM), "root-cert.pem": resp.CertChain[n-1]} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(b), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c, err := tls.X509KeyPair([]byte(chain), keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// peerRecorder is a health server that records the SPIFFE ID of each
// caller's client certificate.
type peerRecorder struct {
	healthpb.UnimplementedHealthServer
	mu    sync.Mutex
	peers []string
}

func (p *peerRecorder) Check(ctx context.Context, _ *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	id := "(none)"
	if pr, ok := peer.FromContext(ctx); ok {
		if ti, ok := pr.AuthInfo.(credentials.TLSInfo); ok && len(ti.State.PeerCertificates) > 0 && len(ti.State.PeerCertificates[0].URIs) > 0 {
			id = ti.State.PeerCertificates[0].URIs[0].String()
		}
	}
	p.mu.Lock()
	p.peers = append(p.peers, id)
	p.mu.Unlock()
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

func TestCAMTLSProxylessGRPC(t *testing.T) {
	iss := newTestIssuer(t, "https://issuer.pilotfish.test", "istio-ca")
	dir := t.TempDir()

	// The server first: its port goes into the EndpointSlice.
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "mesh.yaml"), fmt.Appendf(nil, mtlsMesh, lis.Addr().(*net.TCPAddr).Port), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startCAServeDir(t, dir, caOptions{jwtRule: iss.rule})
	caAddr := s.grpcAddr.String()

	certs := t.TempDir()
	serverCert := issueFiles(t, caAddr, iss.token(t, "shop", "echo", "istio-ca", time.Hour), filepath.Join(certs, "server"))
	issueFiles(t, caAddr, iss.token(t, "shop", "client", "istio-ca", time.Hour), filepath.Join(certs, "client"))
	roots := x509.NewCertPool()
	rootPEM, _ := os.ReadFile(filepath.Join(certs, "server", "root-cert.pem"))
	roots.AppendCertsFromPEM(rootPEM)

	// An impostor: a valid certificate of the same CA, another identity.
	impostorCert := issueFiles(t, caAddr, iss.token(t, "shop", "impostor", "istio-ca", time.Hour), filepath.Join(certs, "impostor"))
	var impostor atomic.Bool

	rec := &peerRecorder{}
	gs := grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			if impostor.Load() {
				return &impostorCert, nil
			}
			return &serverCert, nil
		},
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: roots, MinVersion: tls.VersionTLS12,
	})))
	healthpb.RegisterHealthServer(gs, rec)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)

	// istio-agent's gRPC bootstrap, with the file_watcher provider "default".
	cd := filepath.Join(certs, "client")
	bootstrap := fmt.Sprintf(`{
		"xds_servers": [{"server_uri": %q, "channel_creds": [{"type": "insecure"}], "server_features": ["xds_v3"]}],
		"node": {"id": "sidecar~10.244.9.9~client-0.shop~shop.svc.cluster.local",
		         "metadata": {"GENERATOR": "grpc", "NAMESPACE": "shop", "ISTIO_VERSION": "1.31.0"}},
		"certificate_providers": {"default": {"plugin_name": "file_watcher", "config": {
			"certificate_file": %q, "private_key_file": %q, "ca_certificate_file": %q, "refresh_interval": "900s"}}}
	}`, caAddr, filepath.Join(cd, "cert-chain.pem"), filepath.Join(cd, "key.pem"), filepath.Join(cd, "root-cert.pem"))
	resolver, err := xds.NewXDSResolverWithConfigForTesting([]byte(bootstrap))
	if err != nil {
		t.Fatal(err)
	}
	call := func(timeout time.Duration) error {
		creds, err := xdscreds.NewClientCredentials(xdscreds.ClientOptions{FallbackCreds: insecure.NewCredentials()})
		if err != nil {
			t.Fatal(err)
		}
		cc, err := grpc.NewClient("xds:///echo.shop.svc.cluster.local:9080", grpc.WithTransportCredentials(creds), grpc.WithResolvers(resolver),
			grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
				_, port, _ := net.SplitHostPort(addr) // stand-in pod IP → 127.0.0.1
				return (&net.Dialer{}).DialContext(ctx, "tcp", "127.0.0.1:"+port)
			}))
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		_, err = healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true))
		return err
	}
	if err := call(20 * time.Second); err != nil {
		t.Fatalf("mTLS call: %v", err)
	}
	rec.mu.Lock()
	peers := rec.peers
	rec.mu.Unlock()
	if len(peers) != 1 || peers[0] != "spiffe://cluster.local/ns/shop/sa/client" {
		t.Fatalf("server saw callers %v, want the client's SPIFFE ID", peers)
	}

	// The client checks the server's identity against the SAN pilotfish
	// derived from the service's pods (spiffe://.../sa/echo): a server
	// with another identity from the same CA is refused.
	impostor.Store(true)
	if err := call(3 * time.Second); err == nil {
		t.Fatal("the client accepted a server with another identity")
	}
}

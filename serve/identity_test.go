package serve_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"maps"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/pilotfish-mesh/pilotfish/ca"
	"github.com/pilotfish-mesh/pilotfish/engine"
	"github.com/pilotfish-mesh/pilotfish/internal/testcert"
	"github.com/pilotfish-mesh/pilotfish/serve"
)

// countMetrics counts AuthFailed reasons and UnknownType kinds.
type countMetrics struct {
	serve.NopXDSMetrics
	mu      sync.Mutex
	auth    map[string]int // guarded by mu
	unknown map[string]int // guarded by mu
}

func newCountMetrics() *countMetrics {
	return &countMetrics{auth: map[string]int{}, unknown: map[string]int{}}
}

func (m *countMetrics) AuthFailed(reason string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.auth[reason]++
}

func (m *countMetrics) UnknownType(kind string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.unknown[kind]++
}

func (m *countMetrics) snapshot() (auth, unknown map[string]int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.auth), maps.Clone(m.unknown)
}

// tlsPort is the TLS port as cmd/pilotfish wires it, on real TLS: a CA
// (ca.Authority over a root made here), its serving certificate, client
// certificates verified if given, failed handshakes counted, and the ADS
// service registered with authentication.
type tlsPort struct {
	addr          string
	roots         *x509.CertPool
	caCert, caKey []byte // PEM: the mesh root, which signs certificates directly
	metrics       *countMetrics
	srv           *serve.XDSServer
}

func startTLSPort(t *testing.T, b serve.Backend, auth func(*ca.Authority) serve.AuthOptions) *tlsPort {
	t.Helper()
	p := &tlsPort{metrics: newCountMetrics(), roots: x509.NewCertPool()}
	p.caCert, p.caKey = testcert.SelfSigned(t, "mesh-root")
	p.roots.AppendCertsFromPEM(p.caCert)
	bundle, err := ca.NewBundle(ca.Material{CertPEM: p.caCert, KeyPEM: p.caKey, RootsPEM: p.caCert})
	if err != nil {
		t.Fatal(err)
	}
	a, err := ca.New(bundle, ca.Options{TrustDomain: "cluster.local"})
	if err != nil {
		t.Fatal(err)
	}
	sv, err := ca.NewServing(a, ca.ServingOptions{})
	if err != nil {
		t.Fatal(err)
	}
	creds := serve.CountHandshakeFailures(credentials.NewTLS(sv.ServerTLSConfig()), p.metrics, nil)
	gs := grpc.NewServer(append(serve.ServerOptions(), grpc.Creds(creds))...)
	p.srv = serve.NewXDSServer(b, serve.XDSOptions{Metrics: p.metrics})
	p.srv.RegisterAuthenticated(gs, auth(a))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	p.addr = lis.Addr().String()
	return p
}

// cert is a certificate of the mesh CA for uri, valid for an hour.
func (p *tlsPort) cert(t *testing.T, uri string) *tls.Certificate {
	c := testcert.Leaf(t, p.caCert, p.caKey, uri, time.Now().Add(-time.Minute), time.Now().Add(time.Hour))
	return &c
}

// dial connects over TLS, trusting the mesh root, presenting cert if not
// nil: always, as an attacker would (crypto/tls would not send one whose
// issuer the server does not list).
func (p *tlsPort) dial(t *testing.T, cert *tls.Certificate) *grpc.ClientConn {
	t.Helper()
	cfg := &tls.Config{RootCAs: p.roots, ServerName: ca.DefaultServingDNSName, MinVersion: tls.VersionTLS12}
	if cert != nil {
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert, nil }
	}
	cc, err := grpc.NewClient(p.addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// node is a node of kind (sidecar, router) with the id pod.idNS and the
// metadata given (NAMESPACE, SERVICE_ACCOUNT, GENERATOR), empty values left
// out.
func node(t testing.TB, kind, idNS string, md map[string]string) *corev3.Node {
	t.Helper()
	m := map[string]any{}
	for k, v := range md {
		if v != "" {
			m[k] = v
		}
	}
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return &corev3.Node{Id: kind + "~10.244.0.9~app-0." + idNS + "~" + idNS + ".svc.cluster.local", Metadata: s}
}

// firstCDS opens a stream on cc (SotW or Delta), asks for CDS as n and
// returns the first response's resource count or the stream's error.
func firstCDS(t *testing.T, cc *grpc.ClientConn, n *corev3.Node, delta bool) (int, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ads := discoveryv3.NewAggregatedDiscoveryServiceClient(cc)
	if delta {
		st, err := ads.DeltaAggregatedResources(ctx)
		if err != nil {
			return 0, err
		}
		if err := st.Send(&discoveryv3.DeltaDiscoveryRequest{Node: n, TypeUrl: engine.TypeCluster}); err != nil && !errors.Is(err, io.EOF) {
			return 0, err
		}
		r, err := st.Recv()
		return len(r.GetResources()), err
	}
	st, err := ads.StreamAggregatedResources(ctx)
	if err != nil {
		return 0, err
	}
	// A Send that fails because the server ended the stream (it refuses
	// before reading) returns io.EOF: Recv has the status.
	if err := st.Send(&discoveryv3.DiscoveryRequest{Node: n, TypeUrl: engine.TypeCluster}); err != nil && !errors.Is(err, io.EOF) {
		return 0, err
	}
	r, err := st.Recv()
	return len(r.GetResources()), err
}

const cart = "spiffe://cluster.local/ns/shop/sa/cart"

// TestIdentityTLSPort: on the TLS port a stream is served only when its
// node is its caller's (istiod's checkConnectionIdentity): attacks with a
// certificate of another namespace or service account, a router's node, no
// certificate, an expired one, one from a foreign root or of another trust
// domain are refused with the code istiod uses, each counted once by
// reason; the server keeps serving the legitimate proxy, SotW and Delta.
func TestIdentityTLSPort(t *testing.T) {
	b := newTestBackend()
	meshFixture(t, b)
	p := startTLSPort(t, b, func(a *ca.Authority) serve.AuthOptions { return serve.AuthOptions{Authenticator: a} })
	own := p.dial(t, p.cert(t, cart))
	cartMD := map[string]string{"NAMESPACE": "shop", "SERVICE_ACCOUNT": "cart"}

	served := []struct {
		name string
		node *corev3.Node
	}{
		{"own node", node(t, "sidecar", "shop", cartMD)},
		{"namespace from the node id only", node(t, "sidecar", "shop", nil)},
		{"no service account claimed", node(t, "sidecar", "shop", map[string]string{"NAMESPACE": "shop"})},
	}
	for _, tc := range served {
		for _, delta := range []bool{false, true} {
			if n, err := firstCDS(t, own, tc.node, delta); err != nil || n != 2 {
				t.Errorf("%s (delta %v): %d clusters, %v; want served", tc.name, delta, n, err)
			}
		}
	}

	foreignCert, foreignKey := testcert.SelfSigned(t, "foreign-root")
	foreign := testcert.Leaf(t, foreignCert, foreignKey, cart, time.Now().Add(-time.Minute), time.Now().Add(time.Hour))
	expired := testcert.Leaf(t, p.caCert, p.caKey, cart, time.Now().Add(-2*time.Hour), time.Now().Add(-time.Hour))
	refused := []struct {
		name     string
		cc       *grpc.ClientConn
		node     *corev3.Node
		code     codes.Code // OK: the handshake fails, any code
		contains []string
	}{
		{"another namespace", own, node(t, "sidecar", "billing", map[string]string{"NAMESPACE": "billing", "SERVICE_ACCOUNT": "cart"}),
			codes.PermissionDenied, []string{`namespace "billing"`, cart}},
		{"another namespace, by the node id", own, node(t, "sidecar", "billing", nil), codes.PermissionDenied, []string{`"billing"`, cart}},
		{"metadata namespace over the node id", own, node(t, "sidecar", "shop", map[string]string{"NAMESPACE": "billing"}), codes.PermissionDenied, []string{`"billing"`}},
		{"another service account", own, node(t, "sidecar", "shop", map[string]string{"NAMESPACE": "shop", "SERVICE_ACCOUNT": "admin"}),
			codes.PermissionDenied, []string{`service account "admin"`, cart}},
		{"a router of another namespace", own, node(t, "router", "istio-system", nil), codes.PermissionDenied, []string{`"istio-system"`}},
		{"a proxyless gRPC client of another namespace", own, node(t, "sidecar", "billing", map[string]string{"GENERATOR": "grpc"}), codes.PermissionDenied, nil},
		{"no certificate", p.dial(t, nil), node(t, "sidecar", "shop", cartMD), codes.Unauthenticated, []string{"client certificate"}},
		{"another trust domain", p.dial(t, p.cert(t, "spiffe://evil.example/ns/shop/sa/cart")), node(t, "sidecar", "shop", cartMD),
			codes.Unauthenticated, []string{"trust domain"}},
		{"expired certificate", p.dial(t, &expired), node(t, "sidecar", "shop", cartMD), codes.OK, nil},
		{"foreign root", p.dial(t, &foreign), node(t, "sidecar", "shop", cartMD), codes.OK, nil},
	}
	for _, tc := range refused {
		n, err := firstCDS(t, tc.cc, tc.node, false)
		if err == nil {
			t.Errorf("%s: served %d clusters", tc.name, n)
			continue
		}
		st, _ := status.FromError(err)
		if tc.code != codes.OK && st.Code() != tc.code {
			t.Errorf("%s: %v %q, want %v", tc.name, st.Code(), st.Message(), tc.code)
		}
		for _, s := range tc.contains {
			if !strings.Contains(st.Message(), s) {
				t.Errorf("%s: status %q does not name %s", tc.name, st.Message(), s)
			}
		}
		t.Logf("%s: %v: %s", tc.name, st.Code(), st.Message())
	}

	// Each refusal counted once, under its reason; the legitimate proxy is
	// still served and only its streams were ever connected.
	if n, err := firstCDS(t, own, node(t, "sidecar", "shop", cartMD), true); err != nil || n != 2 {
		t.Fatalf("after the attacks: %d clusters, %v", n, err)
	}
	want := map[string]int{serve.AuthNamespaceMismatch: 5, serve.AuthServiceAccountMismatch: 1, serve.AuthNoCredential: 1,
		serve.AuthUnauthenticated: 1, serve.AuthCertExpired: 1, serve.AuthCertUntrusted: 1}
	// A refused handshake is counted by the server's handshake goroutine,
	// which may finish after the client saw the failure: wait for it.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		got, _ := p.metrics.snapshot()
		if maps.Equal(got, want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("auth failures %v, want %v", got, want)
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for id := range b.sessions {
		if !strings.Contains(id, "app-0.shop~") {
			t.Errorf("a refused node connected to the backend: %s", id)
		}
	}
}

// TestIdentityTLSPortRelaxed: istiod's switches. With the identity check
// off (PILOT_ENABLE_XDS_IDENTITY_CHECK=false) an authenticated caller is
// served any node; without an authenticator (XDS_AUTH=false) so is a
// client with no certificate.
func TestIdentityTLSPortRelaxed(t *testing.T) {
	b := newTestBackend()
	meshFixture(t, b)
	billing := node(t, "sidecar", "billing", map[string]string{"NAMESPACE": "billing"})

	p := startTLSPort(t, b, func(a *ca.Authority) serve.AuthOptions {
		return serve.AuthOptions{Authenticator: a, SkipIdentityCheck: true}
	})
	if n, err := firstCDS(t, p.dial(t, p.cert(t, cart)), billing, false); err != nil || n != 2 {
		t.Errorf("identity check off: %d clusters, %v", n, err)
	}
	if _, err := firstCDS(t, p.dial(t, nil), billing, false); status.Code(err) != codes.Unauthenticated {
		t.Errorf("identity check off, no certificate: %v, want Unauthenticated", err)
	}

	open := startTLSPort(t, b, func(*ca.Authority) serve.AuthOptions { return serve.AuthOptions{} })
	if n, err := firstCDS(t, open.dial(t, nil), billing, false); err != nil || n != 2 {
		t.Errorf("authentication off: %d clusters, %v", n, err)
	}
}

// TestIdentityPlaintextPort: the plaintext port is not authenticated, as
// istiod's 15010: any node is served.
func TestIdentityPlaintextPort(t *testing.T) {
	b := newTestBackend()
	meshFixture(t, b)
	cc := startServer(t, b, serve.XDSOptions{})
	if n, err := firstCDS(t, cc, node(t, "router", "istio-system", nil), false); err != nil || n != 2 {
		t.Errorf("plaintext: %d clusters, %v", n, err)
	}
}

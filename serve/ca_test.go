package serve_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"net/url"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	pb "istio.io/api/security/v1alpha1"

	"github.com/pilotfish-mesh/pilotfish/ca"
	"github.com/pilotfish-mesh/pilotfish/serve"
)

// tokenAuth accepts the bearer token "good" as shop/reviews: a stand-in
// for the real authenticators (tested in package ca), so these tests see
// only what serve adds: metadata and TLS peer extraction, the codec, and
// status codes.
type tokenAuth struct{}

func (tokenAuth) Name() string { return "test token" }

func (tokenAuth) Authenticate(_ context.Context, c ca.Credentials) (ca.Caller, error) {
	switch c.BearerToken {
	case "":
		return ca.Caller{}, ca.ErrNoCredential
	case "good":
		return ca.Caller{Namespace: "shop", ServiceAccount: "reviews"}, nil
	}
	return ca.Caller{}, context.Canceled // any refusal
}

const reviewsID = "spiffe://cluster.local/ns/shop/sa/reviews"

func newTestAuthority(t *testing.T) *ca.Authority {
	t.Helper()
	m, err := ca.NewRoot(ca.SelfSignedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := ca.NewBundle(m)
	if err != nil {
		t.Fatal(err)
	}
	a, err := ca.New(b, ca.Options{Authenticators: []ca.Authenticator{tokenAuth{}}, MaxCSRBytes: 8 << 10})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// startCAServer serves the CA on 127.0.0.1 with pilotfish's server options
// (the raw-bytes codec) and, if serving is set, TLS.
func startCAServer(t *testing.T, a *ca.Authority, serving *ca.Serving) string {
	t.Helper()
	opts := serve.ServerOptions()
	if serving != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(serving.ServerTLSConfig())))
	}
	s := grpc.NewServer(opts...)
	serve.NewCAServer(a).Register(s)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Stop)
	return lis.Addr().String()
}

func csr(t *testing.T, key *ecdsa.PrivateKey, uri string) string {
	t.Helper()
	tmpl := &x509.CertificateRequest{}
	if uri != "" {
		u, _ := url.Parse(uri)
		tmpl.URIs = []*url.URL{u}
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}))
}

func newKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func withToken(tok string) context.Context {
	ctx := context.Background()
	if tok == "" {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tok)
}

func leafOf(t *testing.T, chain []string) *x509.Certificate {
	t.Helper()
	b, _ := pem.Decode([]byte(chain[0]))
	if b == nil {
		t.Fatal("leaf is not PEM")
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The CA's ordinary proto messages go through pilotfish's raw-bytes codec
// both ways, and every refusal has its gRPC code.
func TestCAServerPlaintext(t *testing.T) {
	a := newTestAuthority(t)
	addr := startCAServer(t, a, nil)
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	client := pb.NewIstioCertificateServiceClient(cc)
	key := newKey(t)

	resp, err := client.CreateCertificate(withToken("good"), &pb.IstioCertificateRequest{Csr: csr(t, key, reviewsID), ValidityDuration: 3600})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(resp.CertChain); n != 2 || resp.CertChain[1] != string(a.Bundle().RootsPEM()) {
		t.Fatalf("chain of %d, want leaf then the root bundle", n)
	}
	leaf := leafOf(t, resp.CertChain)
	if leaf.URIs[0].String() != reviewsID || leaf.NotAfter.Sub(leaf.NotBefore) != time.Hour+2*time.Minute {
		t.Errorf("leaf %s valid %s", leaf.URIs[0], leaf.NotAfter.Sub(leaf.NotBefore))
	}

	for _, tc := range []struct {
		name  string
		token string
		req   *pb.IstioCertificateRequest
		code  codes.Code
	}{
		{"no token", "", &pb.IstioCertificateRequest{Csr: csr(t, key, reviewsID)}, codes.Unauthenticated},
		{"refused token", "bad", &pb.IstioCertificateRequest{Csr: csr(t, key, reviewsID)}, codes.Unauthenticated},
		{"another identity", "good", &pb.IstioCertificateRequest{Csr: csr(t, key, "spiffe://cluster.local/ns/kube-system/sa/admin")}, codes.PermissionDenied},
		{"malformed CSR", "good", &pb.IstioCertificateRequest{Csr: "-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n-----END CERTIFICATE REQUEST-----\n"}, codes.InvalidArgument},
		{"oversized CSR", "good", &pb.IstioCertificateRequest{Csr: csr(t, key, reviewsID) + string(make([]byte, 8<<10))}, codes.InvalidArgument},
		{"excessive TTL", "good", &pb.IstioCertificateRequest{Csr: csr(t, key, reviewsID), ValidityDuration: 91 * 24 * 3600}, codes.InvalidArgument},
		{"absurd TTL", "good", &pb.IstioCertificateRequest{Csr: csr(t, key, reviewsID), ValidityDuration: 1 << 62}, codes.InvalidArgument},
		{"absurd negative TTL is the default", "good", &pb.IstioCertificateRequest{Csr: csr(t, key, reviewsID), ValidityDuration: -1 << 62}, codes.OK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := client.CreateCertificate(withToken(tc.token), tc.req)
			if status.Code(err) != tc.code {
				t.Fatalf("err %v, want %s", err, tc.code)
			}
			if tc.code == codes.OK {
				if l := leafOf(t, resp.CertChain); l.NotAfter.Sub(l.NotBefore) != ca.DefaultWorkloadTTL+2*time.Minute {
					t.Fatalf("lifetime %s, want the default", l.NotAfter.Sub(l.NotBefore))
				}
				return
			}
			if resp != nil {
				t.Fatal("a response with an error")
			}
		})
	}
}

// Over TLS, a workload renews with the certificate it was issued: no token,
// its client certificate authenticates it. A certificate from another CA
// fails the handshake.
func TestCAServerTLSRenewalByClientCert(t *testing.T) {
	a := newTestAuthority(t)
	serving, err := ca.NewServing(a, ca.ServingOptions{Names: []string{"127.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	addr := startCAServer(t, a, serving)
	roots := a.Bundle().RootPool()

	dial := func(cert *tls.Certificate) pb.IstioCertificateServiceClient {
		cfg := &tls.Config{RootCAs: roots, ServerName: ca.DefaultServingDNSName}
		if cert != nil {
			cfg.Certificates = []tls.Certificate{*cert}
		}
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close() })
		return pb.NewIstioCertificateServiceClient(cc)
	}

	// First certificate with a token, over TLS without a client cert.
	key := newKey(t)
	resp, err := dial(nil).CreateCertificate(withToken("good"), &pb.IstioCertificateRequest{Csr: csr(t, key, reviewsID)})
	if err != nil {
		t.Fatal(err)
	}
	first := leafOf(t, resp.CertChain)
	mtls := &tls.Certificate{Certificate: [][]byte{first.Raw}, PrivateKey: key}

	// Renewal: client certificate only.
	key2 := newKey(t)
	resp, err = dial(mtls).CreateCertificate(withToken(""), &pb.IstioCertificateRequest{Csr: csr(t, key2, reviewsID)})
	if err != nil {
		t.Fatalf("renewal by client certificate: %v", err)
	}
	if second := leafOf(t, resp.CertChain); second.URIs[0].String() != reviewsID || second.SerialNumber.Cmp(first.SerialNumber) == 0 {
		t.Fatalf("renewed certificate %s serial %s", second.URIs[0], second.SerialNumber)
	}
	// The client certificate's identity binds the CSR too.
	_, err = dial(mtls).CreateCertificate(withToken(""), &pb.IstioCertificateRequest{Csr: csr(t, key2, "spiffe://cluster.local/ns/shop/sa/other")})
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("another identity by client certificate: %v, want PermissionDenied", err)
	}

	// A certificate of another CA: the handshake refuses it.
	other := newTestAuthority(t)
	ochain, err := other.Sign(ca.Identity{TrustDomain: "cluster.local", Namespace: "shop", ServiceAccount: "reviews"}, []byte(csr(t, key, reviewsID)), 0)
	if err != nil {
		t.Fatal(err)
	}
	foreign := &tls.Certificate{Certificate: [][]byte{leafOf(t, ochain).Raw}, PrivateKey: key}
	_, err = dial(foreign).CreateCertificate(withToken(""), &pb.IstioCertificateRequest{Csr: csr(t, key2, reviewsID)})
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("foreign client certificate: %v, want a failed handshake (Unavailable)", err)
	}
}

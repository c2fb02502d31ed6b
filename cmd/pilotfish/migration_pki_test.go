package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	pb "istio.io/api/security/v1alpha1"

	"github.com/pilotfish-mesh/pilotfish/ca"
)

// meshPKI is one root of trust with an intermediate CA per control plane,
// as an operator migrating from istiod sets it up (docs/migration.md): each
// control plane signs with its own intermediate from a cacerts directory
// and every workload trusts the one root.
type meshPKI struct {
	root    *x509.Certificate
	rootKey *ecdsa.PrivateKey
	rootPEM []byte
}

func newMeshPKI(t *testing.T) *meshPKI {
	t.Helper()
	key, cert := caCert(t, "mesh root", nil, nil)
	return &meshPKI{root: cert, rootKey: key, rootPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})}
}

// caCert makes a CA certificate named cn, self-signed when parent is nil.
func caCert(t *testing.T, cn string, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*ecdsa.PrivateKey, *x509.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: cn, Organization: []string{"cluster.local"}},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature}
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return key, cert
}

// intermediate writes istiod's plug-in CA layout (cacerts: ca-cert.pem,
// ca-key.pem, cert-chain.pem, root-cert.pem) for a new intermediate named
// cn under the root into a new directory, and returns it and the
// intermediate.
func (p *meshPKI) intermediate(t *testing.T, cn string) (string, *x509.Certificate) {
	t.Helper()
	key, cert := caCert(t, cn, p.root, p.rootKey)
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})
	dir := t.TempDir()
	for name, b := range map[string][]byte{
		ca.CACertFile:    certPEM,
		ca.CAKeyFile:     pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}),
		ca.CertChainFile: certPEM,
		ca.RootCertFile:  p.rootPEM,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir, cert
}

func (p *meshPKI) pool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(p.root)
	return pool
}

// clientTLS trusts only the mesh root and expects the server to be named
// as the host of addr (istiod.istio-system.svc:15012 ->
// istiod.istio-system.svc), as istio-agent checks its control plane.
func (p *meshPKI) clientTLS(addr string, cert *tls.Certificate) *tls.Config {
	host, _, _ := net.SplitHostPort(addr)
	c := &tls.Config{RootCAs: p.pool(), ServerName: host, MinVersion: tls.VersionTLS12}
	if cert != nil {
		c.Certificates = []tls.Certificate{*cert}
	}
	return c
}

// workloadCert is what a workload's CSR got from a control plane.
type workloadCert struct {
	tls   tls.Certificate
	leaf  *x509.Certificate
	chain []*x509.Certificate // as sent: leaf, signers, root last
}

// requestCert asks the CA the pod's CA_ADDR names (dialled at dial, over
// TLS checked against the mesh root) for a certificate of id, with the
// pod's service account token, as istio-agent does at start.
func (p *meshPKI) requestCert(ctx context.Context, caAddr, dial, token, id string) (*workloadCert, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(id)
	if err != nil {
		return nil, err
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{URIs: []*url.URL{u}}, key)
	if err != nil {
		return nil, err
	}
	cc, err := grpc.NewClient(dial, grpc.WithTransportCredentials(credentials.NewTLS(p.clientTLS(caAddr, nil))))
	if err != nil {
		return nil, err
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	resp, err := pb.NewIstioCertificateServiceClient(cc).CreateCertificate(ctx, &pb.IstioCertificateRequest{
		Csr: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})), ValidityDuration: 3600,
	})
	if err != nil {
		return nil, fmt.Errorf("CreateCertificate at %s (%s): %w", caAddr, dial, err)
	}
	w := &workloadCert{}
	for _, s := range resp.CertChain {
		rest := []byte(s)
		for {
			var b *pem.Block
			if b, rest = pem.Decode(rest); b == nil {
				break
			}
			c, err := x509.ParseCertificate(b.Bytes)
			if err != nil {
				return nil, err
			}
			w.chain = append(w.chain, c)
			w.tls.Certificate = append(w.tls.Certificate, b.Bytes)
		}
	}
	if len(w.chain) < 2 {
		return nil, fmt.Errorf("CreateCertificate at %s: a chain of %d certificates", caAddr, len(w.chain))
	}
	w.leaf, w.tls.PrivateKey, w.tls.Leaf = w.chain[0], key, w.chain[0]
	return w, nil
}

// check verifies the certificate as a peer would: it chains to the mesh
// root alone (with the intermediates it was sent with), names exactly id,
// was signed by issuer (the control plane's own intermediate), and the
// chain ends with the mesh root (what istio-agent serves as ROOTCA).
func (w *workloadCert) check(p *meshPKI, id string, issuer *x509.Certificate) error {
	inter := x509.NewCertPool()
	for _, c := range w.chain[1:] {
		inter.AddCert(c)
	}
	if _, err := w.leaf.Verify(x509.VerifyOptions{Roots: p.pool(), Intermediates: inter,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth}}); err != nil {
		return fmt.Errorf("certificate of %s does not chain to the mesh root: %w", id, err)
	}
	if len(w.leaf.URIs) != 1 || w.leaf.URIs[0].String() != id {
		return fmt.Errorf("certificate names %v, want %s", w.leaf.URIs, id)
	}
	if err := w.leaf.CheckSignatureFrom(issuer); err != nil {
		return fmt.Errorf("certificate of %s not signed by %q: %w", id, issuer.Subject.CommonName, err)
	}
	if last := w.chain[len(w.chain)-1]; !last.Equal(p.root) {
		return fmt.Errorf("chain of %s ends with %q, not the mesh root", id, last.Subject.CommonName)
	}
	return nil
}

// mtlsHandshake runs the handshake two sidecars would: server presents
// its certificate and requires the client's, both trusting the mesh root
// only, and each side accepts the peer only if its SPIFFE ID is the one
// its xDS expects (the client: its cluster's SAN; the server: the
// principal its RBAC allows).
func mtlsHandshake(p *meshPKI, client, server *workloadCert, wantServer, wantClient string) error {
	peerIs := func(want string) func(tls.ConnectionState) error {
		return func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 || len(cs.PeerCertificates[0].URIs) != 1 || cs.PeerCertificates[0].URIs[0].String() != want {
				return fmt.Errorf("peer is not %s", want)
			}
			return nil
		}
	}
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{server.tls}, ClientAuth: tls.RequireAndVerifyClientCert,
		ClientCAs: p.pool(), VerifyConnection: peerIs(wantClient), MinVersion: tls.VersionTLS12})
	if err != nil {
		return err
	}
	defer l.Close()
	srvErr := make(chan error, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			srvErr <- err
			return
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		srvErr <- c.(*tls.Conn).Handshake()
	}()
	cfg := &tls.Config{Certificates: []tls.Certificate{client.tls}, RootCAs: p.pool(), MinVersion: tls.VersionTLS12,
		// Sidecars check the SPIFFE ID, not a host name.
		InsecureSkipVerify: true, VerifyConnection: func(cs tls.ConnectionState) error {
			inter := x509.NewCertPool()
			for _, c := range cs.PeerCertificates[1:] {
				inter.AddCert(c)
			}
			if _, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: p.pool(), Intermediates: inter}); err != nil {
				return err
			}
			return peerIs(wantServer)(cs)
		}}
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", l.Addr().String(), cfg)
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	_ = c.Close()
	if err := <-srvErr; err != nil && !errors.Is(err, net.ErrClosed) && !strings.Contains(err.Error(), "EOF") {
		return fmt.Errorf("server: %w", err)
	}
	return nil
}

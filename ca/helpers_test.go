package ca_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/url"
	"testing"
	"time"

	"github.com/pilotfish-mesh/pilotfish/ca"
)

// newRootBundle returns a bundle of a fresh self-signed root.
func newRootBundle(t testing.TB, keyType string) *ca.Bundle {
	t.Helper()
	m, err := ca.NewRoot(ca.SelfSignedOptions{KeyType: keyType})
	if err != nil {
		t.Fatal(err)
	}
	b, err := ca.NewBundle(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// newAuthority returns an Authority with a fresh ECDSA root and opts.
func newAuthority(t testing.TB, opts ca.Options) *ca.Authority {
	t.Helper()
	a, err := ca.New(newRootBundle(t, ca.KeyECDSAP256), opts)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func ecKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// csrPEM returns a PEM CSR signed by key asking for the given URI SANs (as
// istio-agent's CSR does: one spiffe URI) and DNS names.
func csrPEM(t testing.TB, key crypto.Signer, uris []string, dns ...string) []byte {
	t.Helper()
	tmpl := &x509.CertificateRequest{DNSNames: dns}
	for _, u := range uris {
		pu, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		tmpl.URIs = append(tmpl.URIs, pu)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

// parseChain decodes a CreateCertificate response: each element one or
// more PEM certificates.
func parseChain(t testing.TB, chain []string) (leaf *x509.Certificate, middle, roots []*x509.Certificate) {
	t.Helper()
	if len(chain) < 2 {
		t.Fatalf("chain of %d elements, want leaf ... root", len(chain))
	}
	for i, s := range chain {
		var certs []*x509.Certificate
		for rest := []byte(s); ; {
			var b *pem.Block
			if b, rest = pem.Decode(rest); b == nil {
				break
			}
			c, err := x509.ParseCertificate(b.Bytes)
			if err != nil {
				t.Fatal(err)
			}
			certs = append(certs, c)
		}
		switch {
		case i == 0:
			if len(certs) != 1 {
				t.Fatalf("leaf element has %d certificates", len(certs))
			}
			leaf = certs[0]
		case i == len(chain)-1:
			roots = certs
		default:
			if len(certs) != 1 {
				t.Fatalf("chain element %d has %d certificates", i, len(certs))
			}
			middle = append(middle, certs[0])
		}
	}
	return leaf, middle, roots
}

// verifyLeaf checks that leaf chains through middle to one of roots for
// client and server use.
func verifyLeaf(t testing.TB, leaf *x509.Certificate, middle, roots []*x509.Certificate) {
	t.Helper()
	rp, ip := x509.NewCertPool(), x509.NewCertPool()
	for _, r := range roots {
		rp.AddCert(r)
	}
	for _, c := range middle {
		ip.AddCert(c)
	}
	for _, eku := range []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: rp, Intermediates: ip, KeyUsages: []x509.ExtKeyUsage{eku}}); err != nil {
			t.Fatalf("leaf does not verify: %v", err)
		}
	}
}

// intermediateMaterial returns cacerts material of an intermediate CA
// (ECDSA) under a fresh root: ca-cert.pem, ca-key.pem, cert-chain.pem
// (intermediate then root, as Istio's tools write it) and root-cert.pem.
func intermediateMaterial(t testing.TB, rootTTL, interTTL time.Duration) ca.Material {
	t.Helper()
	rm, err := ca.NewRoot(ca.SelfSignedOptions{TTL: rootTTL})
	if err != nil {
		t.Fatal(err)
	}
	rb, err := ca.NewBundle(rm)
	if err != nil {
		t.Fatal(err)
	}
	rootKeyBlock, _ := pem.Decode(rm.KeyPEM)
	rootKey, err := x509.ParsePKCS8PrivateKey(rootKeyBlock.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	ik := ecKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(42), Subject: pkix.Name{Organization: []string{"cluster.local"}, CommonName: "intermediate"},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(interTTL),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, rb.Certificate(), ik.Public(), rootKey)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyDER, _ := x509.MarshalECPrivateKey(ik)
	return ca.Material{
		CertPEM:  certPEM,
		KeyPEM:   pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
		ChainPEM: append(append([]byte{}, certPEM...), rm.CertPEM...),
		RootsPEM: rm.CertPEM,
	}
}

func rsaKey(t testing.TB, bits int) *rsa.PrivateKey {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, bits)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// staticAuth authenticates every caller with a bearer token as one
// service account: a stand-in authenticator for signing tests.
type staticAuth struct{ ns, sa string }

func (staticAuth) Name() string { return "static" }

func (s staticAuth) Authenticate(_ context.Context, c ca.Credentials) (ca.Caller, error) {
	if c.BearerToken == "" {
		return ca.Caller{}, ca.ErrNoCredential
	}
	return ca.Caller{Namespace: s.ns, ServiceAccount: s.sa}, nil
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

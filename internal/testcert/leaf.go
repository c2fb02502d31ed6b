package testcert

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"math/big"
	"net/url"
	"testing"
	"time"
)

// Leaf returns a client and server certificate for the URI SAN uri (a
// SPIFFE ID), valid from notBefore to notAfter, signed by the CA
// certificate and PKCS#8 key caCertPEM and caKeyPEM (as SelfSigned returns
// them), with a new ECDSA P-256 key: what a mesh CA would issue, or an
// expired or foreign one it would not.
func Leaf(t testing.TB, caCertPEM, caKeyPEM []byte, uri string, notBefore, notAfter time.Time) tls.Certificate {
	t.Helper()
	cb, _ := pem.Decode(caCertPEM)
	kb, _ := pem.Decode(caKeyPEM)
	if cb == nil || kb == nil {
		t.Fatal("testcert.Leaf: CA certificate or key is not PEM")
	}
	caCert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	caKey, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(uri)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial, URIs: []*url.URL{u}, NotBefore: notBefore, NotAfter: notAfter,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
}

package ca

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"math/big"
	"time"
)

// clockSkew backdates NotBefore so that a workload whose clock is a little
// behind the CA's accepts a certificate at once (istiod uses 2 minutes).
const clockSkew = 2 * time.Minute

// parseCSR decodes and checks a PEM CSR: one CERTIFICATE REQUEST block, a
// valid self-signature, and an ECDSA P-256/P-384 or RSA 2048–8192 key.
func parseCSR(csrPEM []byte) (*x509.CertificateRequest, error) {
	block, _ := pem.Decode(csrPEM)
	if block == nil {
		return nil, fmt.Errorf("%w: no PEM block", ErrInvalidCSR)
	}
	if block.Type != "CERTIFICATE REQUEST" && block.Type != "NEW CERTIFICATE REQUEST" {
		return nil, fmt.Errorf("%w: PEM block %q, want CERTIFICATE REQUEST", ErrInvalidCSR, block.Type)
	}
	csr, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidCSR, err)
	}
	if err := csr.CheckSignature(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidCSR, err)
	}
	switch k := csr.PublicKey.(type) {
	case *ecdsa.PublicKey:
		if k.Curve != elliptic.P256() && k.Curve != elliptic.P384() {
			return nil, fmt.Errorf("%w: ECDSA curve %s, want P-256 or P-384", ErrInvalidCSR, k.Curve.Params().Name)
		}
	case *rsa.PublicKey:
		if n := k.N.BitLen(); n < 2048 || n > 8192 {
			return nil, fmt.Errorf("%w: RSA key of %d bits, want 2048 to 8192", ErrInvalidCSR, n)
		}
	default:
		return nil, fmt.Errorf("%w: unsupported key type %T", ErrInvalidCSR, csr.PublicKey)
	}
	return csr, nil
}

// checkCSRIdentity refuses a CSR that asks for any identity other than id:
// a URI SAN other than id's SPIFFE ID, or any DNS, IP or email SAN. An
// empty CSR (no SAN) is fine: the certificate carries id either way.
func checkCSRIdentity(csr *x509.CertificateRequest, id Identity) error {
	want := id.String()
	for _, u := range csr.URIs {
		if u.String() != want {
			return fmt.Errorf("%w: CSR asks for %q, caller is %q", ErrIdentityMismatch, u, want)
		}
	}
	if len(csr.DNSNames) > 0 || len(csr.IPAddresses) > 0 || len(csr.EmailAddresses) > 0 {
		return fmt.Errorf("%w: CSR asks for DNS, IP or email names %v %v %v; caller is %q",
			ErrIdentityMismatch, csr.DNSNames, csr.IPAddresses, csr.EmailAddresses, want)
	}
	return nil
}

// leafTemplate returns a workload certificate template valid from now
// (backdated by clockSkew) for ttl, clamped to the bundle's expiry.
func leafTemplate(b *Bundle, now time.Time, ttl time.Duration) (*x509.Certificate, error) {
	if !now.Before(b.notAfter) {
		return nil, fmt.Errorf("%w: the CA certificate expired at %s", ErrNotReady, b.notAfter.Format(time.RFC3339))
	}
	notAfter := now.Add(ttl)
	if notAfter.After(b.notAfter) {
		notAfter = b.notAfter
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	return &x509.Certificate{
		SerialNumber:          serial,
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
	}, nil
}

// newSerial returns a random positive 128-bit serial number.
func newSerial() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("ca: serial number: %w", err)
	}
	return n.Add(n, big.NewInt(1)), nil
}

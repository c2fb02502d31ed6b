package ca

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"time"
)

// Material is CA material as PEM, in the shape of Istio's cacerts files and
// istio-ca-secret keys: the signing certificate (ca-cert.pem) and its key
// (ca-key.pem), the chain from the signing certificate towards the root
// (cert-chain.pem, may be empty or include the signing certificate and the
// root), and the trusted roots (root-cert.pem, one or more certificates).
type Material struct {
	CertPEM  []byte
	KeyPEM   []byte
	ChainPEM []byte
	RootsPEM []byte
}

// Bundle is the CA's parsed, verified signing material. It is immutable:
// the Authority replaces it whole on reload or rotation, so a signature in
// flight always sees one consistent bundle.
type Bundle struct {
	signer crypto.Signer
	cert   *x509.Certificate // signs workload certificates
	// path is cert's verified chain without its root: cert first, then
	// the intermediates. It is the middle of every response.
	path     []*x509.Certificate
	roots    []*x509.Certificate // every trusted root, the root bundle
	rootPool *x509.CertPool
	inter    []*x509.Certificate // path without a self-signed signing certificate
	interPEM []string            // inter as PEM, one certificate each
	rootsPEM string              // roots as one PEM string, the last element of every response
	notAfter time.Time
	material Material
}

// NewBundle parses and verifies CA material: the key must match the
// certificate, the certificate must be a CA allowed to sign certificates,
// and it must chain (through ChainPEM) to one of the roots. Roots that have
// expired are dropped from the bundle unless none would be left (then the
// bundle is refused: nothing it signs would verify).
func NewBundle(m Material) (*Bundle, error) {
	certs, err := parseCerts(m.CertPEM)
	if err != nil || len(certs) == 0 {
		return nil, fmt.Errorf("%w: signing certificate: %v", ErrInvalidBundle, errOrEmpty(err))
	}
	cert := certs[0]
	if !cert.IsCA || cert.KeyUsage != 0 && cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, fmt.Errorf("%w: signing certificate %q is not a CA allowed to sign certificates", ErrInvalidBundle, cert.Subject)
	}
	signer, err := parseKey(m.KeyPEM)
	if err != nil {
		return nil, fmt.Errorf("%w: signing key: %v", ErrInvalidBundle, err)
	}
	if !publicKeysEqual(signer.Public(), cert.PublicKey) {
		return nil, fmt.Errorf("%w: the signing key does not match the signing certificate", ErrInvalidBundle)
	}
	chain, err := parseCerts(m.ChainPEM)
	if err != nil {
		return nil, fmt.Errorf("%w: certificate chain: %v", ErrInvalidBundle, err)
	}
	allRoots, err := parseCerts(m.RootsPEM)
	if err != nil || len(allRoots) == 0 {
		return nil, fmt.Errorf("%w: root certificates: %v", ErrInvalidBundle, errOrEmpty(err))
	}
	now := time.Now()
	var roots []*x509.Certificate
	for _, r := range allRoots {
		if now.Before(r.NotAfter) && !containsCert(roots, r) {
			roots = append(roots, r)
		}
	}
	if len(roots) == 0 {
		return nil, fmt.Errorf("%w: every root certificate has expired", ErrInvalidBundle)
	}
	b := &Bundle{signer: signer, cert: cert, roots: roots, rootPool: x509.NewCertPool()}
	for _, r := range roots {
		b.rootPool.AddCert(r)
	}
	inter := x509.NewCertPool()
	for _, c := range chain {
		inter.AddCert(c)
	}
	chains, err := cert.Verify(x509.VerifyOptions{
		Roots: b.rootPool, Intermediates: inter, CurrentTime: now,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny},
	})
	if err != nil {
		return nil, fmt.Errorf("%w: the signing certificate does not chain to a root: %v", ErrInvalidBundle, err)
	}
	full := chains[0]
	b.path = full[:len(full)-1]
	if len(b.path) == 0 { // the signing certificate is a root itself
		b.path = full
	}
	b.notAfter = full[0].NotAfter
	for _, c := range full {
		if c.NotAfter.Before(b.notAfter) {
			b.notAfter = c.NotAfter
		}
	}
	for _, c := range b.path {
		if c.Equal(full[len(full)-1]) {
			continue // a self-signed signing certificate is sent once, as the root
		}
		b.inter = append(b.inter, c)
		b.interPEM = append(b.interPEM, string(encodeCert(c)))
	}
	var rp bytes.Buffer
	for _, r := range roots {
		rp.Write(encodeCert(r))
	}
	b.rootsPEM = rp.String()
	b.material = Material{
		CertPEM: bytes.Clone(m.CertPEM), KeyPEM: bytes.Clone(m.KeyPEM),
		ChainPEM: bytes.Clone(m.ChainPEM), RootsPEM: bytes.Clone(m.RootsPEM),
	}
	return b, nil
}

// Certificate returns the signing certificate.
func (b *Bundle) Certificate() *x509.Certificate { return b.cert }

// Roots returns the trusted roots. The caller must not modify them.
func (b *Bundle) Roots() []*x509.Certificate { return b.roots }

// RootPool returns the trusted roots as a pool, shared: do not modify.
func (b *Bundle) RootPool() *x509.CertPool { return b.rootPool }

// RootsPEM returns the trusted roots, concatenated PEM: what Istio
// distributes as root-cert.pem.
func (b *Bundle) RootsPEM() []byte { return []byte(b.rootsPEM) }

// NotAfter returns when the first certificate on the signing path (signing
// certificate, intermediates, root) expires; nothing signed may outlive it.
func (b *Bundle) NotAfter() time.Time { return b.notAfter }

// Material returns the PEM the bundle was built from, as given (RootsPEM
// may still hold roots that have expired; RootsPEM() has the trusted ones).
func (b *Bundle) Material() Material { return b.material }

// parseCerts decodes every CERTIFICATE block of data; other blocks are an
// error, surrounding text is ignored as openssl's output has it.
func parseCerts(data []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return out, nil
		}
		if block.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("unexpected PEM block %q", block.Type)
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
}

// parseKey decodes a PKCS#8, SEC 1 (EC) or PKCS#1 (RSA) private key.
func parseKey(data []byte) (crypto.Signer, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, errors.New("no PEM block")
	}
	var key any
	var err error
	switch block.Type {
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	default:
		return nil, fmt.Errorf("unexpected PEM block %q", block.Type)
	}
	if err != nil {
		return nil, err
	}
	s, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("unsupported key type %T", key)
	}
	return s, nil
}

func publicKeysEqual(a, b crypto.PublicKey) bool {
	switch k := a.(type) {
	case *ecdsa.PublicKey:
		return k.Equal(b)
	case *rsa.PublicKey:
		return k.Equal(b)
	case ed25519.PublicKey:
		return k.Equal(b)
	}
	return false
}

func containsCert(list []*x509.Certificate, c *x509.Certificate) bool {
	for _, x := range list {
		if x.Equal(c) {
			return true
		}
	}
	return false
}

func encodeCert(c *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
}

func errOrEmpty(err error) error {
	if err != nil {
		return err
	}
	return errors.New("no certificate found")
}

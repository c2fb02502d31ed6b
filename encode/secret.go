package encode

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"strings"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
)

// Gateway credentials (SDS of credentialName secrets).
//
// A gateway listener names its certificate "kubernetes://NAME" and, for
// MUTUAL, its client CA "kubernetes://NAME-cacert" (gateway_listener.go).
// The proxy asks for those names over ADS; the control plane answers with an
// envoy Secret built from the Kubernetes Secret NAME in the proxy's own
// namespace. The key names are istiod's (pilot/pkg/credentials/kube):
// kubernetes.io/tls secrets hold tls.crt, tls.key and ca.crt (ca.crl), and
// generic secrets cert, key and cacert (crl).

// CredentialPrefix starts every credential resource name; CredentialCASuffix
// ends the name of a credential's CA bundle.
const (
	CredentialPrefix   = "kubernetes://"
	CredentialCASuffix = "-cacert"
)

// Sentinel errors of credential resolution; the serving layer maps them to
// a refusal of the resource, never to a crash of the stream.
var (
	ErrCredentialName      = errors.New("invalid credential resource name")
	ErrCredentialNamespace = errors.New("credential is outside the proxy's namespace")
	ErrCredentialKeys      = errors.New("secret lacks the credential keys")
	ErrCredentialPEM       = errors.New("secret holds an invalid certificate or key")
)

// CredentialKeys are the only Secret data keys a credential is built from;
// a Secret informer's transform keeps these and drops the rest, so the index
// holds no unrelated secret material.
var CredentialKeys = []string{"tls.crt", "tls.key", "ca.crt", "ca.crl", "cert", "key", "cacert", "crl"}

// KeepCredentialKeys returns data restricted to CredentialKeys (nil when none
// is present: the Secret is not a credential).
func KeepCredentialKeys(data map[string][]byte) map[string][]byte {
	var out map[string][]byte
	for _, k := range CredentialKeys {
		if v, ok := data[k]; ok {
			if out == nil {
				out = make(map[string][]byte, 4)
			}
			out[k] = v
		}
	}
	return out
}

// CredentialRef is a parsed credential resource name.
type CredentialRef struct {
	Namespace string // the Secret's namespace
	Name      string // the Secret's name, without the -cacert suffix
	CA        bool   // the resource is the CA bundle (NAME-cacert)
}

// ParseCredentialName parses "kubernetes://NAME[-cacert]" or
// "kubernetes://NS/NAME[-cacert]" as requested by a proxy in proxyNS. A
// name in another namespace is refused: as istiod does, a proxy only gets
// the Secrets of its own namespace.
func ParseCredentialName(resource, proxyNS string) (CredentialRef, error) {
	rest, ok := strings.CutPrefix(resource, CredentialPrefix)
	if !ok || rest == "" {
		return CredentialRef{}, fmt.Errorf("%w %q: want %sNAME", ErrCredentialName, resource, CredentialPrefix)
	}
	ref := CredentialRef{Namespace: proxyNS, Name: rest}
	if ns, name, found := strings.Cut(rest, "/"); found {
		if ns == "" || name == "" || strings.Contains(name, "/") {
			return CredentialRef{}, fmt.Errorf("%w %q: want %sNAMESPACE/NAME", ErrCredentialName, resource, CredentialPrefix)
		}
		ref.Namespace, ref.Name = ns, name
	}
	if ref.Namespace != proxyNS {
		return CredentialRef{}, fmt.Errorf("%w: %q is in namespace %q, the proxy in %q", ErrCredentialNamespace, resource, ref.Namespace, proxyNS)
	}
	if n, isCA := strings.CutSuffix(ref.Name, CredentialCASuffix); isCA && n != "" {
		ref.Name, ref.CA = n, true
	}
	return ref, nil
}

// Credential is a Secret's credential material, checked once when the
// Secret changes so that serving it is only building the envoy message. The
// PEM is verified (the chain parses and matches the key; the CA parses) so
// a broken Secret is refused with the field at fault instead of reaching the
// proxy. Immutable after ParseCredential.
type Credential struct {
	ID             string // "ns/name", for errors; never the material
	Cert, Key      []byte
	CA, CRL        []byte
	CertErr, CAErr error // why Cert/Key or CA cannot be served
}

// ParseCredential checks a Secret's data (restricted to CredentialKeys or
// not). A Secret may hold only a certificate, only a CA, or both; the
// missing half is an error kept for the resource that asks for it.
func ParseCredential(secretID string, data map[string][]byte) *Credential {
	c := &Credential{ID: secretID}
	c.Cert, c.Key, c.CertErr = credentialCert(secretID, data)
	c.CA, c.CRL, c.CAErr = credentialRoot(secretID, data)
	return c
}

// Secret is the envoy Secret named resource: a TlsCertificate (chain and
// key inline), or for a CA reference a ValidationContext (trusted CA and
// CRL inline), as istiod's SDS builds them.
func (c *Credential) Secret(resource string, ca bool) (*tlsv3.Secret, error) {
	if ca {
		if c.CAErr != nil {
			return nil, c.CAErr
		}
		vc := &tlsv3.CertificateValidationContext{TrustedCa: inlineBytes(c.CA)}
		if len(c.CRL) > 0 {
			vc.Crl = inlineBytes(c.CRL)
		}
		return &tlsv3.Secret{Name: resource, Type: &tlsv3.Secret_ValidationContext{ValidationContext: vc}}, nil
	}
	if c.CertErr != nil {
		return nil, c.CertErr
	}
	return &tlsv3.Secret{Name: resource, Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: &tlsv3.TlsCertificate{
		CertificateChain: inlineBytes(c.Cert),
		PrivateKey:       inlineBytes(c.Key),
	}}}, nil
}

// BuildCredentialSecret is ParseCredential then Secret, for one-off use.
func BuildCredentialSecret(resource, secretID string, ca bool, data map[string][]byte) (*tlsv3.Secret, error) {
	return ParseCredential(secretID, data).Secret(resource, ca)
}

// HasCredentialRoot reports whether data holds a CA bundle; a NAME-cacert
// request falls back to Secret NAME's CA when no Secret NAME-cacert exists.
func HasCredentialRoot(data map[string][]byte) bool {
	return len(data["cacert"]) > 0 || len(data["ca.crt"]) > 0
}

func credentialCert(id string, data map[string][]byte) (cert, key []byte, err error) {
	certField, keyField := "tls.crt", "tls.key"
	if len(data[certField]) == 0 || len(data[keyField]) == 0 {
		certField, keyField = "cert", "key"
	}
	cert, key = data[certField], data[keyField]
	if len(cert) == 0 || len(key) == 0 {
		return nil, nil, fmt.Errorf("secret %s: %w: want (tls.crt and tls.key) or (cert and key), found %s", id, ErrCredentialKeys, presentKeys(data))
	}
	if _, err := tls.X509KeyPair(cert, key); err != nil {
		// The tls error text names no key material.
		return nil, nil, fmt.Errorf("secret %s: %s/%s: %w: %v", id, certField, keyField, ErrCredentialPEM, err)
	}
	return cert, key, nil
}

func credentialRoot(id string, data map[string][]byte) (root, crl []byte, err error) {
	field, crlField := "cacert", "crl"
	if len(data[field]) == 0 {
		field, crlField = "ca.crt", "ca.crl"
	}
	root = data[field]
	if len(root) == 0 {
		return nil, nil, fmt.Errorf("secret %s: %w: want cacert or ca.crt, found %s", id, ErrCredentialKeys, presentKeys(data))
	}
	if err := checkCertPEM(root); err != nil {
		return nil, nil, fmt.Errorf("secret %s: %s: %w: %v", id, field, ErrCredentialPEM, err)
	}
	return root, data[crlField], nil
}

// checkCertPEM requires at least one CERTIFICATE block and that every one
// parses.
func checkCertPEM(b []byte) error {
	n := 0
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		if _, err := x509.ParseCertificate(blk.Bytes); err != nil {
			return err
		}
		n++
	}
	if n == 0 {
		return errors.New("no PEM CERTIFICATE block")
	}
	return nil
}

func presentKeys(data map[string][]byte) string {
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return "[" + strings.Join(keys, " ") + "]"
}

func inlineBytes(b []byte) *core.DataSource {
	return &core.DataSource{Specifier: &core.DataSource_InlineBytes{InlineBytes: b}}
}

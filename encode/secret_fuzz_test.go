package encode_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/pilotfish-mesh/pilotfish/encode"

	"github.com/pilotfish-mesh/pilotfish/internal/testcert"
)

// FuzzParseCredentialName: a proxy's requested name is outside input. It
// never panics, and an accepted name is always in the proxy's namespace.
func FuzzParseCredentialName(f *testing.F) {
	for _, s := range []string{"kubernetes://a", "kubernetes://ns/a-cacert", "kubernetes://", "kubernetes:///", "default", "kubernetes://x/y/z", "kubernetes://-cacert"} {
		f.Add(s, "ns")
	}
	f.Fuzz(func(t *testing.T, resource, ns string) {
		ref, err := encode.ParseCredentialName(resource, ns)
		if err != nil {
			if !errors.Is(err, encode.ErrCredentialName) && !errors.Is(err, encode.ErrCredentialNamespace) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		if ref.Namespace != ns || ref.Name == "" || !strings.HasPrefix(resource, encode.CredentialPrefix) {
			t.Fatalf("accepted %q as %+v", resource, ref)
		}
	})
}

// FuzzBuildCredentialSecret: Secret data is outside input. A Secret either
// yields a valid envoy Secret or a classified error; never a panic.
func FuzzBuildCredentialSecret(f *testing.F) {
	cert, key := testcert.SelfSigned(f, "seed")
	f.Add(cert, key, cert, false)
	f.Add(cert, key, cert, true)
	f.Add([]byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"), []byte("k"), []byte(""), true)
	f.Fuzz(func(t *testing.T, c, k, ca []byte, isCA bool) {
		s, err := encode.BuildCredentialSecret("kubernetes://f", "ns/f", isCA, map[string][]byte{"tls.crt": c, "tls.key": k, "ca.crt": ca})
		if err != nil {
			if !errors.Is(err, encode.ErrCredentialKeys) && !errors.Is(err, encode.ErrCredentialPEM) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		if err := s.ValidateAll(); err != nil {
			t.Fatalf("invalid secret: %v", err)
		}
	})
}

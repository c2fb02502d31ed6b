package ca_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pilotfish-mesh/pilotfish/ca"
)

const reviewsID = "spiffe://cluster.local/ns/shop/sa/reviews"

var reviews = ca.Identity{TrustDomain: "cluster.local", Namespace: "shop", ServiceAccount: "reviews"}

func TestSignKeysAndChain(t *testing.T) {
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	for _, tc := range []struct {
		name string
		root string
		key  crypto.Signer
	}{
		{"ecdsa-root/ecdsa-p256", ca.KeyECDSAP256, ecKey(t)},
		{"ecdsa-root/ecdsa-p384", ca.KeyECDSAP256, p384},
		{"ecdsa-root/rsa-2048", ca.KeyECDSAP256, rsaKey(t, 2048)},
		{"rsa-root/ecdsa-p256", ca.KeyRSA2048, ecKey(t)},
		{"rsa-root/rsa-2048", ca.KeyRSA2048, rsaKey(t, 2048)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := ca.New(newRootBundle(t, tc.root), ca.Options{})
			if err != nil {
				t.Fatal(err)
			}
			chain, err := a.Sign(reviews, csrPEM(t, tc.key, []string{reviewsID}), 0)
			if err != nil {
				t.Fatal(err)
			}
			// istiod's shape: leaf first, root last.
			if len(chain) != 2 {
				t.Fatalf("chain of %d, want leaf and root", len(chain))
			}
			leaf, middle, roots := parseChain(t, chain)
			verifyLeaf(t, leaf, middle, roots)
			if len(leaf.URIs) != 1 || leaf.URIs[0].String() != reviewsID {
				t.Errorf("URIs %v, want %s", leaf.URIs, reviewsID)
			}
			if leaf.IsCA {
				t.Error("leaf is a CA")
			}
			if got := leaf.NotAfter.Sub(leaf.NotBefore); got != 24*time.Hour+2*time.Minute {
				t.Errorf("lifetime %s, want the default 24h (+2m backdating)", got)
			}
			if !leaf.PublicKey.(interface{ Equal(crypto.PublicKey) bool }).Equal(tc.key.Public()) {
				t.Error("leaf key is not the CSR's")
			}
			if string(a.Bundle().RootsPEM()) != chain[len(chain)-1] {
				t.Error("last element is not the root bundle")
			}
		})
	}
}

func TestSignTTL(t *testing.T) {
	a := newAuthority(t, ca.Options{DefaultTTL: time.Hour, MaxTTL: 48 * time.Hour})
	key := ecKey(t)
	for _, tc := range []struct {
		name string
		ttl  time.Duration
		want time.Duration
		err  error
	}{
		{"default", 0, time.Hour, nil},
		{"negative is default", -time.Second, time.Hour, nil},
		{"asked", 10 * time.Minute, 10 * time.Minute, nil},
		{"at the maximum", 48 * time.Hour, 48 * time.Hour, nil},
		{"above the maximum", 48*time.Hour + time.Second, 0, ca.ErrTTL},
	} {
		t.Run(tc.name, func(t *testing.T) {
			chain, err := a.Sign(reviews, csrPEM(t, key, []string{reviewsID}), tc.ttl)
			if !errors.Is(err, tc.err) {
				t.Fatalf("err %v, want %v", err, tc.err)
			}
			if err != nil {
				if chain != nil {
					t.Fatal("chain returned with an error")
				}
				return
			}
			leaf, _, _ := parseChain(t, chain)
			if got := leaf.NotAfter.Sub(leaf.NotBefore) - 2*time.Minute; got != tc.want {
				t.Errorf("lifetime %s, want %s", got, tc.want)
			}
		})
	}
}

// A certificate never outlives the CA: the TTL is clamped to the first
// expiry on the signing path (here an intermediate expiring in an hour).
func TestSignClampedToCAExpiry(t *testing.T) {
	m := intermediateMaterial(t, 24*time.Hour, time.Hour)
	b, err := ca.NewBundle(m)
	if err != nil {
		t.Fatal(err)
	}
	a, err := ca.New(b, ca.Options{})
	if err != nil {
		t.Fatal(err)
	}
	chain, err := a.Sign(reviews, csrPEM(t, ecKey(t), []string{reviewsID}), 0)
	if err != nil {
		t.Fatal(err)
	}
	leaf, middle, roots := parseChain(t, chain)
	if !leaf.NotAfter.Equal(b.Certificate().NotAfter) {
		t.Errorf("leaf NotAfter %s, want the intermediate's %s", leaf.NotAfter, b.Certificate().NotAfter)
	}
	// leaf, intermediate, root: the root of cert-chain.pem is not repeated.
	if len(chain) != 3 || len(middle) != 1 || !middle[0].Equal(b.Certificate()) || len(roots) != 1 {
		t.Fatalf("chain %d elements (middle %d, roots %d), want leaf, intermediate, root", len(chain), len(middle), len(roots))
	}
	verifyLeaf(t, leaf, middle, roots)
}

func TestSignRefused(t *testing.T) {
	a := newAuthority(t, ca.Options{MaxCSRBytes: 4096})
	key := ecKey(t)
	good := csrPEM(t, key, []string{reviewsID})
	tampered := []byte(strings.Clone(string(good)))
	{
		block, _ := pem.Decode(good)
		block.Bytes[len(block.Bytes)-3] ^= 0xff // the signature
		tampered = pem.EncodeToMemory(block)
	}
	p224, _ := ecdsa.GenerateKey(elliptic.P224(), rand.Reader)
	_, ed, _ := ed25519.GenerateKey(rand.Reader)
	for _, tc := range []struct {
		name string
		csr  []byte
		ttl  time.Duration
		want error
	}{
		{"another service account", csrPEM(t, key, []string{"spiffe://cluster.local/ns/shop/sa/admin"}), 0, ca.ErrIdentityMismatch},
		{"another trust domain", csrPEM(t, key, []string{"spiffe://evil.example/ns/shop/sa/reviews"}), 0, ca.ErrIdentityMismatch},
		{"two identities", csrPEM(t, key, []string{reviewsID, "spiffe://cluster.local/ns/kube-system/sa/admin"}), 0, ca.ErrIdentityMismatch},
		{"a DNS name", csrPEM(t, key, []string{reviewsID}, "api.example.com"), 0, ca.ErrIdentityMismatch},
		{"not PEM", []byte("hello"), 0, ca.ErrInvalidCSR},
		{"empty", nil, 0, ca.ErrInvalidCSR},
		{"a certificate, not a CSR", a.Bundle().RootsPEM(), 0, ca.ErrInvalidCSR},
		{"garbage DER", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: []byte{0x30, 0x03, 1, 2, 3}}), 0, ca.ErrInvalidCSR},
		{"bad signature", tampered, 0, ca.ErrInvalidCSR},
		{"RSA 1024", csrPEM(t, rsaKey(t, 1024), []string{reviewsID}), 0, ca.ErrInvalidCSR},
		{"P-224", csrPEM(t, p224, []string{reviewsID}), 0, ca.ErrInvalidCSR},
		{"ed25519", csrPEM(t, ed, []string{reviewsID}), 0, ca.ErrInvalidCSR},
		{"oversized", append(good, make([]byte, 4096)...), 0, ca.ErrCSRTooLarge},
		{"excessive TTL", good, 91 * 24 * time.Hour, ca.ErrTTL},
	} {
		t.Run(tc.name, func(t *testing.T) {
			chain, err := a.Sign(reviews, tc.csr, tc.ttl)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
			if chain != nil {
				t.Fatal("something was signed")
			}
		})
	}
}

// A CSR without any SAN is fine: the certificate carries the caller's
// identity either way (istiod ignores the CSR's SANs altogether).
func TestSignCSRWithoutSAN(t *testing.T) {
	a := newAuthority(t, ca.Options{})
	chain, err := a.Sign(reviews, csrPEM(t, ecKey(t), nil), 0)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _, _ := parseChain(t, chain)
	if leaf.URIs[0].String() != reviewsID {
		t.Errorf("URI %s", leaf.URIs[0])
	}
}

func TestCreateCertificateAuthenticates(t *testing.T) {
	a := newAuthority(t, ca.Options{TrustDomain: "mesh.example", Authenticators: []ca.Authenticator{staticAuth{"shop", "reviews"}}})
	key := ecKey(t)
	id := "spiffe://mesh.example/ns/shop/sa/reviews"
	if _, _, err := a.CreateCertificate(context.Background(), ca.Request{CSRPEM: csrPEM(t, key, []string{id})}); !errors.Is(err, ca.ErrUnauthenticated) {
		t.Fatalf("no credentials: err %v, want ErrUnauthenticated", err)
	}
	chain, got, err := a.CreateCertificate(context.Background(), ca.Request{
		Credentials: ca.Credentials{BearerToken: "x"}, CSRPEM: csrPEM(t, key, []string{id}),
	})
	if err != nil {
		t.Fatal(err)
	}
	if got.String() != id {
		t.Errorf("identity %s, want %s", got, id)
	}
	leaf, _, _ := parseChain(t, chain)
	if leaf.URIs[0].String() != id {
		t.Errorf("URI %s", leaf.URIs[0])
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	b := newRootBundle(t, ca.KeyECDSAP256)
	for name, o := range map[string]ca.Options{
		"trust domain with a path":  {TrustDomain: "a/b"},
		"default above the maximum": {DefaultTTL: 2 * time.Hour, MaxTTL: time.Hour},
	} {
		if _, err := ca.New(b, o); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := ca.New(nil, ca.Options{}); err == nil {
		t.Error("nil bundle accepted")
	}
}

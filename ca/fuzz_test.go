package ca_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pilotfish-mesh/pilotfish/ca"
)

// FuzzCreateCertificate feeds arbitrary CSR bytes and validity to the
// signing path of an authenticated caller. Whatever the input: no panic;
// either a certificate for exactly the caller's identity that verifies, or
// an error wrapping one of the sentinels and nothing signed.
func FuzzCreateCertificate(f *testing.F) {
	a := newAuthority(f, ca.Options{Authenticators: []ca.Authenticator{staticAuth{"shop", "reviews"}}, MaxCSRBytes: 16 << 10})
	ec, rsa2048 := ecKey(f), rsaKey(f, 2048)
	f.Add(csrPEM(f, ec, []string{reviewsID}), int64(3600))
	f.Add(csrPEM(f, ec, nil), int64(0))
	f.Add(csrPEM(f, rsa2048, []string{reviewsID}), int64(-1))
	f.Add(csrPEM(f, ec, []string{"spiffe://cluster.local/ns/kube-system/sa/admin"}), int64(60))
	f.Add(csrPEM(f, ec, []string{reviewsID}, "evil.example"), int64(60))
	f.Add(csrPEM(f, ec, []string{"spiffe://cluster.local/ns/shop/sa/reviews?x=1"}), int64(60))
	f.Add([]byte("-----BEGIN CERTIFICATE REQUEST-----\nMAA=\n-----END CERTIFICATE REQUEST-----\n"), int64(60))
	f.Add([]byte{}, int64(1<<40))
	sentinels := []error{ca.ErrInvalidCSR, ca.ErrCSRTooLarge, ca.ErrTTL, ca.ErrIdentityMismatch}
	f.Fuzz(func(t *testing.T, csr []byte, secs int64) {
		secs = max(min(secs, 1<<32), -1<<32) // as serve caps validity_duration
		chain, id, err := a.CreateCertificate(context.Background(), ca.Request{
			Credentials: ca.Credentials{BearerToken: "t"}, CSRPEM: csr, TTL: time.Duration(secs) * time.Second,
		})
		if err != nil {
			if chain != nil {
				t.Fatal("chain with an error")
			}
			for _, s := range sentinels {
				if errors.Is(err, s) {
					return
				}
			}
			t.Fatalf("error wraps no sentinel: %v", err)
		}
		if id.String() != reviewsID {
			t.Fatalf("identity %s", id)
		}
		leaf, middle, roots := parseChain(t, chain)
		if len(leaf.URIs) != 1 || leaf.URIs[0].String() != reviewsID || len(leaf.DNSNames)+len(leaf.IPAddresses)+len(leaf.EmailAddresses) != 0 {
			t.Fatalf("leaf names %v %v %v %v", leaf.URIs, leaf.DNSNames, leaf.IPAddresses, leaf.EmailAddresses)
		}
		if leaf.IsCA {
			t.Fatal("a CA certificate was issued")
		}
		if leaf.NotAfter.Sub(leaf.NotBefore) > ca.DefaultMaxTTL+3*time.Minute {
			t.Fatalf("lifetime %s", leaf.NotAfter.Sub(leaf.NotBefore))
		}
		verifyLeaf(t, leaf, middle, roots)
	})
}

// FuzzJWTAuthenticate: arbitrary bearer tokens never panic and are never
// accepted (the fuzzer cannot sign with the issuer's key).
func FuzzJWTAuthenticate(f *testing.F) {
	key := ecKey(f)
	a, err := ca.NewJWTAuthenticator([]ca.JWTRule{{Issuer: testIssuer, Audiences: []string{"istio-ca"}, JWKS: jwksOfTB(f, key, "k1")}})
	if err != nil {
		f.Fatal(err)
	}
	f.Add("eyJhbGciOiJFUzI1NiIsImtpZCI6ImsxIn0.eyJpc3MiOiJodHRwczovL2lzc3Vlci5leGFtcGxlIiwic3ViIjoic3lzdGVtOnNlcnZpY2VhY2NvdW50OnNob3A6cmV2aWV3cyIsImF1ZCI6WyJpc3Rpby1jYSJdfQ.AAAA")
	f.Add("eyJhbGciOiJub25lIn0.eyJpc3MiOiJodHRwczovL2lzc3Vlci5leGFtcGxlIn0.")
	f.Add("a.b.c")
	f.Add("")
	f.Fuzz(func(t *testing.T, tok string) {
		if c, err := a.Authenticate(context.Background(), ca.Credentials{BearerToken: tok}); err == nil {
			t.Fatalf("accepted an unsigned token as %+v", c)
		}
	})
}

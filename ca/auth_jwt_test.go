package ca_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/pilotfish-mesh/pilotfish/ca"
)

const testIssuer = "https://issuer.example"

// signJWT signs claims with key (ES256 for ECDSA, RS256 for RSA) under kid
// ("" for none).
func signJWT(t *testing.T, key any, kid string, claims any) string {
	t.Helper()
	alg := jose.ES256
	if _, ok := key.(*rsa.PrivateKey); ok {
		alg = jose.RS256
	}
	opts := (&jose.SignerOptions{}).WithType("JWT")
	if kid != "" {
		opts = opts.WithHeader("kid", kid)
	}
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, opts)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(sig).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func claims(sub string, aud []string, exp time.Duration) jwt.Claims {
	now := time.Now()
	return jwt.Claims{Issuer: testIssuer, Subject: sub, Audience: aud,
		IssuedAt: jwt.NewNumericDate(now), Expiry: jwt.NewNumericDate(now.Add(exp))}
}

func jwksOf(t *testing.T, key any, kid string) string {
	t.Helper()
	return jwksOfTB(t, key, kid)
}

func jwksOfTB(t testing.TB, key any, kid string) string {
	t.Helper()
	var pub any
	switch k := key.(type) {
	case *ecdsa.PrivateKey:
		pub = &k.PublicKey
	case *rsa.PrivateKey:
		pub = &k.PublicKey
	}
	s, err := ca.JWKSFromKeys(jose.JSONWebKey{Key: pub, KeyID: kid})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestJWTAuthenticator(t *testing.T) {
	key, other, rkey := ecKey(t), ecKey(t), rsaKey(t, 2048)
	rule := func(iss, jwks string, aud ...string) ca.JWTRule {
		return ca.JWTRule{Issuer: iss, Audiences: aud, JWKS: jwks}
	}
	a, err := ca.NewJWTAuthenticator([]ca.JWTRule{
		rule(testIssuer, jwksOf(t, key, "k1"), "istio-ca"),
		rule("https://rsa.example", jwksOf(t, rkey, "r1"), "istio-ca", "other"),
	})
	if err != nil {
		t.Fatal(err)
	}
	sa := "system:serviceaccount:shop:reviews"
	aud := []string{"istio-ca"}
	noExp := claims(sa, aud, time.Hour)
	noExp.Expiry = nil
	rsaClaims := claims(sa, []string{"other"}, time.Hour)
	rsaClaims.Issuer = "https://rsa.example"
	unknown := claims(sa, aud, time.Hour)
	unknown.Issuer = "https://unknown.example"
	future := claims(sa, aud, time.Hour)
	future.NotBefore = jwt.NewNumericDate(time.Now().Add(time.Hour))
	hmac, _ := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: []byte("0123456789abcdef0123456789abcdef")}, nil)
	hmacTok, _ := jwt.Signed(hmac).Claims(claims(sa, aud, time.Hour)).Serialize()

	for _, tc := range []struct {
		name, token string
		ok          bool
		why         string
	}{
		{"valid", signJWT(t, key, "k1", claims(sa, aud, time.Hour)), true, ""},
		{"valid without kid", signJWT(t, key, "", claims(sa, aud, time.Hour)), true, ""},
		{"valid RSA, second audience", signJWT(t, rkey, "r1", rsaClaims), true, ""},
		{"wrong audience", signJWT(t, key, "k1", claims(sa, []string{"kubernetes"}, time.Hour)), false, "audience"},
		{"expired", signJWT(t, key, "k1", claims(sa, aud, -2*time.Minute)), false, "expired"},
		{"not yet valid", signJWT(t, key, "k1", future), false, "not valid yet"},
		{"no exp", signJWT(t, key, "k1", noExp), false, "no exp"},
		{"forged: another key, same kid", signJWT(t, other, "k1", claims(sa, aud, time.Hour)), false, "signature"},
		{"forged: another key, no kid", signJWT(t, other, "", claims(sa, aud, time.Hour)), false, "signature"},
		{"unknown kid", signJWT(t, key, "k2", claims(sa, aud, time.Hour)), false, "kid"},
		{"unknown issuer", signJWT(t, key, "k1", unknown), false, "unknown issuer"},
		{"HMAC", hmacTok, false, "not a signed JWT"},
		{"sub not a service account", signJWT(t, key, "k1", claims("alice", aud, time.Hour)), false, "sub"},
		{"sub with extra parts", signJWT(t, key, "k1", claims(sa+":x", aud, time.Hour)), false, "sub"},
		{"sub with a slash", signJWT(t, key, "k1", claims("system:serviceaccount:shop/x:reviews", aud, time.Hour)), false, "sub"},
		{"garbage", "a.b.c", false, "not a signed JWT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := a.Authenticate(context.Background(), ca.Credentials{BearerToken: tc.token})
			if tc.ok {
				if err != nil {
					t.Fatal(err)
				}
				if c.Namespace != "shop" || c.ServiceAccount != "reviews" {
					t.Fatalf("caller %+v", c)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted as %+v", c)
			}
			if !strings.Contains(err.Error(), tc.why) {
				t.Errorf("error %q does not say %q", err, tc.why)
			}
		})
	}
	if _, err := a.Authenticate(context.Background(), ca.Credentials{}); !errors.Is(err, ca.ErrNoCredential) {
		t.Errorf("no token: %v, want ErrNoCredential", err)
	}
}

func TestParseJWTRules(t *testing.T) {
	jwks := jwksOf(t, ecKey(t), "k1")
	jwksJSON, _ := json.Marshal(jwks)
	for _, tc := range []struct {
		name, in string
		n        int
		ok       bool
	}{
		{"empty", "", 0, true},
		{"istiod's single object", `{"issuer": "a", "audiences": ["istio-ca"], "jwks": ` + string(jwksJSON) + `}`, 1, true},
		{"list", `[{"issuer": "a", "audiences": ["x"], "jwks_uri": "file:///k"}, {"issuer": "b", "audiences": ["x"], "jwksUri": "file:///k"}]`, 2, true},
		{"unknown fields ignored", `{"issuer": "a", "audiences": ["x"], "jwks_uri": "file:///k", "forward_original_token": true}`, 1, true},
		{"no issuer", `{"audiences": ["x"], "jwks_uri": "file:///k"}`, 0, false},
		{"no audiences", `{"issuer": "a", "jwks_uri": "file:///k"}`, 0, false},
		{"no keys", `{"issuer": "a", "audiences": ["x"]}`, 0, false},
		{"both keys", `{"issuer": "a", "audiences": ["x"], "jwks_uri": "file:///k", "jwks": "{}"}`, 0, false},
		{"duplicate issuer", `[{"issuer": "a", "audiences": ["x"], "jwks_uri": "file:///k"}, {"issuer": "a", "audiences": ["x"], "jwks_uri": "file:///k"}]`, 0, false},
		{"not JSON", `issuer=a`, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rules, err := ca.ParseJWTRules(tc.in)
			if (err == nil) != tc.ok {
				t.Fatalf("err %v, want ok=%t", err, tc.ok)
			}
			if err != nil && !errors.Is(err, ca.ErrInvalidRule) {
				t.Errorf("err %v does not wrap ErrInvalidRule", err)
			}
			if len(rules) != tc.n {
				t.Errorf("%d rules, want %d", len(rules), tc.n)
			}
		})
	}
	for _, uri := range []string{"https://issuer.example/jwks", "http://x/jwks", "file://"} {
		if _, err := ca.NewJWTAuthenticator([]ca.JWTRule{{Issuer: "a", Audiences: []string{"x"}, JWKSURI: uri}}); err == nil {
			t.Errorf("jwks_uri %q accepted: only file:// is supported", uri)
		}
	}
	if _, err := ca.NewJWTAuthenticator([]ca.JWTRule{{Issuer: "a", Audiences: []string{"x"}, JWKS: `{"keys": [{"kty": "oct", "k": "AAAA"}]}`}}); err == nil {
		t.Error("a symmetric key accepted")
	}
}

// A jwks_uri file is re-read when it changes: the issuer's keys rotate
// without a restart, and a broken file keeps the last good keys.
func TestJWTKeysFileRotation(t *testing.T) {
	k1, k2 := ecKey(t), ecKey(t)
	path := filepath.Join(t.TempDir(), "jwks.json")
	write := func(s string, mtime time.Time) {
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	write(jwksOf(t, k1, "k1"), time.Now().Add(-time.Hour))
	a, err := ca.NewJWTAuthenticator([]ca.JWTRule{{Issuer: testIssuer, Audiences: []string{"istio-ca"}, JWKSURI: "file://" + path}})
	if err != nil {
		t.Fatal(err)
	}
	sa := "system:serviceaccount:shop:reviews"
	auth := func(key any, kid string) error {
		_, err := a.Authenticate(context.Background(), ca.Credentials{BearerToken: signJWT(t, key, kid, claims(sa, []string{"istio-ca"}, time.Hour))})
		return err
	}
	if err := auth(k1, "k1"); err != nil {
		t.Fatal(err)
	}
	if err := auth(k2, "k2"); err == nil {
		t.Fatal("k2 accepted before it was published")
	}
	write(jwksOf(t, k2, "k2"), time.Now())
	if err := auth(k2, "k2"); err != nil {
		t.Fatalf("k2 after rotation: %v", err)
	}
	if err := auth(k1, "k1"); err == nil {
		t.Fatal("k1 accepted after it was withdrawn")
	}
	write("not json", time.Now().Add(time.Minute))
	if err := auth(k2, "k2"); err != nil {
		t.Fatalf("a broken file dropped the last good keys: %v", err)
	}
}

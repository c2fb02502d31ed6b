package ca

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// JWTRule is one trusted token issuer, in istiod's JWT_RULE format (the
// fields of istio.io/api security/v1beta1 JWTRule that matter here):
//
//	{"issuer": "https://issuer.example", "audiences": ["istio-ca"],
//	 "jwks": "{\"keys\": [...]}"}                  // inline JWKS, or
//	{"issuer": "...", "audiences": [...], "jwks_uri": "file:///etc/jwks.json"}
//
// Only file:// URIs are fetched: pilotfish makes no outbound HTTP calls for
// authentication (OIDC discovery and https JWKS are not supported yet).
type JWTRule struct {
	Issuer    string   `json:"issuer"`
	Audiences []string `json:"audiences"`
	JWKS      string   `json:"jwks"`
	JWKSURI   string   `json:"jwks_uri"`
	// JWKSURICamel accepts the protobuf JSON spelling of jwks_uri.
	JWKSURICamel string `json:"jwksUri"`
}

// ParseJWTRules parses JWT_RULE: one rule object, as istiod reads it, or a
// JSON list of rules. Every rule needs an issuer, at least one audience
// (istiod accepts no token from a rule without), and keys (jwks or a
// file:// jwks_uri). Unknown fields are ignored, as istiod does.
func ParseJWTRules(s string) ([]JWTRule, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	var rules []JWTRule
	if strings.HasPrefix(s, "[") {
		if err := json.Unmarshal([]byte(s), &rules); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalidRule, err)
		}
	} else {
		var r JWTRule
		if err := json.Unmarshal([]byte(s), &r); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalidRule, err)
		}
		rules = []JWTRule{r}
	}
	seen := map[string]bool{}
	for i := range rules {
		r := &rules[i]
		if r.JWKSURI == "" {
			r.JWKSURI = r.JWKSURICamel
		}
		switch {
		case r.Issuer == "":
			return nil, fmt.Errorf("%w: rule %d: issuer is required", ErrInvalidRule, i)
		case seen[r.Issuer]:
			return nil, fmt.Errorf("%w: rule %d: issuer %q listed twice", ErrInvalidRule, i, r.Issuer)
		case len(r.Audiences) == 0:
			return nil, fmt.Errorf("%w: issuer %q: audiences are required", ErrInvalidRule, r.Issuer)
		case r.JWKS == "" && r.JWKSURI == "":
			return nil, fmt.Errorf("%w: issuer %q: jwks or jwks_uri is required (OIDC discovery is not supported)", ErrInvalidRule, r.Issuer)
		case r.JWKS != "" && r.JWKSURI != "":
			return nil, fmt.Errorf("%w: issuer %q: set jwks or jwks_uri, not both", ErrInvalidRule, r.Issuer)
		}
		seen[r.Issuer] = true
	}
	return rules, nil
}

// jwtAlgorithms are the signature algorithms accepted (asymmetric only:
// an HMAC key in a JWKS would let anyone holding it mint tokens).
var jwtAlgorithms = []jose.SignatureAlgorithm{
	jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.PS384, jose.PS512,
	jose.ES256, jose.ES384, jose.ES512, jose.EdDSA,
}

// jwtLeeway is the clock skew allowed on exp, nbf and iat.
const jwtLeeway = time.Minute

// JWTAuthenticator accepts bearer tokens from configured issuers
// (JWT_RULE) for meshes without Kubernetes, as istiod's JwtAuthenticator
// does: the token must be signed by a key of its issuer's JWKS, be within
// its validity (exp is required), name one of the rule's audiences, and
// have sub system:serviceaccount:NAMESPACE:NAME.
type JWTAuthenticator struct {
	issuers map[string]*jwtIssuer
	now     func() time.Time
}

type jwtIssuer struct {
	rule JWTRule
	path string // file of jwks_uri, or ""

	mu      sync.Mutex
	keys    *jose.JSONWebKeySet // guarded by mu
	modTime time.Time           // of path when keys were read; guarded by mu
	size    int64               // guarded by mu
}

// NewJWTAuthenticator loads each rule's keys. A jwks_uri file is re-read
// when it changes, so keys rotate without a restart.
func NewJWTAuthenticator(rules []JWTRule) (*JWTAuthenticator, error) {
	a := &JWTAuthenticator{issuers: map[string]*jwtIssuer{}, now: time.Now}
	for _, r := range rules {
		is := &jwtIssuer{rule: r}
		if r.JWKS != "" {
			ks, err := parseJWKS([]byte(r.JWKS))
			if err != nil {
				return nil, fmt.Errorf("%w: issuer %q: jwks: %v", ErrInvalidRule, r.Issuer, err)
			}
			is.keys = ks
		} else {
			u, err := url.Parse(r.JWKSURI)
			if err != nil || u.Scheme != "file" || u.Path == "" {
				return nil, fmt.Errorf("%w: issuer %q: jwks_uri %q: only file:// URIs are supported", ErrInvalidRule, r.Issuer, r.JWKSURI)
			}
			is.path = u.Path
			if _, err := is.keySet(); err != nil {
				return nil, fmt.Errorf("%w: issuer %q: %v", ErrInvalidRule, r.Issuer, err)
			}
		}
		a.issuers[r.Issuer] = is
	}
	return a, nil
}

func parseJWKS(b []byte) (*jose.JSONWebKeySet, error) {
	var ks jose.JSONWebKeySet
	if err := json.Unmarshal(b, &ks); err != nil {
		return nil, err
	}
	if len(ks.Keys) == 0 {
		return nil, errors.New("no keys")
	}
	pub := &jose.JSONWebKeySet{}
	for _, k := range ks.Keys {
		if !k.Valid() {
			return nil, fmt.Errorf("key %q is not valid", k.KeyID)
		}
		if !k.IsPublic() {
			k = k.Public() // never verify with (or hold) private halves
		}
		if k.Key == nil {
			return nil, fmt.Errorf("key %q has no public key (symmetric keys are not accepted)", k.KeyID)
		}
		pub.Keys = append(pub.Keys, k)
	}
	return pub, nil
}

// keySet returns the issuer's keys, re-reading a jwks_uri file that changed.
func (is *jwtIssuer) keySet() (*jose.JSONWebKeySet, error) {
	is.mu.Lock()
	defer is.mu.Unlock()
	if is.path == "" {
		return is.keys, nil
	}
	fi, err := os.Stat(is.path)
	if err != nil {
		if is.keys != nil {
			return is.keys, nil // keep the last good keys
		}
		return nil, err
	}
	if is.keys != nil && fi.ModTime().Equal(is.modTime) && fi.Size() == is.size {
		return is.keys, nil
	}
	b, err := os.ReadFile(is.path)
	if err != nil {
		return nil, err
	}
	ks, err := parseJWKS(b)
	if err != nil {
		if is.keys != nil {
			return is.keys, nil
		}
		return nil, fmt.Errorf("%s: %v", is.path, err)
	}
	is.keys, is.modTime, is.size = ks, fi.ModTime(), fi.Size()
	return ks, nil
}

// Name implements Authenticator.
func (*JWTAuthenticator) Name() string { return "jwt" }

// Authenticate implements Authenticator.
func (a *JWTAuthenticator) Authenticate(_ context.Context, c Credentials) (Caller, error) {
	if c.BearerToken == "" {
		return Caller{}, ErrNoCredential
	}
	tok, err := jwt.ParseSigned(c.BearerToken, jwtAlgorithms)
	if err != nil {
		return Caller{}, fmt.Errorf("not a signed JWT: %v", err)
	}
	var unverified jwt.Claims
	if err := tok.UnsafeClaimsWithoutVerification(&unverified); err != nil {
		return Caller{}, fmt.Errorf("claims: %v", err)
	}
	is := a.issuers[unverified.Issuer]
	if is == nil {
		return Caller{}, fmt.Errorf("unknown issuer %q", unverified.Issuer)
	}
	ks, err := is.keySet()
	if err != nil {
		return Caller{}, fmt.Errorf("issuer %q: keys: %v", is.rule.Issuer, err)
	}
	var claims jwt.Claims
	if err := verifyJWT(tok, ks, &claims); err != nil {
		return Caller{}, fmt.Errorf("issuer %q: %v", is.rule.Issuer, err)
	}
	if claims.Expiry == nil {
		return Caller{}, fmt.Errorf("issuer %q: token has no exp claim", is.rule.Issuer)
	}
	if err := claims.ValidateWithLeeway(jwt.Expected{
		Issuer: is.rule.Issuer, AnyAudience: jwt.Audience(is.rule.Audiences), Time: a.now(),
	}, jwtLeeway); err != nil {
		return Caller{}, fmt.Errorf("issuer %q: %v (audiences %q, want one of %q)", is.rule.Issuer, err, []string(claims.Audience), is.rule.Audiences)
	}
	caller, err := parseServiceAccountUser(claims.Subject)
	if err != nil {
		return Caller{}, fmt.Errorf("issuer %q: sub: %v", is.rule.Issuer, err)
	}
	return caller, nil
}

// verifyJWT checks tok's signature with the key its kid names or, for a
// token without kid, with each key of the set in turn (as OIDC verifiers
// do), and decodes its claims into dst.
func verifyJWT(tok *jwt.JSONWebToken, ks *jose.JSONWebKeySet, dst *jwt.Claims) error {
	kid := ""
	alg := ""
	if len(tok.Headers) > 0 {
		kid, alg = tok.Headers[0].KeyID, tok.Headers[0].Algorithm
	}
	candidates := ks.Keys
	if kid != "" {
		candidates = ks.Key(kid)
		if len(candidates) == 0 {
			return fmt.Errorf("no key with kid %q", kid)
		}
	}
	var lastErr error = errors.New("no key")
	for _, k := range candidates {
		if k.Algorithm != "" && alg != "" && k.Algorithm != alg {
			continue
		}
		if err := tok.Claims(k.Key, dst); err != nil {
			lastErr = err
			continue
		}
		return nil
	}
	return fmt.Errorf("signature: %v", lastErr)
}

// JWKSFromKeys builds a public JWKS (the "jwks" of a JWTRule) from keys:
// a helper for configuration and tests.
func JWKSFromKeys(keys ...jose.JSONWebKey) (string, error) {
	ks := jose.JSONWebKeySet{}
	for _, k := range keys {
		ks.Keys = append(ks.Keys, k.Public())
	}
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(ks); err != nil {
		return "", err
	}
	return strings.TrimSpace(buf.String()), nil
}

// audiencesIntersect reports whether a and b share a value.
func audiencesIntersect(a, b []string) bool {
	for _, x := range a {
		if slices.Contains(b, x) {
			return true
		}
	}
	return false
}

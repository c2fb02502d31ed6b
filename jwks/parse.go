package jwks

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
)

// ParseKeySet checks that body is a JSON Web Key Set (RFC 7517: an object
// whose "keys" is an array of objects, each with a "kty") and returns its
// canonical form: the keys, compacted, sorted and joined. Two bodies with
// the same canonical form hold the same keys (a server may reorder them or
// change its layout between fetches).
func ParseKeySet(body []byte) (string, error) {
	var set struct {
		Keys *[]json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(body, &set); err != nil {
		return "", fmt.Errorf("%w: %v", ErrKeySet, err)
	}
	if set.Keys == nil {
		return "", fmt.Errorf("%w: no \"keys\" array", ErrKeySet)
	}
	keys := make([]string, 0, len(*set.Keys))
	var b bytes.Buffer
	for i, raw := range *set.Keys {
		var k struct {
			Kty *string `json:"kty"`
		}
		if err := json.Unmarshal(raw, &k); err != nil {
			return "", fmt.Errorf("%w: keys[%d]: %v", ErrKeySet, i, err)
		}
		if k.Kty == nil || *k.Kty == "" {
			return "", fmt.Errorf("%w: keys[%d]: no \"kty\"", ErrKeySet, i)
		}
		b.Reset()
		if err := json.Compact(&b, raw); err != nil {
			return "", fmt.Errorf("%w: keys[%d]: %v", ErrKeySet, i, err)
		}
		keys = append(keys, b.String())
	}
	slices.Sort(keys)
	return strings.Join(keys, "\n"), nil
}

// ParseDiscovery returns the jwks_uri of an OpenID Provider's discovery
// document (OpenID Connect Discovery 1.0, section 3): an http or https
// URL.
func ParseDiscovery(body []byte) (string, error) {
	var doc struct {
		JWKSURI *string `json:"jwks_uri"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return "", fmt.Errorf("%w: %v", ErrDiscovery, err)
	}
	if doc.JWKSURI == nil || *doc.JWKSURI == "" {
		return "", fmt.Errorf("%w: no jwks_uri", ErrDiscovery)
	}
	if err := checkURI(*doc.JWKSURI); err != nil {
		return "", fmt.Errorf("%w: jwks_uri: %w", ErrDiscovery, err)
	}
	return *doc.JWKSURI, nil
}

// checkURI accepts absolute http and https URLs with a host.
func checkURI(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return err
	}
	if !strings.EqualFold(u.Scheme, "http") && !strings.EqualFold(u.Scheme, "https") {
		return fmt.Errorf("%w: %q", ErrScheme, u.Scheme)
	}
	if u.Host == "" {
		return fmt.Errorf("no host in %q", s)
	}
	return nil
}

// discoveryURL is where an issuer's discovery document is: the issuer,
// without a trailing slash, then /.well-known/openid-configuration.
func discoveryURL(issuer string) string {
	return strings.TrimSuffix(issuer, "/") + "/.well-known/openid-configuration"
}

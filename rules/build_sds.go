package rules

import (
	"fmt"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/index"
)

// buildSecrets answers a proxy's SDS requests for gateway credentials over
// ADS: "kubernetes://NAME" (the certificate and key of Secret NAME) and
// "kubernetes://NAME-cacert" (the CA of Secret NAME-cacert, else of NAME),
// from Secrets of the proxy's own namespace only, as istiod's SecretGen.
// A name that is malformed, in another namespace, unknown, or whose Secret
// cannot serve it is left out of the response (istiod does the same; Envoy
// keeps waiting for it); the reason goes to the engine's log, by name only.
// Whether the stream may receive credentials at all (a verified identity in
// that namespace) is serve's check. There is no wildcard: Envoy names
// every secret it wants.
//
// As a builder (debug renders) it logs nothing; the engine answers
// proxies' requests with SecretsFor, and logs what it leaves out.
func buildSecrets(sc *Scope, _ *encode.Mesh, cache *encode.Cache, names []string, _ bool, dst []Resource) ([]Resource, error) {
	return SecretsFor(sc, cache, names, dst, nil)
}

// SecretsFor appends the credentials of names the scope's proxy may read;
// skipped, when set, hears of each name left out and why (the engine logs
// them for a proxy's request).
func SecretsFor(sc *Scope, cache *encode.Cache, names []string, dst []Resource, skipped func(string, error)) ([]Resource, error) {
	snap := sc.Snapshot
	for _, name := range names {
		k, err := secretKey(snap, sc.Class.Namespace, name)
		if err == nil {
			_, err = encode.CredentialSecret(snap.Names(), k)
		}
		if err != nil {
			if skipped != nil {
				skipped(name, err)
			}
			continue
		}
		e, err := encode.Resource(cache, snap.Names(), k, encode.SecretGen)
		if err != nil {
			return dst, fmt.Errorf("sds %s: %w", name, err)
		}
		dst = append(dst, resourceOf(e))
	}
	return dst, nil
}

// secretKey resolves a credential resource name to the Secret row that
// serves it.
func secretKey(snap *index.Snapshot, proxyNS, name string) (*encode.SecretKey, error) {
	ref, err := encode.ParseCredentialName(name, proxyNS)
	if err != nil {
		return nil, err
	}
	ns, ok := snap.Symbols.Lookup(ref.Namespace)
	if !ok {
		return nil, errNoSecret
	}
	lookup := func(n string) *index.Config {
		sym, ok := snap.Symbols.Lookup(n)
		if !ok {
			return nil
		}
		c, _ := snap.Config(index.ConfigSecret, index.ConfigKey{Namespace: ns, Name: sym})
		return c
	}
	k := &encode.SecretKey{Resource: name, CA: ref.CA}
	if ref.CA {
		// A dedicated NAME-cacert Secret first, then NAME's own CA.
		if c := lookup(ref.Name + encode.CredentialCASuffix); c != nil {
			data, _ := c.Spec.(map[string][]byte)
			if encode.HasCredentialRoot(data) {
				k.Secret = c
				return k, nil
			}
		}
	}
	if k.Secret = lookup(ref.Name); k.Secret == nil {
		return nil, errNoSecret
	}
	return k, nil
}

var errNoSecret = fmt.Errorf("no such Secret with credential keys in the proxy's namespace")

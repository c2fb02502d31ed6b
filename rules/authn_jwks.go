package rules

import (
	"net/url"
	"strconv"
	"strings"

	security "istio.io/api/security/v1beta1"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/index"
)

// jwtRules pairs the RequestAuthentications selecting a workload with where
// each of their JWT rules' keys come from, as istiod decides it
// (convertToEnvoyJwtConfig): with PILOT_JWT_ENABLE_REMOTE_JWKS envoy or
// hybrid, a jwksUri whose host is a mesh service is fetched by Envoy
// through that service's cluster; with envoy, any other jwksUri too,
// through the cluster its host would have; everything else is inlined:
// the rule's jwks, or the key set the control plane fetched for it (a
// ConfigJWKS row; none yet or a failed fetch inlines the reject-all set).
func jwtRules(snap *index.Snapshot, mode encode.JWKSFetchMode, ras []*index.Config) encode.JWTRules {
	out := encode.JWTRules{Policies: ras}
	for _, c := range ras {
		ra, ok := c.Spec.(*security.RequestAuthentication)
		if !ok {
			continue
		}
		for _, r := range ra.GetJwtRules() {
			if r != nil {
				out.Keys = append(out.Keys, jwtKeys(snap, mode, r))
			}
		}
	}
	return out
}

func jwtKeys(snap *index.Snapshot, mode encode.JWKSFetchMode, r *security.JWTRule) encode.JWTKeys {
	if mode != encode.JWKSFetchIstiod && r.GetJwksUri() != "" {
		host, port := jwksHostPort(r.GetJwksUri())
		if cluster, ok := meshCluster(snap, host, port); ok {
			return encode.JWTKeys{Cluster: cluster}
		}
		if mode == encode.JWKSFetchEnvoy {
			// istiod's cluster for a host it cannot find: Envoy's fetch
			// fails unless a cluster of that name appears.
			return encode.JWTKeys{Cluster: encode.ClusterName(port, "", host)}
		}
	}
	if r.GetJwks() != "" {
		return encode.JWTKeys{}
	}
	return encode.JWTKeys{Fetched: fetchedKeys(snap, r.GetIssuer(), r.GetJwksUri())}
}

// fetchedKeys is the ConfigJWKS row of (issuer, uri), nil when none.
func fetchedKeys(snap *index.Snapshot, issuer, uri string) *index.Config {
	if snap.NumConfigs(index.ConfigJWKS) == 0 {
		return nil
	}
	iss, ok1 := snap.Symbols.Lookup(issuer)
	u, ok2 := snap.Symbols.Lookup(uri)
	if !ok1 || !ok2 {
		return nil
	}
	c, _ := snap.Config(index.ConfigJWKS, index.ConfigKey{Namespace: iss, Name: u})
	return c
}

// jwksHostPort is istiod's ParseJwksURI: the URI's host and port, 80 for
// http and 443 for https by default (validation rejects other schemes;
// they get port 0 here).
func jwksHostPort(uri string) (string, uint32) {
	u, err := url.Parse(uri)
	if err != nil {
		return "", 0
	}
	var port uint32
	switch strings.ToLower(u.Scheme) {
	case "http":
		port = 80
	case "https":
		port = 443
	}
	if p := u.Port(); p != "" {
		n, err := strconv.ParseUint(p, 10, 16)
		if err != nil {
			return u.Hostname(), 0
		}
		port = uint32(n)
	}
	return u.Hostname(), port
}

// meshCluster is istiod's LookupCluster for a host without a namespace:
// the outbound cluster of the service of that host name when exactly one
// namespace has one.
func meshCluster(snap *index.Snapshot, host string, port uint32) (string, bool) {
	h, ok := snap.Symbols.Lookup(host)
	if !ok || host == "" {
		return "", false
	}
	var ns index.Sym
	for i, id := range snap.ServicesByHost(h) {
		svc := snap.ServiceByID(id)
		if i > 0 && svc.Key.Namespace != ns {
			return "", false // in several namespaces: istiod asks for NAMESPACE/HOST
		}
		ns = svc.Key.Namespace
	}
	if ns == 0 {
		return "", false
	}
	return encode.ClusterName(port, "", host), true
}

// HoldsJWKS reports whether a ConfigJWKS row (a key set fetched for
// issuer and URI) can change what the scope's proxies receive: a
// RequestAuthentication that applies to them has a rule whose keys come
// from it.
func (sc *Scope) HoldsJWKS(key index.ConfigKey, rootNS string) bool {
	snap := sc.Snapshot
	if snap.NumConfigs(index.ConfigRequestAuthentication) == 0 {
		return false
	}
	issuer, uri := snap.String(key.Namespace), snap.String(key.Name)
	root, _ := snap.Symbols.Lookup(rootNS)
	for _, c := range selectPolicies(snap, index.ConfigRequestAuthentication, root, sc.Namespace, scopeLabels(sc)) {
		ra, ok := c.Spec.(*security.RequestAuthentication)
		if !ok {
			continue
		}
		for _, r := range ra.GetJwtRules() {
			if r.GetJwks() == "" && r.GetIssuer() == issuer && r.GetJwksUri() == uri {
				return true
			}
		}
	}
	return false
}

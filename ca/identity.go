package ca

import (
	"fmt"
	"net/url"
	"strings"
)

// Identity is a workload's SPIFFE identity in Istio's form,
// spiffe://TRUST_DOMAIN/ns/NAMESPACE/sa/SERVICE_ACCOUNT.
type Identity struct {
	TrustDomain    string
	Namespace      string
	ServiceAccount string
}

// String returns the SPIFFE ID as a URI.
func (id Identity) String() string {
	return "spiffe://" + id.TrustDomain + "/ns/" + id.Namespace + "/sa/" + id.ServiceAccount
}

// URL returns the SPIFFE ID as a URL, as it appears in a certificate's
// URI SAN.
func (id Identity) URL() *url.URL {
	return &url.URL{Scheme: "spiffe", Host: id.TrustDomain, Path: "/ns/" + id.Namespace + "/sa/" + id.ServiceAccount}
}

// ParseIdentity parses an Istio SPIFFE ID. It accepts exactly
// spiffe://TD/ns/NS/sa/SA with non-empty parts and nothing else (no query,
// fragment, user info or port).
func ParseIdentity(u *url.URL) (Identity, error) {
	if u == nil || u.Scheme != "spiffe" || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Port() != "" {
		return Identity{}, fmt.Errorf("%q is not a SPIFFE ID", u)
	}
	parts := strings.Split(u.Path, "/")
	if len(parts) != 5 || parts[0] != "" || parts[1] != "ns" || parts[3] != "sa" || parts[2] == "" || parts[4] == "" {
		return Identity{}, fmt.Errorf("%q is not of the form spiffe://TRUST_DOMAIN/ns/NAMESPACE/sa/SERVICE_ACCOUNT", u)
	}
	return Identity{TrustDomain: u.Host, Namespace: parts[2], ServiceAccount: parts[4]}, nil
}

// parseServiceAccountUser splits a Kubernetes service account user name,
// system:serviceaccount:NAMESPACE:NAME, as TokenReview reports it and as
// Kubernetes puts it in a token's sub claim.
func parseServiceAccountUser(user string) (Caller, error) {
	parts := strings.Split(user, ":")
	if len(parts) != 4 || parts[0] != "system" || parts[1] != "serviceaccount" || !validName(parts[2]) || !validName(parts[3]) {
		return Caller{}, fmt.Errorf("user %q is not system:serviceaccount:NAMESPACE:NAME", user)
	}
	return Caller{Namespace: parts[2], ServiceAccount: parts[3]}, nil
}

// validName reports whether s can stand as a namespace or service account
// name in a SPIFFE path: a Kubernetes DNS subdomain (lower-case letters,
// digits, '-' and '.'), at most 253 bytes.
func validName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

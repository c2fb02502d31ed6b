package encode

import (
	"regexp"
	"slices"
	"strings"

	matcher "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
)

// defaultTrustDomain is the trust domain a principal may name to mean
// the mesh's own, whatever it is (istiod's "cluster.local" pointer).
const defaultTrustDomain = "cluster.local"

// azMigrate rewrites a rule's conditions for the mesh's trust domains tds
// (its own, then its aliases), as istiod's MigrateTrustDomain does: each
// principal (source.principals, notPrincipals and `when source.principal`)
// of a trust domain in tds, or of cluster.local, becomes one principal per
// trust domain of tds; each trust domain value (source.trustDomains,
// `when source.trustDomain`) that is one of tds becomes all of them. conds
// is not modified.
func azMigrate(conds []azCond, tds []string) []azCond {
	if len(tds) == 0 {
		return conds
	}
	var out []azCond
	for i, c := range conds {
		var values, notValues []string
		switch c.kind {
		case azSrcPrincipal:
			values, notValues = azPrincipalsFor(tds, c.values), azPrincipalsFor(tds, c.notValues)
		case azTrustDomain:
			values, notValues = azTrustDomainsFor(tds, c.values), azTrustDomainsFor(tds, c.notValues)
		default:
			continue
		}
		if out == nil {
			out = slices.Clone(conds)
		}
		out[i].values, out[i].notValues = values, notValues
	}
	if out == nil {
		return conds
	}
	return out
}

// azPrincipalsFor is istiod's ReplaceTrustDomainAliases: a principal
// "TD/ns/NS/sa/SA" whose TD matches a trust domain of tds (exactly or by
// a "*" prefix or suffix on either side) or is cluster.local is given once
// per trust domain of tds (kept as written where its TD is a "*" pattern
// matching that trust domain); a principal of another trust domain, of
// any trust domain ("*/..."), or not of that form is kept.
func azPrincipalsFor(tds, principals []string) []string {
	if len(principals) == 0 {
		return principals
	}
	out := make([]string, 0, len(principals)*len(tds))
	for _, p := range principals {
		parts := strings.Split(p, "/")
		if len(parts) != 5 || parts[0] == "*" {
			out = append(out, p)
			continue
		}
		td := parts[0]
		if td != defaultTrustDomain && !tdMatchesAny(td, tds) {
			out = append(out, p)
			continue
		}
		var these []string
		for _, alias := range tds {
			np := p
			if !tdSuffix(alias, td) {
				np = alias + "/" + strings.Join(parts[1:], "/")
			}
			if !slices.Contains(these, np) {
				these = append(these, np)
			}
		}
		out = append(out, these...)
	}
	return out
}

// azTrustDomainsFor is istiod's ExpandTrustDomainAliases: a value that is
// one of tds stands for all of them; repeats are dropped.
func azTrustDomainsFor(tds, values []string) []string {
	if len(values) == 0 {
		return values
	}
	var out []string
	add := func(v string) {
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	for _, v := range values {
		if slices.Contains(tds, v) {
			for _, td := range tds {
				add(td)
			}
		} else {
			add(v)
		}
	}
	return out
}

// tdMatchesAny is istiod's trust domain stringMatch: a equals an element
// of list, or either is a "*" pattern (any, prefix or suffix) matching
// the other.
func tdMatchesAny(a string, list []string) bool {
	for _, s := range list {
		if a == s || s == "*" || tdPrefix(a, s) || tdPrefix(s, a) || tdSuffix(a, s) || tdSuffix(s, a) {
			return true
		}
	}
	return false
}

// tdPrefix reports whether pattern ends in "*" and a starts with the rest.
func tdPrefix(a, pattern string) bool {
	rest, ok := strings.CutSuffix(pattern, "*")
	return ok && strings.HasPrefix(a, rest)
}

// tdSuffix reports whether pattern starts with "*" and a ends with the rest.
func tdSuffix(a, pattern string) bool {
	rest, ok := strings.CutPrefix(pattern, "*")
	return ok && strings.HasSuffix(a, rest)
}

// azTrustDomainMatcher is istiod's match of a peer's SPIFFE ID on its
// trust domain: "*" any, a trust domain exactly (a prefix up to the first
// slash), or a pattern with one "*" standing for characters other than
// "/".
func azTrustDomainMatcher(v string) *matcher.StringMatcher {
	switch {
	case v == "*":
		return azPrefix("spiffe://")
	case !strings.Contains(v, "*"):
		return azPrefix("spiffe://" + v + "/")
	}
	before, after, _ := strings.Cut(v, "*")
	return azRegex("spiffe://" + regexp.QuoteMeta(before) + "[^/]*" + regexp.QuoteMeta(after) + "/.*")
}

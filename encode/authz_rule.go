package encode

import (
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rbac "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcher "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
	security "istio.io/api/security/v1beta1"
)

// One AuthorizationPolicy rule becomes one RBAC policy, as istiod's
// authz/model does: every `from` is a principal and every `to` a
// permission, each an AND of the rule's conditions in istiod's order
// (operation fields, then `when` keys for permissions; source fields, then
// `when` keys for principals). A value that cannot be expressed (an
// HTTP-only field on a TCP chain, a bad port) fails the whole rule of an
// ALLOW policy (allowing less) and only drops that value from a DENY or
// AUDIT policy (denying more), which is istiod's checkError.

// azTarget says where the RBAC config runs: it decides which fields exist.
type azTarget uint8

const (
	azHTTP azTarget = iota // Envoy HTTP RBAC filter
	azTCP                  // Envoy network RBAC filter: no HTTP fields
	azGRPC                 // proxyless gRPC server: no metadata matchers
)

var (
	errAzHTTPOnly    = errors.New("HTTP only")
	errAzUnsupported = errors.New("unsupported")
)

// azKind names a condition; each maps to permission or principal matchers.
type azKind uint8

const (
	azHost azKind = iota
	azMethod
	azPath
	azDestPort
	azDestIP
	azSNI
	azSrcPrincipal
	azServiceAccount
	azRequestPrincipal
	azTrustDomain
	azSrcNamespace
	azRemoteIP
	azSrcIP
	azHeader
	azAudiences
	azPresenter
	azClaims
)

type azCond struct {
	kind      azKind
	key       string // the `when` key (header and claim names)
	values    []string
	notValues []string
}

func azAppend(list []azCond, kind azKind, key string, values, notValues []string) []azCond {
	if len(values) == 0 && len(notValues) == 0 {
		return list
	}
	return append(list, azCond{kind: kind, key: key, values: values, notValues: notValues})
}

// azPolicy translates one rule. ns is the policy's namespace (service
// accounts without a namespace are in it); tds are the mesh's trust domain
// then its aliases (principals and trust domains are rewritten to each,
// authz_trustdomain.go; nil rewrites nothing).
func azPolicy(r *security.Rule, ns string, tds []string, t azTarget, action rbac.RBAC_Action) (*rbac.Policy, error) {
	var basePerm, basePrin []azCond
	for _, w := range r.GetWhen() {
		k := w.GetKey()
		var kind azKind
		perm := false
		switch {
		case k == "destination.ip":
			kind, perm = azDestIP, true
		case k == "destination.port":
			kind, perm = azDestPort, true
		case k == "connection.sni":
			kind, perm = azSNI, true
		case k == "source.ip":
			kind = azSrcIP
		case k == "remote.ip":
			kind = azRemoteIP
		case k == "source.namespace":
			kind = azSrcNamespace
		case k == "source.principal":
			kind = azSrcPrincipal
		case k == "source.serviceAccount":
			kind = azServiceAccount
		case k == "source.trustDomain":
			kind = azTrustDomain
		case k == "request.auth.principal":
			kind = azRequestPrincipal
		case k == "request.auth.audiences":
			kind = azAudiences
		case k == "request.auth.presenter":
			kind = azPresenter
		case strings.HasPrefix(k, "request.headers["):
			// Envoy refuses a header name with NUL, CR or LF
			// (HeaderMatcher.name): the rule fails like other bad values.
			if strings.ContainsAny(k, "\x00\r\n") {
				return nil, fmt.Errorf("attribute %q: a header name cannot contain NUL, CR or LF", k)
			}
			kind = azHeader
		case strings.HasPrefix(k, "request.auth.claims["):
			kind = azClaims
		default:
			return nil, fmt.Errorf("unknown attribute %s", k)
		}
		if perm {
			basePerm = azAppend(basePerm, kind, k, w.GetValues(), w.GetNotValues())
		} else {
			basePrin = azAppend(basePrin, kind, k, w.GetValues(), w.GetNotValues())
		}
	}
	p := &rbac.Policy{}
	for _, f := range r.GetFrom() {
		s := f.GetSource()
		var conds []azCond
		// istiod's order: principals, request principals, service
		// accounts, trust domains, namespaces, remote IPs, IPs, then when.
		conds = azAppend(conds, azSrcPrincipal, "", s.GetPrincipals(), s.GetNotPrincipals())
		conds = azAppend(conds, azRequestPrincipal, "", s.GetRequestPrincipals(), s.GetNotRequestPrincipals())
		conds = azAppend(conds, azServiceAccount, "", s.GetServiceAccounts(), s.GetNotServiceAccounts())
		conds = azAppend(conds, azTrustDomain, "", s.GetTrustDomains(), s.GetNotTrustDomains())
		conds = azAppend(conds, azSrcNamespace, "", s.GetNamespaces(), s.GetNotNamespaces())
		conds = azAppend(conds, azRemoteIP, "", s.GetRemoteIpBlocks(), s.GetNotRemoteIpBlocks())
		conds = azAppend(conds, azSrcIP, "", s.GetIpBlocks(), s.GetNotIpBlocks())
		conds = append(conds, basePrin...)
		pr, err := azPrincipal(azMigrate(conds, tds), ns, t, action)
		if err != nil {
			return nil, err
		}
		p.Principals = append(p.Principals, pr)
	}
	if len(r.GetFrom()) == 0 {
		pr, err := azPrincipal(azMigrate(basePrin, tds), ns, t, action)
		if err != nil {
			return nil, err
		}
		p.Principals = append(p.Principals, pr)
	}
	for _, to := range r.GetTo() {
		o := to.GetOperation()
		var conds []azCond
		conds = azAppend(conds, azHost, "", o.GetHosts(), o.GetNotHosts())
		conds = azAppend(conds, azMethod, "", o.GetMethods(), o.GetNotMethods())
		conds = azAppend(conds, azPath, "", o.GetPaths(), o.GetNotPaths())
		conds = azAppend(conds, azDestPort, "", o.GetPorts(), o.GetNotPorts())
		conds = append(conds, basePerm...)
		pm, err := azPermission(conds, t, action)
		if err != nil {
			return nil, err
		}
		p.Permissions = append(p.Permissions, pm)
	}
	if len(r.GetTo()) == 0 {
		pm, err := azPermission(basePerm, t, action)
		if err != nil {
			return nil, err
		}
		p.Permissions = append(p.Permissions, pm)
	}
	return p, nil
}

// azCheck is istiod's checkError: errors fail ALLOW rules only.
func azCheck(action rbac.RBAC_Action, err error) error {
	if action == rbac.RBAC_ALLOW {
		return err
	}
	return nil
}

func azPermission(conds []azCond, t azTarget, action rbac.RBAC_Action) (*rbac.Permission, error) {
	var and []*rbac.Permission
	for _, c := range conds {
		var or []*rbac.Permission
		for _, v := range c.values {
			m, err := azPermMatcher(c, v, t)
			if err := azCheck(action, err); err != nil {
				return nil, err
			}
			if m != nil {
				or = append(or, m)
			}
		}
		if len(or) > 0 {
			and = append(and, &rbac.Permission{Rule: &rbac.Permission_OrRules{OrRules: &rbac.Permission_Set{Rules: or}}})
		}
		or = nil
		for _, v := range c.notValues {
			m, err := azPermMatcher(c, v, t)
			if err := azCheck(action, err); err != nil {
				return nil, err
			}
			if m != nil {
				or = append(or, m)
			}
		}
		if len(or) > 0 {
			and = append(and, &rbac.Permission{Rule: &rbac.Permission_NotRule{NotRule: &rbac.Permission{Rule: &rbac.Permission_OrRules{OrRules: &rbac.Permission_Set{Rules: or}}}}})
		}
	}
	if len(and) == 0 {
		and = append(and, &rbac.Permission{Rule: &rbac.Permission_Any{Any: true}})
	}
	return &rbac.Permission{Rule: &rbac.Permission_AndRules{AndRules: &rbac.Permission_Set{Rules: and}}}, nil
}

func azPrincipal(conds []azCond, ns string, t azTarget, action rbac.RBAC_Action) (*rbac.Principal, error) {
	var and []*rbac.Principal
	for _, c := range conds {
		var or []*rbac.Principal
		for _, v := range c.values {
			m, err := azPrinMatcher(c, v, ns, t)
			if err := azCheck(action, err); err != nil {
				return nil, err
			}
			if m != nil {
				or = append(or, m)
			}
		}
		if len(or) > 0 {
			and = append(and, azPrinOr(c, or))
		}
		or = nil
		for _, v := range c.notValues {
			m, err := azPrinMatcher(c, v, ns, t)
			if err := azCheck(action, err); err != nil {
				return nil, err
			}
			if m != nil {
				or = append(or, m)
			}
		}
		if len(or) > 0 {
			and = append(and, &rbac.Principal{Identifier: &rbac.Principal_NotId{NotId: azPrinOr(c, or)}})
		}
	}
	if len(and) == 0 {
		and = append(and, &rbac.Principal{Identifier: &rbac.Principal_Any{Any: true}})
	}
	return &rbac.Principal{Identifier: &rbac.Principal_AndIds{AndIds: &rbac.Principal_Set{Ids: and}}}, nil
}

// azPrinOr is the OR of a condition's matchers. Request principals are
// istiod's "extended" condition: one value is its matcher as is, not an OR
// of one.
func azPrinOr(c azCond, or []*rbac.Principal) *rbac.Principal {
	if c.kind == azRequestPrincipal && len(or) == 1 {
		return or[0]
	}
	return &rbac.Principal{Identifier: &rbac.Principal_OrIds{OrIds: &rbac.Principal_Set{Ids: or}}}
}

// errAzUTF8: protobuf strings must be UTF-8 (decoded YAML and JSON always
// are; this keeps a hand-built row from failing to marshal).
var errAzUTF8 = errors.New("not valid UTF-8")

func azPermMatcher(c azCond, v string, t azTarget) (*rbac.Permission, error) {
	if !utf8.ValidString(v) {
		return nil, errAzUTF8
	}
	switch c.kind {
	case azHost:
		if t == azTCP {
			return nil, errAzHTTPOnly
		}
		return &rbac.Permission{Rule: &rbac.Permission_Header{Header: azHeaderMatcher(":authority", v, true)}}, nil
	case azMethod:
		if t == azTCP {
			return nil, errAzHTTPOnly
		}
		return &rbac.Permission{Rule: &rbac.Permission_Header{Header: azHeaderMatcher(":method", v, false)}}, nil
	case azPath:
		if t == azTCP {
			return nil, errAzHTTPOnly
		}
		if strings.Contains(v, "{") {
			return nil, fmt.Errorf("path template %q: %w", v, errAzUnsupported)
		}
		return &rbac.Permission{Rule: &rbac.Permission_UrlPath{UrlPath: &matcher.PathMatcher{
			Rule: &matcher.PathMatcher_Path{Path: azPathMatcher(v)},
		}}}, nil
	case azDestPort:
		n, err := strconv.ParseUint(v, 10, 16)
		if err != nil {
			return nil, fmt.Errorf("port %q: %w", v, err)
		}
		return &rbac.Permission{Rule: &rbac.Permission_DestinationPort{DestinationPort: uint32(n)}}, nil
	case azDestIP:
		r, err := azCIDR(v)
		if err != nil {
			return nil, err
		}
		return &rbac.Permission{Rule: &rbac.Permission_DestinationIp{DestinationIp: r}}, nil
	case azSNI:
		if t == azGRPC {
			return nil, errAzUnsupported
		}
		return &rbac.Permission{Rule: &rbac.Permission_RequestedServerName{RequestedServerName: azString(v, "")}}, nil
	}
	return nil, errAzUnsupported
}

func azPrinMatcher(c azCond, v, ns string, t azTarget) (*rbac.Principal, error) {
	if !utf8.ValidString(v) || !utf8.ValidString(c.key) || !utf8.ValidString(ns) {
		return nil, errAzUTF8
	}
	switch c.kind {
	case azSrcPrincipal:
		if err := azRegexSafe(v); err != nil {
			return nil, err
		}
		return azAuthenticated(azString(v, "spiffe://")), nil
	case azTrustDomain:
		return azAuthenticated(azTrustDomainMatcher(v)), nil
	case azServiceAccount:
		if err := azRegexSafe(v); err != nil {
			return nil, err
		}
		if strings.Contains(v, "*") { // not a wildcard here: literal in the regex below
			return nil, fmt.Errorf("%q: a service account has no wildcards", v)
		}
		sns, sa, ok := strings.Cut(v, "/")
		if !ok {
			sns, sa = ns, v
		}
		return azAuthenticated(azRegex("spiffe://.+/ns/" + sns + "/(.+/|)sa/" + sa + "(/.+)?")), nil
	case azSrcNamespace:
		if err := azRegexSafe(v); err != nil {
			return nil, err
		}
		return azAuthenticated(azRegex(".*/ns/" + strings.ReplaceAll(v, "*", ".*") + "/.*")), nil
	case azSrcIP, azRemoteIP:
		r, err := azCIDR(v)
		if err != nil {
			return nil, err
		}
		if c.kind == azRemoteIP {
			return &rbac.Principal{Identifier: &rbac.Principal_RemoteIp{RemoteIp: r}}, nil
		}
		return &rbac.Principal{Identifier: &rbac.Principal_DirectRemoteIp{DirectRemoteIp: r}}, nil
	case azHeader:
		if t == azTCP {
			return nil, errAzHTTPOnly
		}
		name, ok := azBracket(strings.TrimPrefix(c.key, "request.headers"))
		if !ok {
			return nil, fmt.Errorf("bad key %q", c.key)
		}
		return &rbac.Principal{Identifier: &rbac.Principal_Header{Header: azHeaderMatcher(name, v, false)}}, nil
	case azRequestPrincipal, azAudiences, azPresenter, azClaims:
		if t == azTCP {
			return nil, errAzHTTPOnly
		}
		if t == azGRPC {
			return nil, errAzUnsupported // gRPC has no JWT filter, nor metadata matchers
		}
		return azJWTPrincipal(c, v)
	}
	return nil, errAzUnsupported
}

// azJWTPrincipal matches the verified JWT payload that jwt_authn stores in
// its dynamic metadata (payload_in_metadata "payload", see jwtFilter):
// request principals as "ISS/SUB", audiences, presenter and claims.
func azJWTPrincipal(c azCond, v string) (*rbac.Principal, error) {
	claim := func(path []string, m *matcher.StringMatcher, list bool) *rbac.Principal {
		segs := []*matcher.MetadataMatcher_PathSegment{{Segment: &matcher.MetadataMatcher_PathSegment_Key{Key: jwtPayloadKey}}}
		for _, p := range path {
			segs = append(segs, &matcher.MetadataMatcher_PathSegment{Segment: &matcher.MetadataMatcher_PathSegment_Key{Key: p}})
		}
		vm := &matcher.ValueMatcher{MatchPattern: &matcher.ValueMatcher_StringMatch{StringMatch: m}}
		if list {
			// A claim may be a string or a list of strings: match either.
			vm = &matcher.ValueMatcher{MatchPattern: &matcher.ValueMatcher_OrMatch{OrMatch: &matcher.OrMatcher{ValueMatchers: []*matcher.ValueMatcher{
				vm, {MatchPattern: &matcher.ValueMatcher_ListMatch{ListMatch: &matcher.ListMatcher{MatchPattern: &matcher.ListMatcher_OneOf{OneOf: vm}}}},
			}}}}
		}
		return &rbac.Principal{Identifier: &rbac.Principal_Metadata{Metadata: &matcher.MetadataMatcher{
			Filter: jwtFilterName, Path: segs, Value: vm,
		}}}
	}
	switch c.kind {
	case azAudiences:
		return claim([]string{"aud"}, azString(v, ""), true), nil
	case azPresenter:
		return claim([]string{"azp"}, azString(v, ""), true), nil
	case azClaims:
		names, ok := azClaimPath(strings.TrimPrefix(c.key, "request.auth.claims"))
		if !ok {
			return nil, fmt.Errorf("bad key %q", c.key)
		}
		return claim(names, azString(v, ""), true), nil
	}
	// request.auth.principal is "ISS/SUB", split at the last slash (the
	// issuer may hold slashes), read as istiod reads it: a leading "*"
	// makes the issuer a suffix (or any) and the subject exact; a trailing
	// "*" makes the subject a prefix (or any) and the issuer exact;
	// without a slash the value is the issuer and the subject is empty.
	any := azRegex(".+")
	var iss, sub *matcher.StringMatcher
	i := strings.LastIndexByte(v, '/')
	is, su := v, ""
	if i >= 0 {
		is, su = v[:i], v[i+1:]
	}
	switch {
	case v == "*":
		iss, sub = any, any
	case strings.HasPrefix(v, "*") && i >= 0:
		iss, sub = azSuffix(strings.TrimPrefix(is, "*")), azExact(su)
		if is == "*" {
			iss = any
		}
	case strings.HasPrefix(v, "*"):
		iss, sub = any, azSuffix(v[1:])
	case strings.HasSuffix(v, "*") && i >= 0:
		iss, sub = azExact(is), azPrefix(strings.TrimSuffix(su, "*"))
		if su == "*" {
			sub = any
		}
	case strings.HasSuffix(v, "*"):
		iss, sub = azPrefix(strings.TrimSuffix(v, "*")), any
	default:
		iss, sub = azExact(is), azExact(su)
	}
	return &rbac.Principal{Identifier: &rbac.Principal_AndIds{AndIds: &rbac.Principal_Set{Ids: []*rbac.Principal{
		claim([]string{"iss"}, iss, false), claim([]string{"sub"}, sub, false),
	}}}}, nil
}

// azRegexSafe rejects values that istiod would paste into a regex
// unescaped (namespaces, service accounts, principals with a leading
// wildcard) when they hold regex syntax other than '.' and '*': the regex
// might not compile, and Envoy would reject the whole listener. Kubernetes
// names and SPIFFE IDs never hold such characters.
func azRegexSafe(v string) error {
	if strings.ContainsAny(v, `\()[]{}|+?^$`) {
		return fmt.Errorf("%q: regex syntax is not allowed here", v)
	}
	return nil
}

func azAuthenticated(m *matcher.StringMatcher) *rbac.Principal {
	return &rbac.Principal{Identifier: &rbac.Principal_Authenticated_{Authenticated: &rbac.Principal_Authenticated{PrincipalName: m}}}
}

// azString is istiod's StringMatcherWithPrefix: "*" any non-empty value,
// "*x" a suffix, "x*" a prefix, else exact; prefix is prepended.
func azString(v, prefix string) *matcher.StringMatcher {
	switch {
	case v == "*":
		return azRegex(".+")
	case strings.HasPrefix(v, "*"):
		if prefix == "" {
			return azSuffix(v[1:])
		}
		// istiod's form; a suffix that is not a valid regex by itself
		// ("**") is quoted so Envoy never gets a regex it rejects.
		re := prefix + ".*" + v[1:]
		if _, err := regexp.Compile(re); err != nil {
			re = prefix + ".*" + regexp.QuoteMeta(v[1:])
		}
		return azRegex(re)
	case strings.HasSuffix(v, "*"):
		return azPrefix(prefix + strings.TrimSuffix(v, "*"))
	}
	return azExact(prefix + v)
}

func azExact(v string) *matcher.StringMatcher {
	return &matcher.StringMatcher{MatchPattern: &matcher.StringMatcher_Exact{Exact: v}}
}
func azPrefix(v string) *matcher.StringMatcher {
	return &matcher.StringMatcher{MatchPattern: &matcher.StringMatcher_Prefix{Prefix: v}}
}
func azSuffix(v string) *matcher.StringMatcher {
	return &matcher.StringMatcher{MatchPattern: &matcher.StringMatcher_Suffix{Suffix: v}}
}
func azRegex(v string) *matcher.StringMatcher {
	return &matcher.StringMatcher{MatchPattern: &matcher.StringMatcher_SafeRegex{SafeRegex: &matcher.RegexMatcher{Regex: v}}}
}

// azHeaderMatcher is istiod's HeaderMatcher ("*" is presence) and
// HostMatcher (ignoreCase).
func azHeaderMatcher(name, v string, ignoreCase bool) *route.HeaderMatcher {
	h := &route.HeaderMatcher{Name: name}
	var m *matcher.StringMatcher
	switch {
	case v == "*":
		h.HeaderMatchSpecifier = &route.HeaderMatcher_PresentMatch{PresentMatch: true}
		return h
	case strings.HasPrefix(v, "*"):
		m = azSuffix(v[1:])
	case strings.HasSuffix(v, "*"):
		m = azPrefix(strings.TrimSuffix(v, "*"))
	default:
		m = azExact(v)
	}
	m.IgnoreCase = ignoreCase
	h.HeaderMatchSpecifier = &route.HeaderMatcher_StringMatch{StringMatch: m}
	return h
}

// azPathMatcher is istiod's PathMatcher: "*" any non-empty path.
func azPathMatcher(v string) *matcher.StringMatcher {
	switch {
	case v == "*":
		return azRegex(".+")
	case strings.HasPrefix(v, "*"):
		return azSuffix(v[1:])
	case strings.HasSuffix(v, "*"):
		return azPrefix(strings.TrimSuffix(v, "*"))
	}
	return azExact(v)
}

// azCIDR is istiod's AddrStrToCidrRange: an address or a prefix.
func azCIDR(v string) (*core.CidrRange, error) {
	if strings.Contains(v, "/") {
		p, err := netip.ParsePrefix(v)
		if err != nil {
			return nil, fmt.Errorf("CIDR %q: %w", v, err)
		}
		return &core.CidrRange{AddressPrefix: p.Addr().String(), PrefixLen: wrapperspb.UInt32(uint32(p.Bits()))}, nil
	}
	a, err := netip.ParseAddr(v)
	if err != nil {
		return nil, fmt.Errorf("address %q: %w", v, err)
	}
	return &core.CidrRange{AddressPrefix: a.String(), PrefixLen: wrapperspb.UInt32(uint32(a.BitLen()))}, nil
}

// azBracket returns NAME of "[NAME]".
func azBracket(s string) (string, bool) {
	if len(s) < 3 || s[0] != '[' || s[len(s)-1] != ']' || strings.ContainsAny(s[1:len(s)-1], "[]") {
		return "", false
	}
	return s[1 : len(s)-1], true
}

// azClaimPath splits "[a][b]" into a, b.
func azClaimPath(s string) ([]string, bool) {
	var out []string
	for s != "" {
		end := strings.IndexByte(s, ']')
		if s[0] != '[' || end < 2 {
			return nil, false
		}
		out = append(out, s[1:end])
		s = s[end+1:]
	}
	return out, len(out) > 0
}

package ingest

import (
	"encoding/json"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	security "istio.io/api/security/v1beta1"
	typev1beta1 "istio.io/api/type/v1beta1"
)

// AuthorizationPolicy, PeerAuthentication and RequestAuthentication, after
// istiod's rules and the CEL rules of Istio's CRDs.

func (v *validator) authorizationPolicy(p *fieldPath, ap *security.AuthorizationPolicy) {
	v.policyTarget(p, ap.GetSelector(), ap.GetTargetRef(), ap.GetTargetRefs())
	action := ap.GetAction()
	if _, known := security.AuthorizationPolicy_Action_name[int32(action)]; !known {
		v.errorf(p.f("action"), "unknown action %d, want ALLOW, DENY, AUDIT or CUSTOM", int32(action))
	}
	switch {
	case action == security.AuthorizationPolicy_CUSTOM && ap.GetRules() == nil:
		v.errorf(p.f("rules"), "a CUSTOM policy without rules never applies; add an empty rule {} to apply it to every request")
	case action == security.AuthorizationPolicy_CUSTOM && ap.GetProvider().GetName() == "":
		v.errorf(p.f("provider").f("name"), "required for the CUSTOM action")
	case action != security.AuthorizationPolicy_CUSTOM && ap.GetProvider() != nil:
		v.errorf(p.f("provider"), "only the CUSTOM action takes a provider, not %s", action)
	case action == security.AuthorizationPolicy_DENY && ap.GetRules() == nil:
		v.errorf(p.f("rules"), "a DENY policy without rules never applies; add an empty rule {} to deny every request")
	}
	for i, r := range ap.GetRules() {
		rp := p.f("rules").i(i)
		if r == nil {
			v.errorf(rp, "must not be null")
			continue
		}
		v.authzRule(rp, r, action == security.AuthorizationPolicy_CUSTOM)
	}
}

func (v *validator) authzRule(p *fieldPath, r *security.Rule, custom bool) {
	if r.GetFrom() != nil && len(r.GetFrom()) == 0 {
		v.errorf(p.f("from"), "must not be empty (leave it out to match any source)")
	}
	for i, from := range r.GetFrom() {
		fp := p.f("from").i(i)
		if from.GetSource() == nil {
			v.errorf(fp.f("source"), "required")
			continue
		}
		v.authzSource(fp.f("source"), from.GetSource(), custom)
	}
	if r.GetTo() != nil && len(r.GetTo()) == 0 {
		v.errorf(p.f("to"), "must not be empty (leave it out to match any operation)")
	}
	for i, to := range r.GetTo() {
		tp := p.f("to").i(i)
		if to.GetOperation() == nil {
			v.errorf(tp.f("operation"), "required")
			continue
		}
		v.authzOperation(tp.f("operation"), to.GetOperation())
	}
	for i, c := range r.GetWhen() {
		cp := p.f("when").i(i)
		if c == nil {
			v.errorf(cp, "must not be null")
			continue
		}
		v.authzCondition(cp, c, custom)
	}
}

func (v *validator) authzSource(p *fieldPath, s *security.Source, custom bool) {
	lists := []struct {
		name   string
		values []string
		check  func(string) string
	}{
		{"principals", s.GetPrincipals(), nil},
		{"notPrincipals", s.GetNotPrincipals(), nil},
		{"requestPrincipals", s.GetRequestPrincipals(), nil},
		{"notRequestPrincipals", s.GetNotRequestPrincipals(), nil},
		{"namespaces", s.GetNamespaces(), nil},
		{"notNamespaces", s.GetNotNamespaces(), nil},
		{"serviceAccounts", s.GetServiceAccounts(), serviceAccountError},
		{"notServiceAccounts", s.GetNotServiceAccounts(), serviceAccountError},
		{"ipBlocks", s.GetIpBlocks(), ipOrCIDRError},
		{"notIpBlocks", s.GetNotIpBlocks(), ipOrCIDRError},
		{"remoteIpBlocks", s.GetRemoteIpBlocks(), ipOrCIDRError},
		{"notRemoteIpBlocks", s.GetNotRemoteIpBlocks(), ipOrCIDRError},
		{"trustDomains", s.GetTrustDomains(), trustDomainError},
		{"notTrustDomains", s.GetNotTrustDomains(), trustDomainError},
	}
	empty := true
	for _, l := range lists {
		empty = empty && len(l.values) == 0
		v.values(p.f(l.name), l.values, l.check)
	}
	if empty {
		v.errorf(p, "must set at least one field (leave out from to match any source)")
	}
	if len(s.GetServiceAccounts())+len(s.GetNotServiceAccounts()) > 0 &&
		len(s.GetPrincipals())+len(s.GetNotPrincipals())+len(s.GetNamespaces())+len(s.GetNotNamespaces()) > 0 {
		v.errorf(p, "serviceAccounts cannot be combined with principals or namespaces")
	}
	if len(s.GetServiceAccounts()) > 16 {
		v.errorf(p.f("serviceAccounts"), "at most 16 values, not %d", len(s.GetServiceAccounts()))
	}
	if custom {
		// The external authorizer sees no peer or request identity.
		for _, l := range lists {
			switch l.name {
			case "ipBlocks", "notIpBlocks", "remoteIpBlocks", "notRemoteIpBlocks":
			default:
				if len(l.values) > 0 {
					v.errorf(p.f(l.name), "not supported with the CUSTOM action")
				}
			}
		}
	}
}

func (v *validator) authzOperation(p *fieldPath, op *security.Operation) {
	if len(op.GetHosts())+len(op.GetNotHosts())+len(op.GetPorts())+len(op.GetNotPorts())+
		len(op.GetMethods())+len(op.GetNotMethods())+len(op.GetPaths())+len(op.GetNotPaths()) == 0 {
		v.errorf(p, "must set at least one field (leave out to to match any operation)")
	}
	v.values(p.f("hosts"), op.GetHosts(), nil)
	v.values(p.f("notHosts"), op.GetNotHosts(), nil)
	v.values(p.f("ports"), op.GetPorts(), portStringError)
	v.values(p.f("notPorts"), op.GetNotPorts(), portStringError)
	v.values(p.f("methods"), op.GetMethods(), nil)
	v.values(p.f("notMethods"), op.GetNotMethods(), nil)
	v.values(p.f("paths"), op.GetPaths(), pathTemplateError)
	v.values(p.f("notPaths"), op.GetNotPaths(), pathTemplateError)
}

// values checks a list of match values: none empty, each passing check.
func (v *validator) values(p *fieldPath, values []string, check func(string) string) {
	for i, val := range values {
		switch {
		case val == "":
			v.errorf(p.i(i), "must not be empty")
		case check != nil:
			if msg := check(val); msg != "" {
				v.errorf(p.i(i), "%s", msg)
			}
		}
	}
}

func serviceAccountError(s string) string {
	switch ns, sa, qualified := strings.Cut(s, "/"); {
	case strings.Contains(s, "*"):
		return "wildcards are not allowed in service accounts"
	case len(s) > 320:
		return "longer than 320 characters"
	case qualified && (ns == "" || sa == "" || strings.Contains(sa, "/")):
		return "want serviceAccount or namespace/serviceAccount, not " + strconv.Quote(s)
	}
	return ""
}

func trustDomainError(s string) string {
	if n := strings.Count(s, "*"); n > 1 || (n == 1 && s != "*" && !strings.HasPrefix(s, "*") && !strings.HasSuffix(s, "*")) {
		return "a wildcard may only lead or end a trust domain, once"
	}
	if strings.Contains(s, "/") {
		return "a trust domain cannot contain \"/\""
	}
	return ""
}

func portStringError(s string) string {
	if n, err := strconv.ParseUint(s, 10, 32); err != nil || n > 65535 {
		return strconv.Quote(s) + " is not a port number (0-65535)"
	}
	return ""
}

// pathLiteralRE is what a path segment may hold when the path uses
// templates ({*} one segment, {**} the rest).
var pathLiteralRE = regexp.MustCompile(`^[a-zA-Z0-9-._~%!$&'()+,;:@=]+$`)

func pathTemplateError(path string) string {
	templated := strings.Contains(path, "{*}") || strings.Contains(path, "{**}")
	sawAny := false
	for _, seg := range strings.Split(strings.Trim(path, "/"), "/") {
		switch {
		case (seg == "{*}" || seg == "{**}") && sawAny:
			return "{**} must be the last template in " + strconv.Quote(path)
		case seg == "{**}":
			sawAny = true
		case seg == "{*}":
		case strings.ContainsAny(seg, "{}"):
			return "only whole-segment {*} and {**} templates are supported in " + strconv.Quote(path)
		case templated && !pathLiteralRE.MatchString(seg):
			return "segment " + strconv.Quote(seg) + " of a templated path has invalid characters"
		}
	}
	return ""
}

// authzCondition checks a `when` condition: a known key, values (or
// notValues) in the key's format.
func (v *validator) authzCondition(p *fieldPath, c *security.Condition, custom bool) {
	key := c.GetKey()
	if key == "" {
		v.errorf(p.f("key"), "required")
		return
	}
	if len(c.GetValues()) == 0 && len(c.GetNotValues()) == 0 {
		v.errorf(p, "at least one of values or notValues is required for key %q", key)
	}
	var check func(string) string
	switch {
	case hasMapKey(key, "request.headers"), hasMapKey(key, "request.auth.claims"),
		hasMapKey(key, "experimental.envoy.filters."):
	case strings.HasPrefix(key, "request.headers"), strings.HasPrefix(key, "request.auth.claims"),
		strings.HasPrefix(key, "experimental.envoy.filters."):
		v.errorf(p.f("key"), "%q needs a name in brackets, e.g. request.headers[x-token]", key)
	case key == "source.ip", key == "remote.ip", key == "destination.ip":
		check = ipOrCIDRError
	case key == "destination.port":
		check = portStringError
	case key == "source.serviceAccount":
		check = serviceAccountError
	case key == "source.trustDomain":
		check = trustDomainError
	case key == "source.namespace", key == "source.principal", key == "request.auth.principal",
		key == "request.auth.audiences", key == "request.auth.presenter", key == "connection.sni":
	case key == "destination.namespace", strings.HasPrefix(key, "destination.labels"):
		v.errorf(p.f("key"), "%q is not supported: the policy's namespace and selector say where it applies", key)
	default:
		v.errorf(p.f("key"), "unknown key %q", key)
	}
	v.values(p.f("values"), c.GetValues(), check)
	v.values(p.f("notValues"), c.GetNotValues(), check)
	if custom && (key == "source.namespace" || key == "source.serviceAccount" || key == "source.trustDomain" ||
		key == "source.principal" || strings.HasPrefix(key, "request.auth.")) {
		v.errorf(p.f("key"), "%q is not supported with the CUSTOM action", key)
	}
}

// hasMapKey reports whether key is prefix[name] with a non-empty name.
func hasMapKey(key, prefix string) bool {
	rest, ok := strings.CutPrefix(key, prefix)
	if prefix[len(prefix)-1] == '.' {
		i := strings.Index(rest, "[")
		return ok && i > 0 && strings.HasSuffix(rest, "]") && i < len(rest)-2
	}
	return ok && strings.HasPrefix(rest, "[") && strings.HasSuffix(rest, "]") && len(rest) > 2
}

// policyTarget checks how a security policy picks its workloads: a
// selector or target references, not both.
func (v *validator) policyTarget(p *fieldPath, sel *typev1beta1.WorkloadSelector, ref *typev1beta1.PolicyTargetReference, refs []*typev1beta1.PolicyTargetReference) {
	n := 0
	for _, set := range []bool{sel != nil, ref != nil, len(refs) > 0} {
		if set {
			n++
		}
	}
	if n > 1 {
		v.errorf(p, "set only one of selector, targetRef and targetRefs")
	}
	if sel != nil {
		v.workloadSelector(p.f("selector").f("matchLabels"), sel.GetMatchLabels())
	}
	if ref != nil {
		v.targetRef(p.f("targetRef"), ref)
	}
	for i, r := range refs {
		v.targetRef(p.f("targetRefs").i(i), r)
	}
}

// targetRefKinds are the kinds a policy may target, by API group.
var targetRefKinds = []struct{ group, kind string }{
	{"", "Service"}, {"networking.istio.io", "ServiceEntry"},
	{"gateway.networking.k8s.io", "Gateway"}, {"gateway.networking.k8s.io", "GatewayClass"},
}

func (v *validator) targetRef(p *fieldPath, r *typev1beta1.PolicyTargetReference) {
	if r == nil {
		v.errorf(p, "must not be null")
		return
	}
	if r.GetName() == "" {
		v.errorf(p.f("name"), "required")
	}
	if r.GetNamespace() != "" {
		v.errorf(p.f("namespace"), "must be empty: policies cannot target another namespace")
	}
	group := r.GetGroup()
	if group == "core" {
		group = ""
	}
	if !slices.ContainsFunc(targetRefKinds, func(k struct{ group, kind string }) bool {
		return k.group == group && k.kind == r.GetKind()
	}) {
		v.errorf(p.f("kind"), "cannot target %s/%s; want a Service, ServiceEntry, or Gateway API Gateway or GatewayClass", r.GetGroup(), r.GetKind())
	}
}

func (v *validator) peerAuthentication(p *fieldPath, pa *security.PeerAuthentication) {
	if len(pa.GetSelector().GetMatchLabels()) == 0 && len(pa.GetPortLevelMtls()) > 0 {
		v.errorf(p.f("portLevelMtls"), "needs a selector with labels: mesh- and namespace-wide policies cannot set port-level mTLS")
	}
	if pa.GetPortLevelMtls() != nil && len(pa.GetPortLevelMtls()) == 0 {
		v.errorf(p.f("portLevelMtls"), "must not be empty when set")
	}
	if sel := pa.GetSelector(); sel != nil {
		v.workloadSelector(p.f("selector").f("matchLabels"), sel.GetMatchLabels())
	}
	ports := make([]uint32, 0, len(pa.GetPortLevelMtls()))
	for port := range pa.GetPortLevelMtls() {
		ports = append(ports, port)
	}
	slices.Sort(ports)
	for _, port := range ports {
		pp := p.f("portLevelMtls").k(strconv.FormatUint(uint64(port), 10))
		v.port(pp, int64(port))
		if m := pa.GetPortLevelMtls()[port]; m == nil {
			v.errorf(pp, "must not be null")
		} else {
			v.mtlsMode(pp.f("mode"), m)
		}
	}
	if m := pa.GetMtls(); m != nil {
		v.mtlsMode(p.f("mtls").f("mode"), m)
	}
}

func (v *validator) mtlsMode(p *fieldPath, m *security.PeerAuthentication_MutualTLS) {
	if _, known := security.PeerAuthentication_MutualTLS_Mode_name[int32(m.GetMode())]; !known {
		v.errorf(p, "unknown mode %d, want UNSET, DISABLE, PERMISSIVE or STRICT", int32(m.GetMode()))
	}
}

// headerTokenRE is what the CRD allows for outputClaimToHeaders headers.
var headerTokenRE = regexp.MustCompile(`^[-_A-Za-z0-9]+$`)

func (v *validator) requestAuthentication(p *fieldPath, ra *security.RequestAuthentication) {
	v.policyTarget(p, ra.GetSelector(), ra.GetTargetRef(), ra.GetTargetRefs())
	for i, r := range ra.GetJwtRules() {
		rp := p.f("jwtRules").i(i)
		if r == nil {
			v.errorf(rp, "must not be null")
			continue
		}
		v.jwtRule(rp, r)
	}
}

func (v *validator) jwtRule(p *fieldPath, r *security.JWTRule) {
	if r.GetIssuer() == "" && r.GetJwksUri() == "" {
		v.errorf(p.f("issuer"), "required (or set jwksUri)")
	}
	v.values(p.f("audiences"), r.GetAudiences(), nil)
	if u := r.GetJwksUri(); u != "" {
		if msg := jwksURIError(u); msg != "" {
			v.errorf(p.f("jwksUri"), "%s", msg)
		}
		if r.GetJwks() != "" {
			v.errorf(p.f("jwks"), "set jwks or jwksUri, not both")
		}
	}
	if j := r.GetJwks(); j != "" && !json.Valid([]byte(j)) {
		v.errorf(p.f("jwks"), "is not a valid JSON Web Key Set (not JSON)")
	}
	for i, h := range r.GetFromHeaders() {
		if h.GetName() == "" {
			v.errorf(p.f("fromHeaders").i(i).f("name"), "required")
		}
	}
	v.values(p.f("fromParams"), r.GetFromParams(), nil)
	v.values(p.f("fromCookies"), r.GetFromCookies(), nil)
	v.values(p.f("spaceDelimitedClaims"), r.GetSpaceDelimitedClaims(), nil)
	for i, c := range r.GetOutputClaimToHeaders() {
		cp := p.f("outputClaimToHeaders").i(i)
		switch {
		case c.GetClaim() == "":
			v.errorf(cp.f("claim"), "required")
		case c.GetHeader() == "":
			v.errorf(cp.f("header"), "required")
		case !headerTokenRE.MatchString(c.GetHeader()):
			v.errorf(cp.f("header"), "invalid header name %q: letters, digits, '-' and '_' only", c.GetHeader())
		}
	}
	v.duration(p.f("timeout"), r.GetTimeout())
}

func jwksURIError(s string) string {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return "invalid URL: " + strings.TrimPrefix(err.Error(), "parse "+strconv.Quote(s)+": ")
	case u.Scheme != "http" && u.Scheme != "https":
		return "URL " + strconv.Quote(s) + " must use http:// or https://"
	case u.Hostname() == "":
		return "URL " + strconv.Quote(s) + " has no host"
	case u.Port() != "":
		if n, err := strconv.Atoi(u.Port()); err != nil || n < 1 || n > 65535 {
			return "URL " + strconv.Quote(s) + " has an invalid port"
		}
	}
	if _, err := netip.ParseAddr(u.Hostname()); err != nil {
		if msg := fqdnError(u.Hostname()); msg != "" {
			return "URL " + strconv.Quote(s) + " has an invalid host: " + msg
		}
	}
	return ""
}

package ingest

import (
	"net/http"
	"slices"
	"strconv"
	"strings"

	networking "istio.io/api/networking/v1alpha3"
)

// virtualService follows istiod's rules. A VirtualService without hosts is
// a delegate (referenced from another VirtualService's http delegate): it
// may carry only http routes, no gateways and no delegation of its own.
func (v *validator) virtualService(p *fieldPath, vs *networking.VirtualService) {
	delegate := len(vs.GetHosts()) == 0
	if delegate {
		if len(vs.GetGateways()) > 0 {
			v.errorf(p.f("gateways"), "a delegate VirtualService (one without hosts) cannot have gateways")
		}
		if len(vs.GetTls()) > 0 {
			v.errorf(p.f("tls"), "a delegate VirtualService (one without hosts) cannot have tls routes")
		}
		if len(vs.GetTcp()) > 0 {
			v.errorf(p.f("tcp"), "a delegate VirtualService (one without hosts) cannot have tcp routes")
		}
	}
	v.gatewayNames(p.f("gateways"), vs.GetGateways())
	// Routes bound to "mesh" (or to no gateway) apply to sidecars.
	toGateway := len(vs.GetGateways()) > 0 && !slices.Contains(vs.GetGateways(), "mesh")

	valid := true
	for i, h := range vs.GetHosts() {
		if msg := hostError(h); msg != "" && !isIP(h) && !(toGateway && isAutoSNI(h)) {
			v.errorf(p.f("hosts").i(i), "invalid host %q: %s", h, msg)
			valid = false
		} else if h == "*" && !toGateway {
			v.errorf(p.f("hosts").i(i), "wildcard host * is not allowed for a VirtualService bound to the mesh gateway")
			valid = false
		}
	}
	if valid {
		hosts := vs.GetHosts()
		for i := range hosts {
			for j := i + 1; j < len(hosts); j++ {
				if hostsOverlap(hosts[i], hosts[j]) {
					v.errorf(p.f("hosts").i(j), "duplicate host: %q overlaps %q", hosts[j], hosts[i])
				}
			}
		}
	}
	if len(vs.GetHttp()) == 0 && len(vs.GetTcp()) == 0 && len(vs.GetTls()) == 0 {
		v.errorf(p, "at least one of http, tcp or tls routes is required")
	}
	for i, r := range vs.GetHttp() {
		rp := p.f("http").i(i)
		if r == nil {
			v.errorf(rp, "must not be null")
			continue
		}
		v.httpRoute(rp, r, delegate, toGateway)
	}
	for i, r := range vs.GetTls() {
		v.tlsRoute(p.f("tls").i(i), r, vs, toGateway)
	}
	for i, r := range vs.GetTcp() {
		v.tcpRoute(p.f("tcp").i(i), r)
	}
	v.exportTo(p.f("exportTo"), vs.GetExportTo(), false, false)
}

// isAutoSNI reports whether h is an SNI name Istio generates for
// mTLS passthrough ("outbound_.80_._.reviews.default.svc.cluster.local"),
// which gateways may route on.
func isAutoSNI(h string) bool {
	parts := strings.SplitN(h, "_.", 4)
	return len(parts) == 4 && parts[0] == "outbound" && parts[1] != "" && parts[1][0] >= '0' && parts[1][0] <= '9'
}

// hostsOverlap reports whether one host pattern matches the other
// ("*.com" and "foo.com", or the same host twice).
func hostsOverlap(a, b string) bool {
	a, b = strings.ToLower(a), strings.ToLower(b)
	match := func(pattern, h string) bool {
		if pattern == h || pattern == "*" {
			return true
		}
		if strings.HasPrefix(pattern, "*") {
			suffix := pattern[1:]
			if strings.HasPrefix(h, "*") {
				return strings.HasSuffix(h[1:], suffix)
			}
			return strings.HasSuffix(h, suffix)
		}
		return false
	}
	return match(a, b) || match(b, a)
}

func (v *validator) httpRoute(p *fieldPath, r *networking.HTTPRoute, delegate, toGateway bool) {
	switch {
	case r.GetDelegate() != nil && !delegate:
		// A root route hands the request to the delegate, and nothing else.
		if r.GetRedirect() != nil {
			v.errorf(p.f("redirect"), "a route with delegate cannot also redirect")
		}
		if len(r.GetRoute()) > 0 {
			v.errorf(p.f("route"), "a route with delegate cannot also have route destinations")
		}
		if d := r.GetDelegate(); d.GetName() == "" {
			v.errorf(p.f("delegate").f("name"), "required")
		} else {
			v.dnsName(p.f("delegate").f("name"), d.GetName(), dns1123Subdomain)
		}
		if ns := r.GetDelegate().GetNamespace(); ns != "" {
			v.dnsName(p.f("delegate").f("namespace"), ns, dns1123Label)
		}
	case r.GetDelegate() != nil:
		v.errorf(p.f("delegate"), "a delegate VirtualService cannot delegate again")
	default:
		v.httpRouteAction(p, r)
	}
	if r.GetMirror() != nil && len(r.GetMirrors()) > 0 {
		v.errorf(p.f("mirrors"), "cannot set both mirror and mirrors")
	}
	for i, m := range r.GetMatch() {
		if m == nil {
			v.errorf(p.f("match").i(i), "must not be null")
			continue
		}
		v.httpMatch(p.f("match").i(i), m, toGateway)
	}
	v.headerOps(p.f("headers"), r.GetHeaders())
	v.corsPolicy(p.f("corsPolicy"), r.GetCorsPolicy())
	v.fault(p.f("fault"), r.GetFault())
	if mp := r.GetMirrorPercent(); mp != nil && mp.GetValue() > 100 { //nolint:staticcheck // still accepted
		v.errorf(p.f("mirrorPercent"), "percentage must be between 0 and 100, not %d", mp.GetValue())
	}
	if mp := r.GetMirrorPercentage(); mp != nil && (mp.GetValue() < 0 || mp.GetValue() > 100) {
		v.errorf(p.f("mirrorPercentage").f("value"), "percentage must be between 0 and 100, not %v", mp.GetValue())
	}
	if r.GetMirror() != nil {
		v.destination(p.f("mirror"), r.GetMirror())
	}
	for i, m := range r.GetMirrors() {
		mp := p.f("mirrors").i(i)
		switch {
		case m == nil:
			v.errorf(mp, "must not be null")
		case m.GetDestination() == nil:
			v.errorf(mp.f("destination"), "required")
		default:
			v.destination(mp.f("destination"), m.GetDestination())
			if pc := m.GetPercentage(); pc != nil && (pc.GetValue() < 0 || pc.GetValue() > 100) {
				v.errorf(mp.f("percentage").f("value"), "percentage must be between 0 and 100, not %v", pc.GetValue())
			}
		}
	}
	v.retries(p.f("retries"), r.GetRetries())
	v.duration(p.f("timeout"), r.GetTimeout())
	v.rewrite(p.f("rewrite"), r.GetRewrite())
	v.authorityRewrite(p, r)
}

// httpRouteAction checks that a route does exactly one thing: forward
// (route), redirect or respond directly.
func (v *validator) httpRouteAction(p *fieldPath, r *networking.HTTPRoute) {
	switch {
	case r.GetRedirect() != nil:
		if len(r.GetRoute()) > 0 {
			v.errorf(p.f("redirect"), "cannot be combined with route destinations")
		}
		if r.GetFault() != nil {
			v.errorf(p.f("redirect"), "cannot be combined with fault")
		}
		if r.GetRewrite() != nil {
			v.errorf(p.f("redirect"), "cannot be combined with rewrite")
		}
		if r.GetDirectResponse() != nil {
			v.errorf(p.f("redirect"), "cannot be combined with directResponse")
		}
		v.redirect(p.f("redirect"), r.GetRedirect(), r.GetMatch())
	case r.GetDirectResponse() != nil:
		if len(r.GetRoute()) > 0 {
			v.errorf(p.f("directResponse"), "cannot be combined with route destinations")
		}
		if r.GetFault() != nil {
			v.errorf(p.f("directResponse"), "cannot be combined with fault")
		}
		if r.GetRewrite() != nil {
			v.errorf(p.f("directResponse"), "cannot be combined with rewrite")
		}
		v.directResponse(p.f("directResponse"), r.GetDirectResponse())
	case len(r.GetRoute()) == 0:
		v.errorf(p.f("route"), "one of route, redirect or directResponse is required")
	}
	v.httpDestinations(p.f("route"), r.GetRoute())
}

// httpDestinations checks weights as istiod does today: weights are
// relative (a destination receives weight/sum of weights), so each must be
// non-negative and, with several destinations, they must not all be 0.
func (v *validator) httpDestinations(p *fieldPath, ds []*networking.HTTPRouteDestination) {
	var total int64
	for i, d := range ds {
		dp := p.i(i)
		if d == nil {
			v.errorf(dp, "must not be null")
			continue
		}
		if d.GetDestination() == nil {
			v.errorf(dp.f("destination"), "required")
		} else {
			v.destination(dp.f("destination"), d.GetDestination())
		}
		v.headerOps(dp.f("headers"), d.GetHeaders())
		if d.GetWeight() < 0 {
			v.errorf(dp.f("weight"), "must not be negative, not %d", d.GetWeight())
		}
		total += int64(d.GetWeight())
	}
	if len(ds) > 1 && total == 0 {
		v.errorf(p, "the weights of %d destinations add up to 0; give at least one a positive weight", len(ds))
	}
}

func (v *validator) routeDestinations(p *fieldPath, ds []*networking.RouteDestination) {
	var total int64
	for i, d := range ds {
		dp := p.i(i)
		if d == nil {
			v.errorf(dp, "must not be null")
			continue
		}
		if d.GetDestination() == nil {
			v.errorf(dp.f("destination"), "required")
		} else {
			v.destination(dp.f("destination"), d.GetDestination())
		}
		if d.GetWeight() < 0 {
			v.errorf(dp.f("weight"), "must not be negative, not %d", d.GetWeight())
		}
		total += int64(d.GetWeight())
	}
	if len(ds) > 1 && total == 0 {
		v.errorf(p, "the weights of %d destinations add up to 0; give at least one a positive weight", len(ds))
	}
}

func (v *validator) destination(p *fieldPath, d *networking.Destination) {
	switch h := d.GetHost(); {
	case h == "":
		v.errorf(p.f("host"), "required")
	case h == "*":
		v.errorf(p.f("host"), "invalid host \"*\": a destination must name a service")
	default:
		if msg := hostError(h); msg != "" {
			v.errorf(p.f("host"), "invalid host %q: %s", h, msg)
		}
	}
	if s := d.GetSubset(); s != "" && !isIstioLabel(s) {
		v.errorf(p.f("subset"), "invalid subset name %q: must be a DNS-1123 label", s)
	}
	if d.GetPort() != nil {
		v.port(p.f("port").f("number"), int64(d.GetPort().GetNumber()))
	}
}

func (v *validator) httpMatch(p *fieldPath, m *networking.HTTPMatchRequest, toGateway bool) {
	for _, name := range sortedMapKeys(m.GetHeaders()) {
		hp := p.f("headers").k(name)
		v.matchHeaderName(hp, name)
		if !toGateway && strings.HasPrefix(name, "@request.auth.claims") {
			v.errorf(hp, "JWT claim based routing is only supported on gateways")
		}
		if sm := m.GetHeaders()[name]; sm == nil {
			v.errorf(hp, "must not be null")
		} else {
			v.stringMatch(hp, sm, false)
		}
	}
	for _, name := range sortedMapKeys(m.GetWithoutHeaders()) {
		hp := p.f("withoutHeaders").k(name)
		v.matchHeaderName(hp, name)
		if !toGateway && strings.HasPrefix(name, "@request.auth.claims") {
			v.errorf(hp, "JWT claim based routing is only supported on gateways")
		}
		// A regex of "*" means "header present", not a regular expression.
		if sm := m.GetWithoutHeaders()[name]; sm != nil && sm.GetRegex() != "*" {
			v.stringMatch(hp, sm, false)
		}
	}
	if m.GetUri() != nil {
		v.stringMatch(p.f("uri"), m.GetUri(), true)
	}
	if m.GetScheme() != nil {
		v.stringMatch(p.f("scheme"), m.GetScheme(), false)
	}
	if m.GetMethod() != nil {
		v.stringMatch(p.f("method"), m.GetMethod(), false)
	}
	if m.GetAuthority() != nil {
		v.stringMatch(p.f("authority"), m.GetAuthority(), false)
	}
	for _, k := range sortedMapKeys(m.GetQueryParams()) {
		if sm := m.GetQueryParams()[k]; sm != nil {
			v.stringMatch(p.f("queryParams").k(k), sm, false)
		}
	}
	if m.GetPort() != 0 {
		v.port(p.f("port"), int64(m.GetPort()))
	}
	v.labels(p.f("sourceLabels"), m.GetSourceLabels())
	v.gatewayNames(p.f("gateways"), m.GetGateways())
	if ns := m.GetSourceNamespace(); ns != "" && !isIstioLabel(ns) {
		v.errorf(p.f("sourceNamespace"), "invalid namespace %q: must be a DNS-1123 label", ns)
	}
}

// retryOnPolicies are the retry conditions Envoy understands
// (x-envoy-retry-on and x-envoy-retry-grpc-on); HTTP status codes are
// accepted too.
var retryOnPolicies = map[string]bool{
	"5xx": true, "gateway-error": true, "reset": true, "reset-before-request": true,
	"connect-failure": true, "retriable-4xx": true, "refused-stream": true,
	"retriable-status-codes": true, "retriable-headers": true, "envoy-ratelimited": true,
	"http3-post-connect-failure": true, "cancelled": true, "deadline-exceeded": true,
	"internal": true, "resource-exhausted": true, "unavailable": true,
}

func (v *validator) retries(p *fieldPath, r *networking.HTTPRetry) {
	if r == nil {
		return
	}
	if r.GetAttempts() < 0 {
		v.errorf(p.f("attempts"), "must not be negative, not %d", r.GetAttempts())
	}
	if r.GetAttempts() == 0 && (r.GetPerTryTimeout() != nil || r.GetRetryOn() != "" || r.GetRetryRemoteLocalities() != nil) {
		v.errorf(p.f("attempts"), "retries are disabled (attempts is 0) but perTryTimeout, retryOn or retryRemoteLocalities is set")
	}
	v.duration(p.f("perTryTimeout"), r.GetPerTryTimeout())
	v.duration(p.f("backoff"), r.GetBackoff())
	if on := r.GetRetryOn(); on != "" {
		for _, policy := range strings.Split(on, ",") {
			code, _ := strconv.Atoi(policy)
			if http.StatusText(code) == "" && !retryOnPolicies[policy] {
				v.errorf(p.f("retryOn"), "%q is not a retry condition Envoy knows", policy)
			}
		}
	}
}

var corsMethods = map[string]bool{
	"GET": true, "HEAD": true, "POST": true, "PUT": true, "DELETE": true,
	"CONNECT": true, "OPTIONS": true, "TRACE": true, "PATCH": true, "*": true,
}

func (v *validator) corsPolicy(p *fieldPath, c *networking.CorsPolicy) {
	if c == nil {
		return
	}
	for i, o := range c.GetAllowOrigins() {
		op := p.f("allowOrigins").i(i)
		if o.GetExact() == "" && o.GetPrefix() == "" && o.GetRegex() == "" {
			v.errorf(op, "an origin must set a non-empty exact, prefix or regex")
			continue
		}
		v.stringMatch(op, o, false)
	}
	for i, m := range c.GetAllowMethods() {
		if !corsMethods[m] {
			v.errorf(p.f("allowMethods").i(i), "%q is not an HTTP method", m)
		}
	}
	for i, h := range c.GetAllowHeaders() {
		if h != "*" && !headerNameRE.MatchString(h) {
			v.errorf(p.f("allowHeaders").i(i), "invalid header name %q", h)
		}
	}
	for i, h := range c.GetExposeHeaders() {
		if h != "*" && !headerNameRE.MatchString(h) {
			v.errorf(p.f("exposeHeaders").i(i), "invalid header name %q", h)
		}
	}
	if c.GetMaxAge() != nil {
		v.duration(p.f("maxAge"), c.GetMaxAge())
		if c.GetMaxAge().GetNanos() != 0 {
			v.errorf(p.f("maxAge"), "must be a whole number of seconds")
		}
	}
}

func (v *validator) fault(p *fieldPath, f *networking.HTTPFaultInjection) {
	if f == nil {
		return
	}
	if f.GetAbort() == nil && f.GetDelay() == nil {
		v.errorf(p, "needs an abort, a delay or both")
	}
	if a := f.GetAbort(); a != nil {
		ap := p.f("abort")
		v.percentage(ap.f("percentage"), a.GetPercentage())
		switch e := a.GetErrorType().(type) {
		case *networking.HTTPFaultInjection_Abort_HttpStatus:
			if e.HttpStatus < 200 || e.HttpStatus > 599 {
				v.errorf(ap.f("httpStatus"), "must be an HTTP status between 200 and 599, not %d", e.HttpStatus)
			}
		case *networking.HTTPFaultInjection_Abort_GrpcStatus:
			if !grpcStatuses[e.GrpcStatus] {
				v.errorf(ap.f("grpcStatus"), "%q is not a gRPC status name such as \"UNAVAILABLE\"", e.GrpcStatus)
			}
		case *networking.HTTPFaultInjection_Abort_Http2Error:
			v.errorf(ap.f("http2Error"), "HTTP/2 abort fault injection is not supported")
		}
	}
	if d := f.GetDelay(); d != nil {
		dp := p.f("delay")
		v.percentage(dp.f("percentage"), d.GetPercentage())
		v.percent(dp.f("percent"), d.GetPercent()) //nolint:staticcheck // still accepted
		switch t := d.GetHttpDelayType().(type) {
		case *networking.HTTPFaultInjection_Delay_FixedDelay:
			v.duration(dp.f("fixedDelay"), t.FixedDelay)
		case *networking.HTTPFaultInjection_Delay_ExponentialDelay:
			v.errorf(dp.f("exponentialDelay"), "exponentialDelay is not supported")
		default:
			v.errorf(dp.f("fixedDelay"), "required")
		}
	}
}

var grpcStatuses = map[string]bool{
	"OK": true, "CANCELLED": true, "UNKNOWN": true, "INVALID_ARGUMENT": true, "DEADLINE_EXCEEDED": true,
	"NOT_FOUND": true, "ALREADY_EXISTS": true, "PERMISSION_DENIED": true, "RESOURCE_EXHAUSTED": true,
	"FAILED_PRECONDITION": true, "ABORTED": true, "OUT_OF_RANGE": true, "UNIMPLEMENTED": true,
	"INTERNAL": true, "UNAVAILABLE": true, "DATA_LOSS": true, "UNAUTHENTICATED": true,
}

func (v *validator) redirect(p *fieldPath, r *networking.HTTPRedirect, matches []*networking.HTTPMatchRequest) {
	if r.GetUri() != "" && r.GetPrefixRewrite() != "" {
		v.errorf(p, "set uri or prefixRewrite, not both")
	}
	if r.GetPrefixRewrite() != "" {
		for i, m := range matches {
			if _, isPrefix := m.GetUri().GetMatchType().(*networking.StringMatch_Prefix); m.GetUri() != nil && !isPrefix {
				v.errorf(p.f("prefixRewrite"), "needs every uri match to be a prefix match, and match[%d].uri is not", i)
			}
		}
	}
	if r.GetUri() == "" && r.GetPrefixRewrite() == "" && r.GetAuthority() == "" && r.GetRedirectPort() == nil && r.GetScheme() == "" {
		v.errorf(p, "must set at least one of uri, prefixRewrite, authority, scheme or port")
	}
	if c := r.GetRedirectCode(); c != 0 && (c < 300 || c > 399) {
		v.errorf(p.f("redirectCode"), "must be a 3xx status, not %d", c)
	}
	if s := r.GetScheme(); s != "" && s != "http" && s != "https" {
		v.errorf(p.f("scheme"), "must be \"http\" or \"https\", not %q", s)
	}
	if port := r.GetPort(); port > 0 {
		v.port(p.f("port"), int64(port))
	}
}

func (v *validator) directResponse(p *fieldPath, d *networking.HTTPDirectResponse) {
	if s := d.GetStatus(); s < 200 || s > 599 {
		v.errorf(p.f("status"), "must be an HTTP status between 200 and 599, not %d", s)
	}
	size := len(d.GetBody().GetString_()) + len(d.GetBody().GetBytes())
	if size > 1<<20 {
		v.errorf(p.f("body"), "is %d bytes; direct responses must be smaller than 1MB", size)
	}
}

func (v *validator) rewrite(p *fieldPath, r *networking.HTTPRewrite) {
	if r == nil {
		return
	}
	rr := r.GetUriRegexRewrite()
	switch {
	case r.GetUri() != "" && rr != nil:
		v.errorf(p, "set uri or uriRegexRewrite, not both")
	case r.GetUri() == "" && rr == nil && r.GetAuthority() == "":
		v.errorf(p, "must set at least one of uri, uriRegexRewrite or authority")
	}
	if rr != nil {
		if rr.GetMatch() == "" || rr.GetRewrite() == "" {
			v.errorf(p.f("uriRegexRewrite"), "needs both match and rewrite")
		}
		if rr.GetMatch() != "" {
			v.regex(p.f("uriRegexRewrite").f("match"), rr.GetMatch())
		}
	}
}

// authorityRewrite: the authority may be rewritten in one place only.
func (v *validator) authorityRewrite(p *fieldPath, r *networking.HTTPRoute) {
	n := 0
	if r.GetRewrite().GetAuthority() != "" {
		n++
	}
	for _, m := range []map[string]string{r.GetHeaders().GetRequest().GetSet(), r.GetHeaders().GetRequest().GetAdd()} {
		for k := range m {
			if strings.EqualFold(k, ":authority") || strings.EqualFold(k, "host") {
				n++
			}
		}
	}
	if n > 1 {
		v.errorf(p.f("headers").f("request"), "the authority is rewritten more than once (rewrite.authority and Host/:authority headers)")
	}
}

func (v *validator) tlsRoute(p *fieldPath, r *networking.TLSRoute, vs *networking.VirtualService, toGateway bool) {
	if r == nil {
		v.errorf(p, "must not be null")
		return
	}
	if len(r.GetMatch()) == 0 {
		v.errorf(p.f("match"), "at least one match with sniHosts is required")
	}
	for i, m := range r.GetMatch() {
		mp := p.f("match").i(i)
		if m == nil {
			v.errorf(mp, "must not be null")
			continue
		}
		if len(m.GetSniHosts()) == 0 {
			v.errorf(mp.f("sniHosts"), "at least one SNI host is required")
		}
		for j, sni := range m.GetSniHosts() {
			sp := mp.f("sniHosts").i(j)
			if toGateway && isAutoSNI(sni) {
				continue
			}
			if msg := hostError(sni); msg != "" {
				if !isIP(sni) {
					v.errorf(sp, "invalid SNI host %q: %s", sni, msg)
				}
				continue
			}
			if !sniCovered(sni, vs.GetHosts()) {
				v.errorf(sp, "SNI host %q is not covered by any of the VirtualService's hosts [%s]", sni, strings.Join(vs.GetHosts(), ", "))
			}
		}
		for j, s := range m.GetDestinationSubnets() {
			if msg := ipOrCIDRError(s); msg != "" {
				v.errorf(mp.f("destinationSubnets").i(j), "%s", msg)
			}
		}
		if m.GetPort() != 0 {
			v.port(mp.f("port"), int64(m.GetPort()))
		}
		v.labels(mp.f("sourceLabels"), m.GetSourceLabels())
		v.gatewayNames(mp.f("gateways"), m.GetGateways())
	}
	if len(r.GetRoute()) == 0 {
		v.errorf(p.f("route"), "at least one route destination is required")
	}
	v.routeDestinations(p.f("route"), r.GetRoute())
}

// sniCovered reports whether an SNI host is one of the hosts or within one
// of their wildcards.
func sniCovered(sni string, hosts []string) bool {
	sni = strings.ToLower(sni)
	for _, h := range hosts {
		h = strings.ToLower(h)
		switch {
		case h == sni || h == "*":
			return true
		case strings.HasPrefix(h, "*"):
			s := sni
			if strings.HasPrefix(s, "*") {
				s = s[1:]
			}
			if strings.HasSuffix(s, h[1:]) {
				return true
			}
		}
	}
	return false
}

func (v *validator) tcpRoute(p *fieldPath, r *networking.TCPRoute) {
	if r == nil {
		v.errorf(p, "must not be null")
		return
	}
	for i, m := range r.GetMatch() {
		mp := p.f("match").i(i)
		if m == nil {
			v.errorf(mp, "must not be null")
			continue
		}
		for j, s := range m.GetDestinationSubnets() {
			if msg := ipOrCIDRError(s); msg != "" {
				v.errorf(mp.f("destinationSubnets").i(j), "%s", msg)
			}
		}
		if m.GetPort() != 0 {
			v.port(mp.f("port"), int64(m.GetPort()))
		}
		v.labels(mp.f("sourceLabels"), m.GetSourceLabels())
		v.gatewayNames(mp.f("gateways"), m.GetGateways())
	}
	if len(r.GetRoute()) == 0 {
		v.errorf(p.f("route"), "at least one route destination is required")
	}
	v.routeDestinations(p.f("route"), r.GetRoute())
}

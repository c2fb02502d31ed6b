package ingest

import (
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	networking "istio.io/api/networking/v1alpha3"
	"k8s.io/apimachinery/pkg/api/validate/content"
	kvalidation "k8s.io/apimachinery/pkg/util/validation"
)

// Checks shared by several kinds. Messages are lower-case phrases that
// follow "field.path: " in an Error.

type dnsKind uint8

const (
	dns1123Label dnsKind = iota
	dns1123Subdomain
	dns1035Label
)

// dnsName checks a Kubernetes object name or namespace.
func (v *validator) dnsName(p *fieldPath, name string, kind dnsKind) {
	var errs []string
	var what string
	switch kind {
	case dns1123Label:
		errs, what = kvalidation.IsDNS1123Label(name), "a DNS-1123 label"
	case dns1123Subdomain:
		errs, what = kvalidation.IsDNS1123Subdomain(name), "a DNS-1123 subdomain"
	case dns1035Label:
		errs, what = kvalidation.IsDNS1035Label(name), "a DNS-1035 label"
	}
	if len(errs) > 0 {
		v.errorf(p, "invalid name %q: must be %s (%s)", name, what, kubeMessage(errs))
	}
}

// kubeMessage shortens apimachinery's validation messages: the regular
// expression and examples they end with help no one editing YAML.
func kubeMessage(errs []string) string {
	msg := errs[0]
	if i := strings.Index(msg, " (e.g. "); i > 0 {
		msg = msg[:i]
	}
	return msg
}

func labelKeyError(k string) string {
	if errs := content.IsLabelKey(k); len(errs) > 0 {
		return kubeMessage(errs)
	}
	return ""
}

// labels checks a Kubernetes label map (metadata.labels, selectors).
func (v *validator) labels(p *fieldPath, m map[string]string) {
	for _, k := range sortedMapKeys(m) {
		if msg := labelKeyError(k); msg != "" {
			v.errorf(p.k(k), "invalid label key %q: %s", k, msg)
		}
		if errs := content.IsLabelValue(m[k]); len(errs) > 0 {
			v.errorf(p.k(k), "invalid label value %q: %s", m[k], kubeMessage(errs))
		}
	}
}

// workloadSelector checks Istio's selector labels: no empty keys, no
// wildcards (istiod and the CRD schemas reject both).
func (v *validator) workloadSelector(p *fieldPath, m map[string]string) {
	for _, k := range sortedMapKeys(m) {
		switch {
		case k == "":
			v.errorf(p.k(k), "empty label key is not supported in a selector")
		case strings.Contains(k, "*") || strings.Contains(m[k], "*"):
			v.errorf(p.k(k), "wildcard is not supported in a selector (%s=%s)", k, m[k])
		}
	}
}

// istioLabelRE is istiod's DNS-1123 label: unlike Kubernetes', it allows
// upper case, as host names are case-insensitive.
var istioLabelRE = regexp.MustCompile(`^[a-zA-Z0-9](?:[-a-zA-Z0-9]*[a-zA-Z0-9])?$`)

func isIstioLabel(s string) bool { return len(s) <= 63 && istioLabelRE.MatchString(s) }

// wildcardLabelRE is a first host label that may carry a wildcard: "*",
// "*foo", "*-foo" or a plain label.
var wildcardLabelRE = regexp.MustCompile(`^(\*|(\*|\*-)?[a-zA-Z0-9](?:[-a-zA-Z0-9]*[a-zA-Z0-9])?)$`)

// hostError returns why h is not a valid host name with an optional
// wildcard in its first label ("*.example.com", "reviews"), or "".
func hostError(h string) string {
	if msg := domainPreconditions(h); msg != "" {
		return msg
	}
	first, rest, hasRest := strings.Cut(h, ".")
	if len(first) > 63 || !wildcardLabelRE.MatchString(first) {
		msg := "label " + strconv.Quote(first) + " is not a valid DNS label"
		if strings.Contains(first, "*") {
			msg += " (a wildcard may only lead the first label)"
		}
		return msg
	}
	if hasRest {
		return labelsError(rest)
	}
	return ""
}

// fqdnError returns why h is not a valid host name without wildcards, or "".
func fqdnError(h string) string {
	if msg := domainPreconditions(h); msg != "" {
		return msg
	}
	return labelsError(h)
}

func domainPreconditions(h string) string {
	switch {
	case h == "":
		return "empty host name"
	case len(h) > 255:
		return "longer than 255 characters"
	}
	return ""
}

// labelsError checks the dot-separated labels of a domain; a trailing dot
// is allowed, an all-numeric top-level label is not.
func labelsError(domain string) string {
	parts := strings.Split(domain, ".")
	if tld := parts[len(parts)-1]; tld != "" {
		if _, err := strconv.Atoi(tld); err == nil {
			return "top-level domain " + strconv.Quote(tld) + " cannot be all-numeric"
		}
	}
	for i, l := range parts {
		if i == len(parts)-1 && l == "" && i > 0 {
			break
		}
		if !isIstioLabel(l) {
			return "label " + strconv.Quote(l) + " is not a valid DNS label"
		}
	}
	return ""
}

func isIP(s string) bool {
	_, err := netip.ParseAddr(s)
	return err == nil
}

// ipOrCIDRError returns why s is neither an IP address nor a CIDR block.
func ipOrCIDRError(s string) string {
	if strings.Contains(s, "/") {
		if _, err := netip.ParsePrefix(s); err != nil {
			return strconv.Quote(s) + " is not a valid CIDR block"
		}
		return ""
	}
	if !isIP(s) {
		return strconv.Quote(s) + " is not a valid IP address"
	}
	return ""
}

func (v *validator) port(p *fieldPath, n int64) {
	if n < 1 || n > 65535 {
		v.errorf(p, "port number must be between 1 and 65535, not %d", n)
	}
}

// duration checks one of Istio's durations: at least 1ms, whole
// milliseconds (what istiod and the CRD schemas require).
func (v *validator) duration(p *fieldPath, d *durationpb.Duration) {
	if d == nil {
		return
	}
	if err := d.CheckValid(); err != nil {
		v.errorf(p, "invalid duration: %v", err)
		return
	}
	switch dur := d.AsDuration(); {
	case dur < time.Millisecond:
		v.errorf(p, "must be at least 1ms, not %v", dur)
	case dur%time.Millisecond != 0:
		v.errorf(p, "must be a whole number of milliseconds, not %v", dur)
	}
}

func (v *validator) percent(p *fieldPath, n int32) {
	if n < 0 || n > 100 {
		v.errorf(p, "percentage must be between 0 and 100, not %d", n)
	}
}

// percentage checks a fractional percentage: 0, or within [0.0001, 100].
func (v *validator) percentage(p *fieldPath, pc *networking.Percent) {
	if pc == nil {
		return
	}
	if val := pc.GetValue(); val < 0 || val > 100 || (val > 0 && val < 0.0001) || val != val {
		v.errorf(p.f("value"), "percentage must be 0 or between 0.0001 and 100, not %v", val)
	}
}

// istioProtocols are the port protocols istiod knows (matched
// case-insensitively).
var istioProtocols = []string{"TCP", "UDP", "GRPC", "GRPC-Web", "HTTP", "HTTP_PROXY", "HTTP2", "HTTPS", "TLS", "Mongo", "Redis", "MySQL"}

func parseProtocol(s string) string {
	for _, p := range istioProtocols {
		if strings.EqualFold(p, s) {
			return strings.ToUpper(p)
		}
	}
	return ""
}

func isHTTPProtocol(p string) bool {
	switch p {
	case "HTTP", "HTTP2", "HTTP_PROXY", "GRPC", "GRPC-WEB":
		return true
	}
	return false
}

func isTLSProtocol(p string) bool { return p == "HTTPS" || p == "TLS" }

// protocol checks an Istio port protocol; empty means sniffed.
func (v *validator) protocol(p *fieldPath, s string) {
	if s != "" && parseProtocol(s) == "" {
		v.errorf(p, "unsupported protocol %q, want one of %s", s, strings.Join(istioProtocols, ", "))
	}
}

func (v *validator) portName(p *fieldPath, name string) {
	if !isIstioLabel(name) {
		v.errorf(p, "invalid port name %q: must be a DNS-1123 label", name)
	}
}

// exportTo checks visibility lists: ".", "*", "~" (ServiceEntry only) or
// namespace names, without duplicates or contradictions.
func (v *validator) exportTo(p *fieldPath, list []string, serviceEntry, drWithSelector bool) {
	seen := make(map[string]bool, len(list))
	for i, e := range list {
		key := e
		if e == "." {
			key = v.namespace
		}
		switch {
		case seen[key]:
			v.errorf(p.i(i), "duplicate entry %q", e)
			continue
		case e == "~" && !serviceEntry:
			v.errorf(p.i(i), "%q is only allowed in a ServiceEntry", e)
		case e != "." && e != "*" && e != "~" && !isIstioLabel(e):
			v.errorf(p.i(i), "%q is not \".\", \"*\" or a namespace name", e)
		}
		seen[key] = true
	}
	if len(list) > 1 && seen["*"] {
		v.errorf(p, "cannot combine public (*) with other entries")
	}
	if len(list) > 1 && seen["~"] {
		v.errorf(p, "cannot export to no one (~) and to someone")
	}
	if drWithSelector && len(list) > 0 && (len(seen) > 1 || !seen[v.namespace]) {
		v.errorf(p, "a DestinationRule with a workloadSelector can only be exported to its own namespace")
	}
}

// gatewayNames checks references to Gateways: "mesh", "name" or
// "namespace/name".
func (v *validator) gatewayNames(p *fieldPath, names []string) {
	for i, g := range names {
		ns, name, qualified := strings.Cut(g, "/")
		switch {
		case !qualified:
			if msg := fqdnError(g); msg != "" {
				v.errorf(p.i(i), "invalid gateway %q: %s", g, msg)
			}
		case ns == "" || name == "":
			v.errorf(p.i(i), "invalid gateway %q: namespace and name cannot be empty", g)
		case !isIstioLabel(ns):
			v.errorf(p.i(i), "invalid gateway %q: namespace %q is not a DNS-1123 label", g, ns)
		case !isIstioLabel(name):
			v.errorf(p.i(i), "invalid gateway %q: name %q is not a DNS-1123 label", g, name)
		}
	}
}

// stringMatch checks a StringMatch: regexes compile; an empty prefix is an
// error except for URIs (Envoy allows an empty path prefix only).
func (v *validator) stringMatch(p *fieldPath, sm *networking.StringMatch, emptyPrefixOK bool) {
	switch m := sm.GetMatchType().(type) {
	case *networking.StringMatch_Prefix:
		if m.Prefix == "" && !emptyPrefixOK {
			v.errorf(p.f("prefix"), "must not be empty")
		}
	case *networking.StringMatch_Regex:
		v.regex(p.f("regex"), m.Regex)
	}
}

// regex checks a regular expression for Envoy's RE2: Go's regexp accepts
// the same syntax, and Envoy's program size limit is approximated by
// length, as istiod does.
func (v *validator) regex(p *fieldPath, re string) {
	switch {
	case re == "":
		v.errorf(p, "regex must not be empty")
	case len(re) > 1024:
		v.errorf(p, "regex is too long (%d bytes, at most 1024)", len(re))
	default:
		if _, err := regexp.Compile(re); err != nil {
			v.errorf(p, "invalid RE2 regex: %s", strings.TrimPrefix(err.Error(), "error parsing regexp: "))
		}
	}
}

// headerNameRE is an HTTP token (RFC 7230), the characters Envoy accepts
// in a header name.
var headerNameRE = regexp.MustCompile("^[!#$%&'*+\\-.^_`|~0-9A-Za-z]+$")

var pseudoHeaders = []string{":method", ":scheme", ":authority", ":path", ":status"}

// matchHeaderName checks a header name in a route match: a token, a
// pseudo-header or an @request.auth.claims[...] reference.
func (v *validator) matchHeaderName(p *fieldPath, name string) {
	switch {
	case name == "":
		v.errorf(p, "header name cannot be empty")
	case slices.Contains(pseudoHeaders, name), strings.HasPrefix(name, "@request.auth.claims"):
	case !headerNameRE.MatchString(name):
		v.errorf(p, "invalid header name %q", name)
	}
}

// headerOps checks header manipulation: request add/set may not touch
// pseudo-headers other than :authority; removals and response changes may
// not touch Host or pseudo-headers.
func (v *validator) headerOps(p *fieldPath, h *networking.Headers) {
	if h == nil {
		return
	}
	check := func(p *fieldPath, name string, authorityOK bool) {
		switch {
		case name == "":
			v.errorf(p, "header name cannot be empty")
		case authorityOK && (strings.EqualFold(name, ":authority") || strings.EqualFold(name, "host")):
		case strings.HasPrefix(name, ":"):
			v.errorf(p, "invalid header %q: pseudo-headers (\":\" prefix) cannot be changed", name)
		case strings.EqualFold(name, "host"):
			v.errorf(p, "invalid header %q: the Host header cannot be changed here", name)
		}
	}
	values := func(p *fieldPath, m map[string]string, authorityOK bool) {
		for _, k := range sortedMapKeys(m) {
			check(p.k(k), k, authorityOK)
			if strings.ContainsFunc(m[k], func(r rune) bool { return r < 0x20 && r != '\t' || r == 0x7f }) {
				v.errorf(p.k(k), "header value contains control characters")
			}
		}
	}
	req, resp := p.f("request"), p.f("response")
	values(req.f("set"), h.GetRequest().GetSet(), true)
	values(req.f("add"), h.GetRequest().GetAdd(), true)
	for i, n := range h.GetRequest().GetRemove() {
		check(req.f("remove").i(i), n, false)
	}
	values(resp.f("set"), h.GetResponse().GetSet(), false)
	values(resp.f("add"), h.GetResponse().GetAdd(), false)
	for i, n := range h.GetResponse().GetRemove() {
		check(resp.f("remove").i(i), n, false)
	}
}

func sortedMapKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

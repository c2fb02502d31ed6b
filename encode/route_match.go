package encode

import (
	"cmp"
	"slices"
	"strings"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcher "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
	networking "istio.io/api/networking/v1alpha3"
)

// rtTranslateMatch is istiod's TranslateRouteMatch for sidecars. Header
// and query parameter matchers are sorted by name (istiod sorts headers and
// leaves query parameters in map order; sorting both keeps output
// deterministic).
func rtTranslateMatch(in *networking.HTTPMatchRequest) *route.RouteMatch {
	out := &route.RouteMatch{}
	if in == nil {
		out.PathSpecifier = &route.RouteMatch_Prefix{Prefix: "/"}
		return out
	}
	for _, name := range sortedKeys(in.GetHeaders()) {
		sm := in.GetHeaders()[name]
		if mm := rtClaimMatcher(name, sm); mm != nil {
			out.DynamicMetadata = append(out.DynamicMetadata, mm)
			continue
		}
		out.Headers = append(out.Headers, rtHeaderMatcher(name, sm))
	}
	for _, name := range sortedKeys(in.GetWithoutHeaders()) {
		sm := in.GetWithoutHeaders()[name]
		if mm := rtClaimMatcher(name, sm); mm != nil {
			mm.Invert = true
			out.DynamicMetadata = append(out.DynamicMetadata, mm)
			continue
		}
		hm := rtHeaderMatcher(name, sm)
		hm.InvertMatch = true
		if !rtPresentMatch(sm) {
			hm.TreatMissingHeaderAsEmpty = true
		}
		out.Headers = append(out.Headers, hm)
	}
	slices.SortStableFunc(out.Headers, func(a, b *route.HeaderMatcher) int { return cmp.Compare(a.Name, b.Name) })

	if u := in.GetUri(); u != nil {
		switch m := u.GetMatchType().(type) {
		case *networking.StringMatch_Exact:
			out.PathSpecifier = &route.RouteMatch_Path{Path: m.Exact}
		case *networking.StringMatch_Prefix:
			out.PathSpecifier = &route.RouteMatch_Prefix{Prefix: m.Prefix}
		case *networking.StringMatch_Regex:
			out.PathSpecifier = &route.RouteMatch_SafeRegex{SafeRegex: &matcher.RegexMatcher{Regex: m.Regex}}
		}
	}
	if out.PathSpecifier == nil {
		out.PathSpecifier = &route.RouteMatch_Prefix{Prefix: "/"}
	}
	out.CaseSensitive = rtCaseSensitive
	if in.GetIgnoreUriCase() {
		out.CaseSensitive = rtCaseInsensitive
	}
	if in.GetMethod() != nil {
		out.Headers = append(out.Headers, rtHeaderMatcher(":method", in.GetMethod()))
	}
	if in.GetAuthority() != nil {
		out.Headers = append(out.Headers, rtHeaderMatcher(":authority", in.GetAuthority()))
	}
	if in.GetScheme() != nil {
		out.Headers = append(out.Headers, rtHeaderMatcher(":scheme", in.GetScheme()))
	}
	for _, name := range sortedKeys(in.GetQueryParams()) {
		sm := in.GetQueryParams()[name]
		qm := &route.QueryParameterMatcher{Name: name}
		if rtPresentMatch(sm) {
			qm.QueryParameterMatchSpecifier = &route.QueryParameterMatcher_PresentMatch{PresentMatch: true}
		} else if em := rtStringMatcher(sm); em != nil {
			qm.QueryParameterMatchSpecifier = &route.QueryParameterMatcher_StringMatch{StringMatch: em}
		}
		out.QueryParameters = append(out.QueryParameters, qm)
	}
	return out
}

// Shared read-only values of RouteMatch.case_sensitive.
var (
	rtCaseSensitive   = wrapperspb.Bool(true)
	rtCaseInsensitive = wrapperspb.Bool(false)
)

func sortedKeys[V any](m map[string]V) []string {
	if len(m) == 0 {
		return nil
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// rtPresentMatch: an empty match, or the regex "*", means "present".
func rtPresentMatch(in *networking.StringMatch) bool {
	if in == nil || in.GetMatchType() == nil {
		return true
	}
	if m, ok := in.GetMatchType().(*networking.StringMatch_Regex); ok {
		return m.Regex == "*"
	}
	return false
}

func rtHeaderMatcher(name string, in *networking.StringMatch) *route.HeaderMatcher {
	out := &route.HeaderMatcher{Name: name}
	if rtPresentMatch(in) {
		out.HeaderMatchSpecifier = &route.HeaderMatcher_PresentMatch{PresentMatch: true}
		return out
	}
	if em := rtStringMatcher(in); em != nil {
		out.HeaderMatchSpecifier = &route.HeaderMatcher_StringMatch{StringMatch: em}
	}
	return out
}

// rtStringMatcher is istiod's ConvertToEnvoyMatch.
func rtStringMatcher(in *networking.StringMatch) *matcher.StringMatcher {
	switch m := in.GetMatchType().(type) {
	case *networking.StringMatch_Exact:
		return &matcher.StringMatcher{MatchPattern: &matcher.StringMatcher_Exact{Exact: m.Exact}}
	case *networking.StringMatch_Prefix:
		return &matcher.StringMatcher{MatchPattern: &matcher.StringMatcher_Prefix{Prefix: m.Prefix}}
	case *networking.StringMatch_Regex:
		return &matcher.StringMatcher{MatchPattern: &matcher.StringMatcher_SafeRegex{SafeRegex: &matcher.RegexMatcher{Regex: m.Regex}}}
	}
	return nil
}

const jwtClaimHeader = "@request.auth.claims"

// rtClaimMatcher turns a "@request.auth.claims.NAME" (or "[A][B]") header
// match into the JWT payload metadata matcher istiod uses; nil for any
// other header.
func rtClaimMatcher(name string, in *networking.StringMatch) *matcher.MetadataMatcher {
	if !strings.HasPrefix(strings.ToLower(name), jwtClaimHeader) {
		return nil
	}
	rest := name[len(jwtClaimHeader):]
	var claims []string
	switch {
	case strings.HasPrefix(rest, ".") && len(rest) > 1:
		claims = strings.Split(rest[1:], ".")
	case strings.HasPrefix(rest, "[") && strings.HasSuffix(rest, "]") && len(rest) > 2:
		claims = strings.Split(rest[1:len(rest)-1], "][")
	default:
		return nil
	}
	value := &matcher.ValueMatcher{MatchPattern: &matcher.ValueMatcher_StringMatch{StringMatch: rtStringMatcher(in)}}
	path := make([]*matcher.MetadataMatcher_PathSegment, 0, len(claims)+1)
	for _, k := range append([]string{"payload"}, claims...) {
		path = append(path, &matcher.MetadataMatcher_PathSegment{Segment: &matcher.MetadataMatcher_PathSegment_Key{Key: k}})
	}
	return &matcher.MetadataMatcher{
		Filter: "envoy.filters.http.jwt_authn",
		Path:   path,
		Value: &matcher.ValueMatcher{MatchPattern: &matcher.ValueMatcher_OrMatch{OrMatch: &matcher.OrMatcher{
			ValueMatchers: []*matcher.ValueMatcher{
				{MatchPattern: &matcher.ValueMatcher_ListMatch{ListMatch: &matcher.ListMatcher{
					MatchPattern: &matcher.ListMatcher_OneOf{OneOf: value},
				}}},
				value,
			},
		}}},
	}
}

// rtHeaderOps is the translation of a VirtualService Headers block.
type rtHeaderOpsResult struct {
	reqAdd, respAdd       []*core.HeaderValueOption
	reqRemove, respRemove []string
	authority             string
}

// rtHeaderOps is istiod's TranslateHeadersOperations: set overwrites, add
// appends, each sorted by name; ":authority"/"host" become a host rewrite.
func rtHeaderOps(h *networking.Headers) rtHeaderOpsResult {
	req, resp := h.GetRequest(), h.GetResponse()
	var out rtHeaderOpsResult
	var setAuth, addAuth string
	out.reqAdd, setAuth = rtAppendHeaders(nil, req.GetSet(), false)
	out.reqAdd, addAuth = rtAppendHeaders(out.reqAdd, req.GetAdd(), true)
	out.respAdd, _ = rtAppendHeaders(nil, resp.GetSet(), false)
	out.respAdd, _ = rtAppendHeaders(out.respAdd, resp.GetAdd(), true)
	out.authority = addAuth
	if setAuth != "" {
		out.authority = setAuth
	}
	out.reqRemove = rtDropInternal(req.GetRemove())
	out.respRemove = rtDropInternal(resp.GetRemove())
	return out
}

func rtAppendHeaders(dst []*core.HeaderValueOption, headers map[string]string, appendFlag bool) ([]*core.HeaderValueOption, string) {
	authority := ""
	for _, k := range sortedKeys(headers) {
		v := headers[k]
		if strings.EqualFold(k, ":authority") || strings.EqualFold(k, "host") {
			authority = v
		}
		if rtInternalHeader(k) {
			continue
		}
		action := core.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD
		if appendFlag {
			action = core.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD
		}
		dst = append(dst, &core.HeaderValueOption{Header: &core.HeaderValue{Key: k, Value: v}, AppendAction: action})
	}
	return dst, authority
}

func rtInternalHeader(k string) bool {
	return strings.HasPrefix(k, ":") || strings.EqualFold(k, "host")
}

func rtDropInternal(keys []string) []string {
	var out []string
	for _, k := range keys {
		if !rtInternalHeader(k) {
			out = append(out, k)
		}
	}
	return out
}

// labelsHold reports whether every label of want is among labels, given as
// sorted "k=v" lines (the keys' SourceLabels). Label keys and values hold
// neither "=" nor a newline, so a line is found by its text.
func labelsHold(labels string, want map[string]string) bool {
	for k, v := range want {
		if !hasLine(labels, k, v) {
			return false
		}
	}
	return true
}

// hasLine reports whether lines holds the line "k=v".
func hasLine(lines, k, v string) bool {
	for len(lines) > 0 {
		line := lines
		if i := strings.IndexByte(lines, '\n'); i >= 0 {
			line, lines = lines[:i], lines[i+1:]
		} else {
			lines = ""
		}
		if len(line) == len(k)+1+len(v) && strings.HasPrefix(line, k) && line[len(k)] == '=' && strings.HasSuffix(line, v) {
			return true
		}
	}
	return false
}

package encode

import (
	"fmt"
	"slices"
	"strings"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	rbac "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	extauthzhttp "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	rbachttp "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	extauthztcp "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/ext_authz/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	rbactcp "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/rbac/v3"
	matcher "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	security "istio.io/api/security/v1beta1"

	"github.com/pilotfish-mesh/pilotfish/index"
)

// External authorization (AuthorizationPolicy action CUSTOM with a mesh
// config extensionProviders entry of kind envoyExtAuthzHttp or
// envoyExtAuthzGrpc), as istiod's CUSTOM builder generates it: per provider
// named by the workload's CUSTOM policies, an RBAC filter whose shadow
// rules (the policies' rules, action DENY) mark a matching request in
// dynamic metadata, then an ext_authz filter enabled only by that mark. A
// provider istiod cannot use (undefined, invalid, its service missing, or
// more than one provider on a workload) turns the policies' rules into
// enforced DENY rules instead.

const (
	extAuthzHTTPFilterName = "envoy.filters.http.ext_authz"
	extAuthzTCPFilterName  = "envoy.filters.network.ext_authz"
	// extAuthzPrefix starts the CUSTOM rules' names; the ext_authz filter
	// runs when the effective shadow policy's name starts with it and the
	// provider's name.
	extAuthzPrefix          = "istio-ext-authz"
	extAuthzStatPrefix      = "istio_ext_authz_"
	extAuthzMetadataKey     = extAuthzStatPrefix + "shadow_effective_policy_id"
	extAuthzBadCustomSuffix = "-deny-due-to-bad-CUSTOM-action"
	// extAuthzDefaultTimeout is istiod's when the provider sets none.
	extAuthzDefaultTimeout = 600 * time.Second
)

// ExtAuthzKind is an extension provider's kind.
type ExtAuthzKind uint8

const (
	// ExtAuthzHTTP is envoyExtAuthzHttp.
	ExtAuthzHTTP ExtAuthzKind = iota + 1
	// ExtAuthzGRPC is envoyExtAuthzGrpc.
	ExtAuthzGRPC
)

// ExtAuthzProvider is one mesh config extensionProviders entry of an
// ext_authz kind, as values (engine/mesh_extauthz.go copies it).
type ExtAuthzProvider struct {
	Name string
	Kind ExtAuthzKind
	// Service is "host" or "namespace/host"; Port its port.
	Service string
	Port    uint32
	// Timeout of the check (TimeoutSet false: istiod's 600s).
	Timeout    time.Duration
	TimeoutSet bool
	PathPrefix string // HTTP only
	FailOpen   bool
	// StatusOnError is the HTTP status on a failed check (0: unset).
	StatusOnError uint32
	// Header lists (HTTP only), as written: "*x" suffix, "x*" prefix, else
	// exact, all case-insensitive.
	IncludeRequestHeaders      []string
	AdditionalHeaders          []ExtAuthzHeader // sorted by Key
	HeadersToUpstreamOnAllow   []string
	HeadersToDownstreamOnDeny  []string
	HeadersToDownstreamOnAllow []string
	// Body is includeRequestBodyInCheck (nil: unset).
	Body *ExtAuthzBody
	// Err says why istiod refuses the provider ("": usable); policies
	// naming it then deny what they match.
	Err string
}

// ExtAuthzHeader is one includeAdditionalHeadersInCheck entry.
type ExtAuthzHeader struct{ Key, Value string }

// ExtAuthzBody is includeRequestBodyInCheck.
type ExtAuthzBody struct {
	MaxRequestBytes     uint32
	AllowPartialMessage bool
	PackAsBytes         bool
}

// AuthzProvider is a provider named by a workload's CUSTOM policies,
// resolved against the registry: Cluster is its service's outbound cluster
// ("outbound|PORT||HOST"), Err why the provider cannot be used.
type AuthzProvider struct {
	Name     string
	Provider ExtAuthzProvider
	Hostname string
	Cluster  string
	Err      string
}

func (p *ExtAuthzProvider) clone() ExtAuthzProvider {
	c := *p
	c.IncludeRequestHeaders = cloneStrings(p.IncludeRequestHeaders)
	c.AdditionalHeaders = slices.Clone(p.AdditionalHeaders)
	c.HeadersToUpstreamOnAllow = cloneStrings(p.HeadersToUpstreamOnAllow)
	c.HeadersToDownstreamOnDeny = cloneStrings(p.HeadersToDownstreamOnDeny)
	c.HeadersToDownstreamOnAllow = cloneStrings(p.HeadersToDownstreamOnAllow)
	if p.Body != nil {
		b := *p.Body
		c.Body = &b
	}
	return c
}

func cloneExtAuthz(ps []ExtAuthzProvider) []ExtAuthzProvider {
	if ps == nil {
		return nil
	}
	out := make([]ExtAuthzProvider, len(ps))
	for i := range ps {
		out[i] = ps[i].clone()
	}
	return out
}

func (p *ExtAuthzProvider) hashInto(h *Hasher) {
	h.Str(p.Name)
	h.U32(uint32(p.Kind))
	h.Str(p.Service)
	h.U32(p.Port)
	h.U64(uint64(p.Timeout))
	h.Bool(p.TimeoutSet)
	h.Str(p.PathPrefix)
	h.Bool(p.FailOpen)
	h.U32(p.StatusOnError)
	for _, l := range [...][]string{p.IncludeRequestHeaders, p.HeadersToUpstreamOnAllow, p.HeadersToDownstreamOnDeny, p.HeadersToDownstreamOnAllow} {
		h.Strs(l)
	}
	h.Int(len(p.AdditionalHeaders))
	for _, a := range p.AdditionalHeaders {
		h.Str(a.Key)
		h.Str(a.Value)
	}
	h.Bool(p.Body != nil)
	if p.Body != nil {
		h.U32(p.Body.MaxRequestBytes)
		h.Bool(p.Body.AllowPartialMessage)
		h.Bool(p.Body.PackAsBytes)
	}
	h.Str(p.Err)
}

func hashExtAuthz(h *Hasher, ps []ExtAuthzProvider) {
	h.Int(len(ps))
	for i := range ps {
		ps[i].hashInto(h)
	}
}

func (p *AuthzProvider) hashInto(h *Hasher) {
	h.Str(p.Name)
	p.Provider.hashInto(h)
	h.Str(p.Hostname)
	h.Str(p.Cluster)
	h.Str(p.Err)
}

// customRules are the CUSTOM policies' rules naming provider, enforced
// ones (dry-run false) or dry-run ones, named as istiod names them. Never
// nil: istiod keeps an empty rule set per provider.
func (a *AuthzPolicies) customRules(names index.Names, provider string, t azTarget, dryRun bool) *rbac.RBAC {
	out := &rbac.RBAC{Action: rbac.RBAC_DENY, Policies: map[string]*rbac.Policy{}}
	for _, c := range a.Custom {
		ap, ok := c.Spec.(*security.AuthorizationPolicy)
		if !ok || ap.GetProvider().GetName() != provider || c.DryRun != dryRun {
			continue
		}
		ns, name := names.String(c.Key.Namespace), names.String(c.Key.Name)
		prefix := extAuthzPrefix + "-" + provider + "-"
		if provider == "" {
			prefix = extAuthzPrefix + "-"
		}
		for i, r := range ap.GetRules() {
			if r == nil {
				continue
			}
			p, err := azPolicy(r, ns, a.TrustDomains, t, rbac.RBAC_DENY)
			if err != nil {
				continue
			}
			out.Policies[prefix+azPolicyName(ns, name, i, t)] = p
		}
		if len(ap.GetRules()) == 0 {
			out.Policies[prefix+azPolicyName(ns, name, 0, t)] = rbacNever
		}
	}
	return out
}

// customProviders are the providers the CUSTOM policies name, sorted.
func (a *AuthzPolicies) customProviders() []string {
	var out []string
	for _, c := range a.Custom {
		if ap, ok := c.Spec.(*security.AuthorizationPolicy); ok {
			out = append(out, ap.GetProvider().GetName())
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// provider is the resolved provider named name, or one whose Err says it
// is not defined.
func (a *AuthzPolicies) provider(name string) AuthzProvider {
	for _, p := range a.Providers {
		if p.Name == name {
			return p
		}
	}
	return AuthzProvider{Name: name, Err: fmt.Sprintf("extension provider %q is not defined", name)}
}

// badCustom is istiod's RBAC for a provider it cannot use: the enforced
// CUSTOM rules, denied.
func badCustom(rules *rbac.RBAC) *rbac.RBAC {
	out := &rbac.RBAC{Action: rbac.RBAC_DENY, Policies: make(map[string]*rbac.Policy, len(rules.Policies))}
	for k, p := range rules.Policies {
		out.Policies[k+extAuthzBadCustomSuffix] = p
	}
	return out
}

// customHTTPFilters are the CUSTOM filters of an HTTP chain, first of the
// security filters (before jwt_authn), as istiod orders them.
func customHTTPFilters(names index.Names, a *AuthzPolicies) []*hcm.HttpFilter {
	providers := a.customProviders()
	var out []*hcm.HttpFilter
	for _, name := range providers {
		enforced := a.customRules(names, name, azHTTP, false)
		p := a.provider(name)
		if p.Err != "" || len(providers) > 1 {
			out = append(out, hfTyped(rbacHTTPFilterName, &rbachttp.RBAC{Rules: badCustom(enforced)}))
			continue
		}
		r := &rbachttp.RBAC{ShadowRules: enforced, ShadowRulesStatPrefix: extAuthzStatPrefix}
		if dry := a.customRules(names, name, azHTTP, true); len(dry.Policies) > 0 {
			r.Rules = dry
		}
		out = append(out, hfTyped(rbacHTTPFilterName, r), hfTyped(extAuthzHTTPFilterName, p.httpFilter()))
	}
	return out
}

// customTCPFilters are the CUSTOM network filters of a TCP chain; an HTTP
// provider has none there.
func customTCPFilters(names index.Names, a *AuthzPolicies) []*listener.Filter {
	providers := a.customProviders()
	var out []*listener.Filter
	for _, name := range providers {
		enforced := a.customRules(names, name, azTCP, false)
		p := a.provider(name)
		if p.Err != "" || len(providers) > 1 {
			out = append(out, nfTyped(rbacTCPFilterName, &rbactcp.RBAC{Rules: badCustom(enforced), StatPrefix: rbacTCPStatPrefix}))
			continue
		}
		if p.Provider.Kind != ExtAuthzGRPC {
			continue
		}
		r := &rbactcp.RBAC{ShadowRules: enforced, StatPrefix: rbacTCPStatPrefix, ShadowRulesStatPrefix: extAuthzStatPrefix}
		if dry := a.customRules(names, name, azTCP, true); len(dry.Policies) > 0 {
			r.Rules = dry
		}
		out = append(out, nfTyped(rbacTCPFilterName, r), nfTyped(extAuthzTCPFilterName, &extauthztcp.ExtAuthz{
			StatPrefix:            rbacTCPStatPrefix,
			FailureModeAllow:      p.Provider.FailOpen,
			TransportApiVersion:   core.ApiVersion_V3,
			GrpcService:           p.grpcService(),
			FilterEnabledMetadata: extAuthzEnabled(rbacTCPFilterName, name),
		}))
	}
	return out
}

func nfTyped(name string, m proto.Message) *listener.Filter {
	return &listener.Filter{Name: name, ConfigType: &listener.Filter_TypedConfig{TypedConfig: rtAny(m)}}
}

func (p *AuthzProvider) timeout() *durationpb.Duration {
	if !p.Provider.TimeoutSet {
		return durationpb.New(extAuthzDefaultTimeout)
	}
	return durationpb.New(p.Provider.Timeout)
}

func (p *AuthzProvider) grpcService() *core.GrpcService {
	return &core.GrpcService{
		TargetSpecifier: &core.GrpcService_EnvoyGrpc_{EnvoyGrpc: &core.GrpcService_EnvoyGrpc{ClusterName: p.Cluster, Authority: p.Hostname}},
		Timeout:         p.timeout(),
	}
}

func (p *AuthzProvider) httpFilter() *extauthzhttp.ExtAuthz {
	c := &p.Provider
	f := &extauthzhttp.ExtAuthz{
		FailureModeAllow:      c.FailOpen,
		TransportApiVersion:   core.ApiVersion_V3,
		FilterEnabledMetadata: extAuthzEnabled(rbacHTTPFilterName, p.Name),
	}
	if c.StatusOnError != 0 {
		f.StatusOnError = &typev3.HttpStatus{Code: typev3.StatusCode(c.StatusOnError)}
	}
	if c.Body != nil {
		f.WithRequestBody = &extauthzhttp.BufferSettings{MaxRequestBytes: c.Body.MaxRequestBytes,
			AllowPartialMessage: c.Body.AllowPartialMessage, PackAsBytes: c.Body.PackAsBytes}
	}
	if c.Kind == ExtAuthzGRPC {
		f.Services = &extauthzhttp.ExtAuthz_GrpcService{GrpcService: p.grpcService()}
		return f
	}
	svc := &extauthzhttp.HttpService{
		PathPrefix: c.PathPrefix,
		ServerUri: &core.HttpUri{
			Uri:              "http://" + p.Hostname,
			HttpUpstreamType: &core.HttpUri_Cluster{Cluster: p.Cluster},
			Timeout:          p.timeout(),
		},
	}
	if len(c.AdditionalHeaders) > 0 {
		add := make([]*core.HeaderValue, len(c.AdditionalHeaders))
		for i, hv := range c.AdditionalHeaders {
			add[i] = &core.HeaderValue{Key: hv.Key, Value: hv.Value}
		}
		svc.AuthorizationRequest = &extauthzhttp.AuthorizationRequest{HeadersToAdd: add}
	}
	if len(c.HeadersToUpstreamOnAllow)+len(c.HeadersToDownstreamOnDeny)+len(c.HeadersToDownstreamOnAllow) > 0 {
		svc.AuthorizationResponse = &extauthzhttp.AuthorizationResponse{
			AllowedUpstreamHeaders:        extAuthzHeaders(c.HeadersToUpstreamOnAllow),
			AllowedClientHeaders:          extAuthzHeaders(c.HeadersToDownstreamOnDeny),
			AllowedClientHeadersOnSuccess: extAuthzHeaders(c.HeadersToDownstreamOnAllow),
		}
	}
	f.Services = &extauthzhttp.ExtAuthz_HttpService{HttpService: svc}
	f.AllowedHeaders = extAuthzHeaders(c.IncludeRequestHeaders)
	return f
}

// extAuthzHeaders are header names as case-insensitive matchers: "*x"
// matches the suffix, "x*" the prefix.
func extAuthzHeaders(hs []string) *matcher.ListStringMatcher {
	if len(hs) == 0 {
		return nil
	}
	out := &matcher.ListStringMatcher{Patterns: make([]*matcher.StringMatcher, len(hs))}
	for i, v := range hs {
		m := &matcher.StringMatcher{IgnoreCase: true}
		if s, ok := strings.CutPrefix(v, "*"); ok {
			m.MatchPattern = &matcher.StringMatcher_Suffix{Suffix: s}
		} else if s, ok := strings.CutSuffix(v, "*"); ok {
			m.MatchPattern = &matcher.StringMatcher_Prefix{Prefix: s}
		} else {
			m.MatchPattern = &matcher.StringMatcher_Exact{Exact: v}
		}
		out.Patterns[i] = m
	}
	return out
}

// extAuthzEnabled enables an ext_authz filter when the RBAC filter's
// effective shadow policy is one of provider's CUSTOM rules.
func extAuthzEnabled(rbacFilter, provider string) *matcher.MetadataMatcher {
	return &matcher.MetadataMatcher{
		Filter: rbacFilter,
		Path:   []*matcher.MetadataMatcher_PathSegment{{Segment: &matcher.MetadataMatcher_PathSegment_Key{Key: extAuthzMetadataKey}}},
		Value: &matcher.ValueMatcher{MatchPattern: &matcher.ValueMatcher_StringMatch{StringMatch: &matcher.StringMatcher{
			MatchPattern: &matcher.StringMatcher_Prefix{Prefix: extAuthzPrefix + "-" + provider},
		}}},
	}
}

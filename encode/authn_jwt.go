package encode

import (
	"cmp"
	"slices"
	"strconv"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	jwt "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/jwt_authn/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/emptypb"
	security "istio.io/api/security/v1beta1"

	"github.com/pilotfish-mesh/pilotfish/index"
)

const (
	jwtFilterName = "envoy.filters.http.jwt_authn"
	// jwtPayloadKey is where jwt_authn stores a verified token's payload in
	// its dynamic metadata; RBAC's request principal, audience, presenter
	// and claim matchers read it there.
	jwtPayloadKey = "payload"
)

// JWKSRejectAll is the key set inlined for a rule whose keys the control
// plane could not fetch (or has not yet): one public RSA key whose private
// key was discarded when it was made, so that no token verifies and a
// request carrying one gets 401, failing closed. It is istiod's value
// (PublicOnlyJwks), byte for byte, so that both control planes send the
// same listener.
const JWKSRejectAll = `{
  "keys": [
    {
      "kty": "RSA",
      "e": "AQAB",
      "n": "0xObjM0UvS_oaazjpEYlAbwctEJ4L8pH3OuTb7qth7gUwqet-EzQB4dgFdvSdMgrLnSncQGRjpEYz3F3viIbH-3EN3TxSlPNviHxeOdyiBVfumN8dMxbLvVJUpfNOnvmMxJcl-8NNjAwcOjk4otSALaYgYYyOPyvKtgVdrQr-FoubWX4yrjxW-MJ2-7OBeepUUNOsVwGV23YX03sVkkyvY3otRflkBcY3_HKpBxJl9wk2GyOShN4_PNUF9-vwfnvOXMbCDX-w4PTef4geeb_GiT40YCKHTKMSPVanGRn5GExIWmki-mmqh94-mPTJyBR74ShspL3BxPZitDL574T1w"
    }
  ]
}`

// JWTRules are the RequestAuthentications selecting a workload (root
// namespace first) and where the keys of each of their JWT rules come
// from.
type JWTRules struct {
	Policies []*index.Config
	// Keys has one entry per non-nil JWT rule of Policies, in order.
	Keys []JWTKeys
}

// JWTKeys is where one JWT rule's keys come from: its own jwks when set;
// else Envoy fetching its jwksUri through Cluster, when set
// (PILOT_JWT_ENABLE_REMOTE_JWKS envoy, or hybrid for a mesh host); else the
// ConfigJWKS row the control plane fetched, Fetched (nil: none, the rule
// gets JWKSRejectAll).
type JWTKeys struct {
	Cluster string
	Fetched *index.Config
}

// Empty reports whether no policy applies.
func (j *JWTRules) Empty() bool { return len(j.Policies) == 0 }

func (j *JWTRules) hashInto(h *Hasher) {
	hashCfgRows(h, j.Policies)
	h.Int(len(j.Keys))
	for _, k := range j.Keys {
		h.Str(k.Cluster)
		hashCfgRow(h, k.Fetched)
	}
}

// jwtRule is one JWT rule and its keys.
type jwtRule struct {
	r    *security.JWTRule
	keys JWTKeys
}

// rules lists the JWT rules of j's policies with their keys, sorted by
// issuer (stable), as istiod orders its providers.
func (j *JWTRules) rules() []jwtRule {
	var out []jwtRule
	for _, c := range j.Policies {
		ra, ok := c.Spec.(*security.RequestAuthentication)
		if !ok {
			continue
		}
		for _, r := range ra.GetJwtRules() {
			if r == nil {
				continue
			}
			var k JWTKeys
			if len(out) < len(j.Keys) {
				k = j.Keys[len(out)]
			}
			out = append(out, jwtRule{r, k})
		}
	}
	slices.SortStableFunc(out, func(a, b jwtRule) int { return cmp.Compare(a.r.GetIssuer(), b.r.GetIssuer()) })
	return out
}

// jwtFilter is istiod's jwt_authn filter for j: one provider per JWT rule,
// "origins-N" in issuer order. A request without a token passes
// (AuthorizationPolicy decides, e.g. with requestPrincipals ["*"]); a
// token must verify with a provider that accepts it, else 401. With one
// provider the requirement is {provider OR missing}; with several, any
// provider, OR all of {provider OR missing} (so that providers sharing a
// token location still accept their own tokens). Routers clear the route
// cache after verifying (routes may match on claims). nil when no rule
// applies.
func jwtFilter(j *JWTRules, clearRouteCache bool) *hcm.HttpFilter {
	rules := j.rules()
	if len(rules) == 0 {
		return nil
	}
	cfg := &jwt.JwtAuthentication{Providers: make(map[string]*jwt.JwtProvider, len(rules)), BypassCorsPreflight: true}
	inner := make([]*jwt.JwtRequirement, 0, len(rules))
	outer := make([]*jwt.JwtRequirement, 0, len(rules)+1)
	for i, jr := range rules {
		name := "origins-" + strconv.Itoa(i)
		cfg.Providers[name] = jwtProvider(jr.r, jr.keys, clearRouteCache)
		inner = append(inner, jwtAny(jwtByName(name), jwtAllowMissing()))
		outer = append(outer, jwtByName(name))
	}
	req := inner[0]
	if len(inner) > 1 {
		req = jwtAny(append(outer, &jwt.JwtRequirement{RequiresType: &jwt.JwtRequirement_RequiresAll{
			RequiresAll: &jwt.JwtRequirementAndList{Requirements: inner},
		}})...)
	}
	cfg.Rules = []*jwt.RequirementRule{{
		Match:           &route.RouteMatch{PathSpecifier: &route.RouteMatch_Prefix{Prefix: "/"}},
		RequirementType: &jwt.RequirementRule_Requires{Requires: req},
	}}
	return hfTyped(jwtFilterName, cfg)
}

func jwtByName(name string) *jwt.JwtRequirement {
	return &jwt.JwtRequirement{RequiresType: &jwt.JwtRequirement_ProviderName{ProviderName: name}}
}

func jwtAllowMissing() *jwt.JwtRequirement {
	return &jwt.JwtRequirement{RequiresType: &jwt.JwtRequirement_AllowMissing{AllowMissing: &emptypb.Empty{}}}
}

func jwtAny(reqs ...*jwt.JwtRequirement) *jwt.JwtRequirement {
	return &jwt.JwtRequirement{RequiresType: &jwt.JwtRequirement_RequiresAny{
		RequiresAny: &jwt.JwtRequirementOrList{Requirements: reqs},
	}}
}

// jwtSpaceDelimitedDefault are the claims istiod always splits on spaces.
var jwtSpaceDelimitedDefault = []string{"permission", "scope"}

func jwtProvider(r *security.JWTRule, keys JWTKeys, clearRouteCache bool) *jwt.JwtProvider {
	p := &jwt.JwtProvider{
		Issuer:               r.GetIssuer(),
		Audiences:            r.GetAudiences(),
		Forward:              r.GetForwardOriginalToken(),
		ForwardPayloadHeader: r.GetOutputPayloadToHeader(),
		PayloadInMetadata:    jwtPayloadKey,
		NormalizePayloadInMetadata: &jwt.JwtProvider_NormalizePayload{
			SpaceDelimitedClaims: jwtSpaceDelimited(r.GetSpaceDelimitedClaims()),
		},
		ClearRouteCache: clearRouteCache,
		FromParams:      r.GetFromParams(),
		FromCookies:     r.GetFromCookies(),
	}
	for _, c := range r.GetOutputClaimToHeaders() {
		p.ClaimToHeaders = append(p.ClaimToHeaders, &jwt.JwtClaimToHeader{HeaderName: c.GetHeader(), ClaimName: c.GetClaim()})
	}
	for _, h := range r.GetFromHeaders() {
		p.FromHeaders = append(p.FromHeaders, &jwt.JwtHeader{Name: h.GetName(), ValuePrefix: h.GetPrefix()})
	}
	if keys.Cluster != "" {
		timeout := r.GetTimeout()
		if timeout == nil {
			timeout = durationpb.New(5e9)
		}
		p.JwksSourceSpecifier = &jwt.JwtProvider_RemoteJwks{RemoteJwks: &jwt.RemoteJwks{
			HttpUri: &core.HttpUri{
				Uri:              r.GetJwksUri(),
				HttpUpstreamType: &core.HttpUri_Cluster{Cluster: keys.Cluster},
				Timeout:          timeout,
			},
			CacheDuration: durationpb.New(5 * 60e9),
		}}
		return p
	}
	p.JwksSourceSpecifier = &jwt.JwtProvider_LocalJwks{LocalJwks: &core.DataSource{
		Specifier: &core.DataSource_InlineString{InlineString: jwtLocalKeys(r, keys.Fetched)},
	}}
	return p
}

// jwtLocalKeys is the key set inlined for a rule: its own jwks, else the
// one fetched for it, else JWKSRejectAll.
func jwtLocalKeys(r *security.JWTRule, fetched *index.Config) string {
	if s := r.GetJwks(); s != "" {
		return s
	}
	if fetched != nil {
		if ks, ok := fetched.Spec.(index.JWKS); ok && ks.Keys != "" {
			return ks.Keys
		}
	}
	return JWKSRejectAll
}

// jwtSpaceDelimited is istiod's list: the defaults alone, or sorted and
// without repeats with the rule's own.
func jwtSpaceDelimited(own []string) []string {
	if own == nil {
		return jwtSpaceDelimitedDefault
	}
	out := append(slices.Clone(own), jwtSpaceDelimitedDefault...)
	slices.Sort(out)
	return slices.Compact(out)
}

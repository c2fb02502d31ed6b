package encode

import (
	"net"
	"net/url"
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

// jwtFilter is the jwt_authn filter of RequestAuthentication rows (in
// istiod's order): one provider per JWT rule, "origins-N". A request
// without a token passes (AuthorizationPolicy decides, e.g. with
// requestPrincipals ["*"]); a request with a token no provider accepts is
// rejected with 401, as in Istio. nil when no rule applies.
//
// jwksUri is fetched by Envoy (remote_jwks) through the cluster of the URI's
// host, "outbound|PORT||HOST": the JWKS server must be a mesh service or a
// ServiceEntry. istiod fetches it itself by default and inlines it;
// pilotfish's generators never reach outside their key.
func jwtFilter(names index.Names, ras []*index.Config) *hcm.HttpFilter {
	cfg := &jwt.JwtAuthentication{Providers: map[string]*jwt.JwtProvider{}, BypassCorsPreflight: true}
	var reqs []*jwt.JwtRequirement
	n := 0
	for _, c := range ras {
		ra, ok := c.Spec.(*security.RequestAuthentication)
		if !ok {
			continue
		}
		for _, r := range ra.GetJwtRules() {
			if r == nil || r.GetIssuer() == "" && r.GetJwksUri() == "" && r.GetJwks() == "" {
				continue
			}
			p := jwtProvider(r)
			if p == nil {
				continue
			}
			name := "origins-" + strconv.Itoa(n)
			n++
			cfg.Providers[name] = p
			reqs = append(reqs, &jwt.JwtRequirement{RequiresType: &jwt.JwtRequirement_ProviderName{ProviderName: name}})
		}
	}
	if n == 0 {
		return nil
	}
	reqs = append(reqs, &jwt.JwtRequirement{RequiresType: &jwt.JwtRequirement_AllowMissing{AllowMissing: &emptypb.Empty{}}})
	cfg.Rules = []*jwt.RequirementRule{{
		Match: &route.RouteMatch{PathSpecifier: &route.RouteMatch_Prefix{Prefix: "/"}},
		RequirementType: &jwt.RequirementRule_Requires{Requires: &jwt.JwtRequirement{
			RequiresType: &jwt.JwtRequirement_RequiresAny{RequiresAny: &jwt.JwtRequirementOrList{Requirements: reqs}},
		}},
	}}
	return hfTyped(jwtFilterName, cfg)
}

func jwtProvider(r *security.JWTRule) *jwt.JwtProvider {
	p := &jwt.JwtProvider{
		Issuer:               r.GetIssuer(),
		Audiences:            r.GetAudiences(),
		Forward:              r.GetForwardOriginalToken(),
		FromParams:           r.GetFromParams(),
		FromCookies:          r.GetFromCookies(),
		ForwardPayloadHeader: r.GetOutputPayloadToHeader(),
		PayloadInMetadata:    jwtPayloadKey,
	}
	for _, h := range r.GetFromHeaders() {
		p.FromHeaders = append(p.FromHeaders, &jwt.JwtHeader{Name: h.GetName(), ValuePrefix: h.GetPrefix()})
	}
	for _, c := range r.GetOutputClaimToHeaders() {
		p.ClaimToHeaders = append(p.ClaimToHeaders, &jwt.JwtClaimToHeader{HeaderName: c.GetHeader(), ClaimName: c.GetClaim()})
	}
	switch {
	case r.GetJwks() != "":
		p.JwksSourceSpecifier = &jwt.JwtProvider_LocalJwks{LocalJwks: &core.DataSource{
			Specifier: &core.DataSource_InlineString{InlineString: r.GetJwks()},
		}}
	case r.GetJwksUri() != "":
		cluster, ok := jwksCluster(r.GetJwksUri())
		if !ok {
			return nil
		}
		timeout := durationpb.New(5e9)
		if r.GetTimeout() != nil {
			timeout = r.GetTimeout()
		}
		p.JwksSourceSpecifier = &jwt.JwtProvider_RemoteJwks{RemoteJwks: &jwt.RemoteJwks{
			HttpUri: &core.HttpUri{
				Uri:              r.GetJwksUri(),
				HttpUpstreamType: &core.HttpUri_Cluster{Cluster: cluster},
				Timeout:          timeout,
			},
			CacheDuration: durationpb.New(5 * 60e9),
		}}
	default:
		return nil // no key source: validation requires one (OpenID discovery is not done)
	}
	return p
}

// jwksCluster is the outbound cluster of a JWKS URI's host.
func jwksCluster(uri string) (string, bool) {
	u, err := url.Parse(uri)
	if err != nil || u.Hostname() == "" {
		return "", false
	}
	port := uint64(80)
	if u.Scheme == "https" {
		port = 443
	}
	if p := u.Port(); p != "" {
		n, err := strconv.ParseUint(p, 10, 16)
		if err != nil {
			return "", false
		}
		port = n
	}
	host := u.Hostname()
	if ip := net.ParseIP(host); ip != nil {
		return "", false
	}
	return outboundClusterName(uint32(port), "", host), true
}

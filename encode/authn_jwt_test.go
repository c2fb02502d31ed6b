package encode

import (
	"testing"

	jwt "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/jwt_authn/v3"
	security "istio.io/api/security/v1beta1"

	"github.com/pilotfish-mesh/pilotfish/index"
)

// TestJWTFilter: RequestAuthentication rules become jwt_authn providers
// (inline JWKS, or remote JWKS through the URI host's outbound cluster),
// requiring any of them or no token; rules without a key source are left
// out, and no usable rule means no filter.
func TestJWTFilter(t *testing.T) {
	syms := index.NewSymbols()
	row := func(name string, rules ...*security.JWTRule) *index.Config {
		return &index.Config{Kind: index.ConfigRequestAuthentication,
			Key:  index.ConfigKey{Namespace: syms.Intern("shop"), Name: syms.Intern(name)},
			Spec: &security.RequestAuthentication{JwtRules: rules}}
	}
	ras := []*index.Config{
		row("inline", &security.JWTRule{Issuer: "https://a.example", Audiences: []string{"shop"}, Jwks: `{"keys":[]}`,
			FromHeaders: []*security.JWTHeader{{Name: "x-jwt", Prefix: "Bearer "}}, ForwardOriginalToken: true}),
		row("remote", &security.JWTRule{Issuer: "https://b.example", JwksUri: "https://keys.b.example:8443/jwks.json"},
			&security.JWTRule{Issuer: "https://no-keys.example"}),
	}
	f := jwtFilter(index.NamesOf(syms, nil), ras)
	if f == nil {
		t.Fatal("no filter")
	}
	cfg := &jwt.JwtAuthentication{}
	if err := f.GetTypedConfig().UnmarshalTo(cfg); err != nil {
		t.Fatal(err)
	}
	if err := cfg.ValidateAll(); err != nil {
		t.Fatal(err)
	}
	if len(cfg.Providers) != 2 {
		t.Fatalf("%d providers, want 2 (the rule without keys is left out)", len(cfg.Providers))
	}
	a, b := cfg.Providers["origins-0"], cfg.Providers["origins-1"]
	if a.GetLocalJwks().GetInlineString() != `{"keys":[]}` || a.Issuer != "https://a.example" || !a.Forward ||
		a.FromHeaders[0].ValuePrefix != "Bearer " || a.PayloadInMetadata != jwtPayloadKey {
		t.Errorf("inline provider %v", a)
	}
	if got := b.GetRemoteJwks().GetHttpUri().GetCluster(); got != "outbound|8443||keys.b.example" {
		t.Errorf("remote JWKS cluster %q", got)
	}
	reqs := cfg.Rules[0].GetRequires().GetRequiresAny().GetRequirements()
	if len(reqs) != 3 || reqs[0].GetProviderName() != "origins-0" || reqs[2].GetAllowMissing() == nil {
		t.Errorf("requirements %v: want any provider, or no token", reqs)
	}
	if jwtFilter(index.NamesOf(syms, nil), []*index.Config{row("empty", &security.JWTRule{Issuer: "https://no-keys.example"})}) != nil {
		t.Error("a filter without providers")
	}
}

package encode

import (
	"encoding/json"
	"testing"

	jwt "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/jwt_authn/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	security "istio.io/api/security/v1beta1"

	"github.com/pilotfish-mesh/pilotfish/index"
	"github.com/pilotfish-mesh/pilotfish/internal/xdstest"
)

func decodeJWT(t *testing.T, j *JWTRules, clearRouteCache bool) *jwt.JwtAuthentication {
	t.Helper()
	f := jwtFilter(j, clearRouteCache)
	if f == nil {
		t.Fatal("no filter")
	}
	cfg := &jwt.JwtAuthentication{}
	if err := f.GetTypedConfig().UnmarshalTo(cfg); err != nil {
		t.Fatal(err)
	}
	if err := xdstest.Validate(cfg); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestJWTFilter: every RequestAuthentication rule becomes a jwt_authn
// provider, in issuer order, as istiod builds it: its own jwks inline, the
// key set the control plane fetched inline, the reject-all set when none
// was fetched, or Envoy's remote fetch through a cluster; several
// providers are required as istiod requires them.
func TestJWTFilter(t *testing.T) {
	syms := index.NewSymbols()
	row := func(name string, rules ...*security.JWTRule) *index.Config {
		return &index.Config{Kind: index.ConfigRequestAuthentication,
			Key:  index.ConfigKey{Namespace: syms.Intern("shop"), Name: syms.Intern(name)},
			Spec: &security.RequestAuthentication{JwtRules: rules}}
	}
	fetched := &index.Config{Kind: index.ConfigJWKS, Hash: 7,
		Spec: index.JWKS{Issuer: "https://b.example", URI: "https://keys.b.example/jwks.json", Keys: `{"keys":[{"kty":"EC"}]}`}}
	j := &JWTRules{
		Policies: []*index.Config{
			row("inline", &security.JWTRule{Issuer: "https://d.example", Audiences: []string{"shop"}, Jwks: `{"keys":[]}`,
				FromHeaders: []*security.JWTHeader{{Name: "x-jwt", Prefix: "Bearer "}}, ForwardOriginalToken: true,
				SpaceDelimitedClaims: []string{"scope", "roles"}}),
			row("fetched", &security.JWTRule{Issuer: "https://b.example", JwksUri: "https://keys.b.example/jwks.json"},
				&security.JWTRule{Issuer: "https://c.example"}),
			row("remote", &security.JWTRule{Issuer: "https://a.example", JwksUri: "http://keys.a.example:8080/k",
				Timeout: durationpb.New(2e9)}),
		},
		Keys: []JWTKeys{{}, {Fetched: fetched}, {}, {Cluster: "outbound|8080||keys.a.example"}},
	}
	cfg := decodeJWT(t, j, false)
	if len(cfg.Providers) != 4 {
		t.Fatalf("%d providers, want 4", len(cfg.Providers))
	}
	a, b, c, d := cfg.Providers["origins-0"], cfg.Providers["origins-1"], cfg.Providers["origins-2"], cfg.Providers["origins-3"]
	if a.Issuer != "https://a.example" || b.Issuer != "https://b.example" || c.Issuer != "https://c.example" || d.Issuer != "https://d.example" {
		t.Fatalf("providers not in issuer order: %v %v %v %v", a.Issuer, b.Issuer, c.Issuer, d.Issuer)
	}
	if r := a.GetRemoteJwks(); r.GetHttpUri().GetCluster() != "outbound|8080||keys.a.example" || r.GetHttpUri().GetTimeout().AsDuration() != 2e9 ||
		r.GetCacheDuration().AsDuration() != 300e9 {
		t.Errorf("remote provider %v", a)
	}
	if got := b.GetLocalJwks().GetInlineString(); got != `{"keys":[{"kty":"EC"}]}` {
		t.Errorf("fetched provider inlines %q", got)
	}
	if got := c.GetLocalJwks().GetInlineString(); got != JWKSRejectAll {
		t.Errorf("a rule without fetched keys inlines %q, want the reject-all set", got)
	}
	if d.GetLocalJwks().GetInlineString() != `{"keys":[]}` || !d.Forward || d.FromHeaders[0].ValuePrefix != "Bearer " ||
		d.PayloadInMetadata != jwtPayloadKey || d.ClearRouteCache {
		t.Errorf("inline provider %v", d)
	}
	if got := d.GetNormalizePayloadInMetadata().GetSpaceDelimitedClaims(); len(got) != 3 || got[0] != "permission" || got[1] != "roles" || got[2] != "scope" {
		t.Errorf("space-delimited claims %v, want [permission roles scope]", got)
	}
	if got := a.GetNormalizePayloadInMetadata().GetSpaceDelimitedClaims(); len(got) != 2 || got[0] != "permission" {
		t.Errorf("default space-delimited claims %v", got)
	}
	// Several providers: any of them, or all of {provider or missing}.
	reqs := cfg.Rules[0].GetRequires().GetRequiresAny().GetRequirements()
	if len(reqs) != 5 || reqs[0].GetProviderName() != "origins-0" || reqs[3].GetProviderName() != "origins-3" {
		t.Fatalf("requirements %v", reqs)
	}
	all := reqs[4].GetRequiresAll().GetRequirements()
	if len(all) != 4 || all[2].GetRequiresAny().GetRequirements()[0].GetProviderName() != "origins-2" ||
		all[2].GetRequiresAny().GetRequirements()[1].GetAllowMissing() == nil {
		t.Errorf("inner requirements %v", all)
	}

	// One provider: {provider or missing}; a router clears the route cache.
	one := decodeJWT(t, &JWTRules{Policies: j.Policies[1:2], Keys: []JWTKeys{{}, {}}}, true)
	or := one.Rules[0].GetRequires().GetRequiresAny().GetRequirements()
	if len(one.Providers) != 2 || len(or) != 3 {
		t.Errorf("two rules of one policy: %d providers, %d requirements", len(one.Providers), len(or))
	}
	single := decodeJWT(t, &JWTRules{Policies: j.Policies[2:]}, true)
	sr := single.Rules[0].GetRequires().GetRequiresAny().GetRequirements()
	if len(sr) != 2 || sr[0].GetProviderName() != "origins-0" || sr[1].GetAllowMissing() == nil || !single.Providers["origins-0"].ClearRouteCache {
		t.Errorf("single provider: requirements %v, provider %v", sr, single.Providers["origins-0"])
	}
	if single.Providers["origins-0"].GetLocalJwks().GetInlineString() != JWKSRejectAll {
		t.Error("a jwksUri rule with no keys given fails open")
	}
	if jwtFilter(&JWTRules{Policies: []*index.Config{row("empty")}}, false) != nil {
		t.Error("a filter without providers")
	}
}

// TestJWKSRejectAllIsAKeySet: the reject-all set is a valid JSON Web Key
// Set with one RSA public key and no private part.
func TestJWKSRejectAllIsAKeySet(t *testing.T) {
	var set struct {
		Keys []map[string]any `json:"keys"`
	}
	if err := json.Unmarshal([]byte(JWKSRejectAll), &set); err != nil {
		t.Fatal(err)
	}
	if len(set.Keys) != 1 || set.Keys[0]["kty"] != "RSA" || set.Keys[0]["n"] == nil || set.Keys[0]["d"] != nil {
		t.Errorf("reject-all set %v", set.Keys)
	}
}

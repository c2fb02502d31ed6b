package encode

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/proto"
	security "istio.io/api/security/v1beta1"

	"github.com/pilotfish-mesh/pilotfish/index"
)

// TestGatewayHCMComposed: the HCM filter composed from parts marshaled once
// is byte for byte the marshaled gatewayHCM, with and without security
// filters (jwt_authn, RBAC) and with and without a stat prefix.
func TestGatewayHCMComposed(t *testing.T) {
	syms := index.NewSymbols()
	cfg := func(kind index.ConfigKind, name string, spec proto.Message) *index.Config {
		return &index.Config{Kind: kind, Key: index.ConfigKey{Namespace: syms.Intern("gw"), Name: syms.Intern(name)}, Spec: spec}
	}
	ra := cfg(index.ConfigRequestAuthentication, "jwt", &security.RequestAuthentication{JwtRules: []*security.JWTRule{
		{Issuer: "https://a.example", Jwks: `{"keys":[]}`},
	}})
	deny := cfg(index.ConfigAuthorizationPolicy, "deny", &security.AuthorizationPolicy{
		Action: security.AuthorizationPolicy_DENY,
		Rules:  []*security.Rule{{To: []*security.Rule_To{{Operation: &security.Operation{Paths: []string{"/admin"}}}}}},
	})
	keys := map[string]*GatewayListenerKey{
		"plain":    {Syms: syms, Namespace: "gw", DomainSuffix: "cluster.local", Port: 443},
		"security": {Syms: syms, Namespace: "gw", DomainSuffix: "cluster.local", Port: 443, RequestAuthn: []*index.Config{ra}, Authz: AuthzPolicies{Deny: []*index.Config{deny}}},
	}
	for name, k := range keys {
		parts := k.hcmParts()
		if !parts.ok {
			t.Fatalf("%s: the gateway HCM is not composable", name)
		}
		for _, c := range []struct{ statPrefix, rds string }{
			{"outbound_0.0.0.0_80", "http.80"},
			{"https", "https.443.https.gateway-0.gateway"},
			{"", "https.443.https.gw.ns"},
		} {
			want, err := proto.MarshalOptions{Deterministic: true}.Marshal(k.gatewayHCM(c.statPrefix, c.rds))
			if err != nil {
				t.Fatal(err)
			}
			f := parts.filter(k, c.statPrefix, c.rds)
			if got := f.GetTypedConfig(); got.GetTypeUrl() != hcmTypeURL || !bytes.Equal(got.GetValue(), want) {
				t.Errorf("%s %q %q: composed HCM differs from its marshal (%d vs %d bytes)", name, c.statPrefix, c.rds, len(got.GetValue()), len(want))
			}
			if ref := lsHCMFilter(k.gatewayHCM(c.statPrefix, c.rds)); !proto.Equal(f, ref) {
				t.Errorf("%s %q %q: filter differs from lsHCMFilter's", name, c.statPrefix, c.rds)
			}
		}
	}
}

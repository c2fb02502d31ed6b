package encode

import (
	"slices"
	"strings"
	"testing"

	rbac "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
)

// TestAzTrustDomainAliases: principals and trust domains are rewritten for
// the mesh's trust domain and its aliases as istiod's trust domain bundle
// rewrites them.
func TestAzTrustDomainAliases(t *testing.T) {
	tds := []string{"new.td", "old.td"}
	for _, tc := range []struct {
		in, want []string
	}{
		// cluster.local stands for the mesh's own trust domain.
		{[]string{"cluster.local/ns/a/sa/x"}, []string{"new.td/ns/a/sa/x", "old.td/ns/a/sa/x"}},
		{[]string{"old.td/ns/a/sa/y"}, []string{"new.td/ns/a/sa/y", "old.td/ns/a/sa/y"}},
		// Another trust domain, any trust domain, not a SPIFFE form: kept.
		{[]string{"other.td/ns/a/sa/z", "*/ns/a/sa/w", "ns/a/sa/v"}, []string{"other.td/ns/a/sa/z", "*/ns/a/sa/w", "ns/a/sa/v"}},
		// A pattern matching one trust domain is kept for it, rewritten for
		// the others.
		{[]string{"*.td/ns/a/sa/p"}, []string{"*.td/ns/a/sa/p"}},
		{[]string{"*old.td/ns/a/sa/p"}, []string{"new.td/ns/a/sa/p", "*old.td/ns/a/sa/p"}},
		{[]string{"cluster.local/ns/a/sa/*"}, []string{"new.td/ns/a/sa/*", "old.td/ns/a/sa/*"}},
	} {
		if got := azPrincipalsFor(tds, tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("principals %v: got %v, want %v", tc.in, got, tc.want)
		}
	}
	if got := azTrustDomainsFor(tds, []string{"old.td", "x*y", "new.td", "*"}); !slices.Equal(got, []string{"new.td", "old.td", "x*y", "*"}) {
		t.Errorf("trust domains: %v", got)
	}
	// Without aliases, cluster.local still names the mesh's own domain.
	if got := azPrincipalsFor([]string{"example.org"}, []string{"cluster.local/ns/a/sa/x"}); !slices.Equal(got, []string{"example.org/ns/a/sa/x"}) {
		t.Errorf("cluster.local with trust domain example.org: %v", got)
	}
}

// TestAzTrustDomainPolicy: a policy's principals (from and when) and trust
// domains match every trust domain of the bundle, with istiod's trust
// domain matchers; `when source.serviceAccount` is a service account.
func TestAzTrustDomainPolicy(t *testing.T) {
	r := azRuleOf(t, `{from: [{source: {principals: ["cluster.local/ns/a/sa/x"], notPrincipals: ["old.td/ns/b/sa/y"], trustDomains: ["old.td", "x*y", "*"]}}],
		when: [{key: source.principal, values: ["old.td/ns/c/sa/z"]}, {key: source.serviceAccount, values: ["a/x"]}, {key: source.trustDomain, notValues: ["new.td"]}]}`)
	p, err := azPolicy(r, "shop", []string{"new.td", "old.td"}, azHTTP, rbac.RBAC_ALLOW)
	if err != nil {
		t.Fatal(err)
	}
	got := azJSON(t, &rbac.Policy{Principals: p.Principals})
	for _, want := range []string{
		`{"exact":"spiffe://new.td/ns/a/sa/x"}`, `{"exact":"spiffe://old.td/ns/a/sa/x"}`,
		`{"notId":{"orIds":{"ids":[{"authenticated":{"principalName":{"exact":"spiffe://new.td/ns/b/sa/y"}}},{"authenticated":{"principalName":{"exact":"spiffe://old.td/ns/b/sa/y"}}}]}}}`,
		`{"prefix":"spiffe://new.td/"}`, `{"prefix":"spiffe://old.td/"}`, `{"safeRegex":{"regex":"spiffe://x[^/]*y/.*"}}`, `{"prefix":"spiffe://"}`,
		`{"exact":"spiffe://new.td/ns/c/sa/z"}`, `{"exact":"spiffe://old.td/ns/c/sa/z"}`,
		`spiffe://.+/ns/a/(.+/|)sa/x(/.+)?`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("no %s in %s", want, got)
		}
	}
	// The `when` trust domain's notValues expand too: NOT of both.
	if !strings.Contains(got, `{"notId":{"orIds":{"ids":[{"authenticated":{"principalName":{"prefix":"spiffe://new.td/"}}},{"authenticated":{"principalName":{"prefix":"spiffe://old.td/"}}}]}}}`) {
		t.Errorf("when source.trustDomain notValues not expanded: %s", got)
	}
	if err := (&rbac.Policy{Principals: p.Principals, Permissions: p.Permissions}).ValidateAll(); err != nil {
		t.Fatal(err)
	}
}

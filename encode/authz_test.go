package encode

import (
	"encoding/json"
	"strings"
	"testing"

	rbac "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	rbachttp "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"sigs.k8s.io/yaml"

	security "istio.io/api/security/v1beta1"

	"github.com/pilotfish-mesh/pilotfish/index"
)

// azJSON renders a policy compactly with protojson's field names.
func azJSON(t *testing.T, p *rbac.Policy) string {
	t.Helper()
	b, err := protojson.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(v) // sorted keys, no spaces
	return string(out)
}

func azRuleOf(t *testing.T, y string) *security.Rule {
	t.Helper()
	j, err := yaml.YAMLToJSON([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	r := &security.Rule{}
	if err := protojson.Unmarshal(j, r); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestAzPolicy: rules become istiod's RBAC policies: conditions in
// istiod's order, matchers as istiod writes them, and HTTP-only or
// unsupported values failing an ALLOW rule but only dropping out of a DENY
// rule.
func TestAzPolicy(t *testing.T) {
	const any = `{"andRules":{"rules":[{"any":true}]}}`
	tests := []struct {
		name   string
		rule   string
		target azTarget
		action rbac.RBAC_Action
		want   string // "" for an error (the rule is skipped)
	}{
		{
			name:   "namespace source and method on HTTP (istio-bench authorizationpolicy)",
			rule:   `{from: [{source: {namespaces: [default]}}], to: [{operation: {methods: [POST]}}]}`,
			target: azHTTP, action: rbac.RBAC_DENY,
			want: `{"permissions":[{"andRules":{"rules":[{"orRules":{"rules":[{"header":{"name":":method","stringMatch":{"exact":"POST"}}}]}}]}}],` +
				`"principals":[{"andIds":{"ids":[{"orIds":{"ids":[{"authenticated":{"principalName":{"safeRegex":{"regex":".*/ns/default/.*"}}}}]}}]}}]}`,
		},
		{
			name:   "the same on TCP: DENY drops the HTTP-only method",
			rule:   `{from: [{source: {namespaces: [default]}}], to: [{operation: {methods: [POST]}}]}`,
			target: azTCP, action: rbac.RBAC_DENY,
			want: `{"permissions":[` + any + `],` +
				`"principals":[{"andIds":{"ids":[{"orIds":{"ids":[{"authenticated":{"principalName":{"safeRegex":{"regex":".*/ns/default/.*"}}}}]}}]}}]}`,
		},
		{
			name:   "the same on TCP for ALLOW: the rule fails",
			rule:   `{to: [{operation: {methods: [POST]}}]}`,
			target: azTCP, action: rbac.RBAC_ALLOW,
		},
		{
			name: "principals, not, ipBlocks, ports, paths, hosts, when",
			rule: `{from: [{source: {principals: ["cluster.local/ns/a/sa/b", "*-suffix"], notPrincipals: ["*"], ipBlocks: ["10.0.0.0/8"], remoteIpBlocks: ["1.2.3.4"]}}],
			         to: [{operation: {hosts: ["*.example.com"], paths: ["/api/*", "*"], notPorts: ["8080"]}}],
			         when: [{key: "request.headers[x-user]", values: ["alice"]}, {key: "destination.port", values: ["80"]}]}`,
			target: azHTTP, action: rbac.RBAC_ALLOW,
			want: `{"permissions":[{"andRules":{"rules":[` +
				`{"orRules":{"rules":[{"header":{"name":":authority","stringMatch":{"ignoreCase":true,"suffix":".example.com"}}}]}},` +
				`{"orRules":{"rules":[{"urlPath":{"path":{"prefix":"/api/"}}},{"urlPath":{"path":{"safeRegex":{"regex":".+"}}}}]}},` +
				`{"notRule":{"orRules":{"rules":[{"destinationPort":8080}]}}},` +
				`{"orRules":{"rules":[{"destinationPort":80}]}}]}}],` +
				`"principals":[{"andIds":{"ids":[` +
				`{"orIds":{"ids":[{"authenticated":{"principalName":{"exact":"spiffe://cluster.local/ns/a/sa/b"}}},{"authenticated":{"principalName":{"safeRegex":{"regex":"spiffe://.*-suffix"}}}}]}},` +
				`{"notId":{"orIds":{"ids":[{"authenticated":{"principalName":{"safeRegex":{"regex":".+"}}}}]}}},` +
				`{"orIds":{"ids":[{"remoteIp":{"addressPrefix":"1.2.3.4","prefixLen":32}}]}},` +
				`{"orIds":{"ids":[{"directRemoteIp":{"addressPrefix":"10.0.0.0","prefixLen":8}}]}},` +
				`{"orIds":{"ids":[{"header":{"name":"x-user","stringMatch":{"exact":"alice"}}}]}}]}}]}`,
		},
		{
			name:   "request principals need JWT metadata, which gRPC lacks: ALLOW fails",
			rule:   `{from: [{source: {requestPrincipals: ["*"]}}]}`,
			target: azGRPC, action: rbac.RBAC_ALLOW,
		},
		{
			// One request principal is its matcher, not an OR of one
			// (istiod's extended condition).
			name:   "request principal ISS/SUB on HTTP reads jwt_authn's payload",
			rule:   `{from: [{source: {requestPrincipals: ["https://issuer.example/alice"]}}]}`,
			target: azHTTP, action: rbac.RBAC_ALLOW,
			want: `{"permissions":[` + any + `],"principals":[{"andIds":{"ids":[{"andIds":{"ids":[` +
				`{"metadata":{"filter":"envoy.filters.http.jwt_authn","path":[{"key":"payload"},{"key":"iss"}],"value":{"stringMatch":{"exact":"https://issuer.example"}}}},` +
				`{"metadata":{"filter":"envoy.filters.http.jwt_authn","path":[{"key":"payload"},{"key":"sub"}],"value":{"stringMatch":{"exact":"alice"}}}}]}}]}}]}`,
		},
		{
			// istiod's reading of each form: "*/SUB" any issuer, "*ISS/SUB"
			// an issuer suffix, "ISS/SUB*" a subject prefix, "ISS" (no
			// slash) an empty subject; several values are an OR.
			name:   "request principal forms",
			rule:   `{from: [{source: {requestPrincipals: ["*/bob", "*.example/bob", "https://i.example/b*", "https://i.example/*", "x*", "*x", "noslash"]}}]}`,
			target: azHTTP, action: rbac.RBAC_ALLOW,
			want: `{"permissions":[` + any + `],"principals":[{"andIds":{"ids":[{"orIds":{"ids":[` +
				rp(`{"safeRegex":{"regex":".+"}}`, `{"exact":"bob"}`) + `,` +
				rp(`{"suffix":".example"}`, `{"exact":"bob"}`) + `,` +
				rp(`{"exact":"https://i.example"}`, `{"prefix":"b"}`) + `,` +
				rp(`{"exact":"https://i.example"}`, `{"safeRegex":{"regex":".+"}}`) + `,` +
				rp(`{"prefix":"x"}`, `{"safeRegex":{"regex":".+"}}`) + `,` +
				rp(`{"safeRegex":{"regex":".+"}}`, `{"suffix":"x"}`) + `,` +
				rp(`{"exact":"noslash"}`, `{"exact":""}`) + `]}}]}}]}`,
		},
		{
			name:   "service accounts default to the policy's namespace",
			rule:   `{from: [{source: {serviceAccounts: [web, other/db]}}]}`,
			target: azGRPC, action: rbac.RBAC_ALLOW,
			want: `{"permissions":[` + any + `],"principals":[{"andIds":{"ids":[{"orIds":{"ids":[` +
				`{"authenticated":{"principalName":{"safeRegex":{"regex":"spiffe://.+/ns/shop/(.+/|)sa/web(/.+)?"}}}},` +
				`{"authenticated":{"principalName":{"safeRegex":{"regex":"spiffe://.+/ns/other/(.+/|)sa/db(/.+)?"}}}}]}}]}}]}`,
		},
		{
			name:   "unknown when key fails the rule",
			rule:   `{when: [{key: "source.color", values: [blue]}]}`,
			target: azHTTP, action: rbac.RBAC_DENY,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := azPolicy(azRuleOf(t, tc.rule), "shop", nil, tc.target, tc.action)
			if tc.want == "" {
				if err == nil {
					t.Fatalf("got %s, want an error", azJSON(t, p))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := azJSON(t, p); got != tc.want {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
			if err := p.ValidateAll(); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestAuthzFilters: the filters of each action in istiod's order, ALLOW
// without rules allowing nothing, and rules that fail leaving an ALLOW
// filter that still denies.
func TestAuthzFilters(t *testing.T) {
	policy := func(y string) *security.AuthorizationPolicy {
		j, err := yaml.YAMLToJSON([]byte(y))
		if err != nil {
			t.Fatal(err)
		}
		ap := &security.AuthorizationPolicy{}
		if err := protojson.Unmarshal(j, ap); err != nil {
			t.Fatal(err)
		}
		return ap
	}
	syms := index.NewSymbols()
	rows := map[string][]*index.Config{}
	for name, y := range map[string]string{
		"allow-nothing": `{}`,
		"methods-only":  `{rules: [{to: [{operation: {methods: [GET]}}]}]}`,
		"deny":          `{action: DENY, rules: [{}]}`,
		"audit":         `{action: AUDIT, rules: [{}]}`,
		"dry-deny":      `{action: DENY, rules: [{to: [{operation: {paths: [/x]}}]}]}`,
	} {
		rows[name] = []*index.Config{{
			Kind:   index.ConfigAuthorizationPolicy,
			Key:    index.ConfigKey{Namespace: syms.Intern("shop"), Name: syms.Intern(name)},
			Spec:   policy(y),
			DryRun: name == "dry-deny",
		}}
	}
	a := &AuthzPolicies{Audit: rows["audit"], Deny: append(rows["deny"], rows["dry-deny"]...), Allow: append(rows["allow-nothing"], rows["methods-only"]...)}
	var actions []string
	for _, f := range authzTCPFilters(index.NamesOf(syms, nil), a) {
		actions = append(actions, f.Name)
	}
	if got := strings.Join(actions, ","); got != "envoy.filters.network.rbac,envoy.filters.network.rbac,envoy.filters.network.rbac" {
		t.Fatalf("TCP filters %s", got)
	}
	groups := a.groups()
	if len(groups) != 3 || groups[0].action != rbac.RBAC_LOG || groups[1].action != rbac.RBAC_DENY || groups[2].action != rbac.RBAC_ALLOW {
		t.Fatalf("groups %v", groups)
	}
	allowTCP := groups[2].rules(index.NamesOf(syms, nil), nil, azTCP, false)
	if len(allowTCP.Policies) != 1 || allowTCP.Policies["ns[shop]-policy[allow-nothing]-rule[0]"] != rbacNever {
		t.Errorf("ALLOW on TCP: %v (want only allow-nothing's never-matching policy; methods-only is HTTP-only)", allowTCP.Policies)
	}
	allowHTTP := groups[2].rules(index.NamesOf(syms, nil), nil, azHTTP, false)
	if len(allowHTTP.Policies) != 2 {
		t.Errorf("ALLOW on HTTP: %d policies, want 2", len(allowHTTP.Policies))
	}
	// A dry-run policy goes to the shadow rules of its action's filter.
	deny := &rbachttp.RBAC{}
	if err := authzHTTPFilters(index.NamesOf(syms, nil), a)[1].GetTypedConfig().UnmarshalTo(deny); err != nil {
		t.Fatal(err)
	}
	_, enforced := deny.GetRules().GetPolicies()["ns[shop]-policy[deny]-rule[0]"]
	_, shadowed := deny.GetShadowRules().GetPolicies()["ns[shop]-policy[dry-deny]-rule[0]"]
	if !enforced || !shadowed || len(deny.GetRules().GetPolicies()) != 1 || deny.ShadowRulesStatPrefix != "istio_dry_run_deny_" {
		t.Errorf("DENY filter: rules %v, shadow rules %v, prefix %q", deny.GetRules().GetPolicies(), deny.GetShadowRules().GetPolicies(), deny.ShadowRulesStatPrefix)
	}
	grpc := authzGRPCFilters(index.NamesOf(syms, nil), a)
	if len(grpc) != 2 || grpc[0].Name != rbacGRPCDenyFilterName || grpc[1].Name != rbacHTTPFilterName {
		t.Errorf("gRPC filters: %v", grpc)
	} else if err := grpc[0].GetTypedConfig().UnmarshalTo(deny); err != nil || len(deny.GetRules().GetPolicies()) != 1 || deny.ShadowRules != nil {
		t.Errorf("gRPC DENY filter %v (%v): want the enforced policy only, no dry run", deny, err)
	}
	if err := rbacNever.ValidateAll(); err != nil {
		t.Error(err)
	}
}

// rp is the JSON of a request principal's matcher: issuer and subject
// string matchers on jwt_authn's payload.
func rp(iss, sub string) string {
	return `{"andIds":{"ids":[` +
		`{"metadata":{"filter":"envoy.filters.http.jwt_authn","path":[{"key":"payload"},{"key":"iss"}],"value":{"stringMatch":` + iss + `}}},` +
		`{"metadata":{"filter":"envoy.filters.http.jwt_authn","path":[{"key":"payload"},{"key":"sub"}],"value":{"stringMatch":` + sub + `}}}]}}`
}

package encode

import (
	"regexp"
	"testing"

	rbac "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	matcher "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/reflect/protoreflect"
	security "istio.io/api/security/v1beta1"
)

// FuzzAuthzRule: whatever strings a policy holds (it is user input that
// validation may let through), translating a rule never panics, and every
// policy produced passes Envoy's validation and has regexes that compile
// (an invalid one would make Envoy reject the whole listener).
func FuzzAuthzRule(f *testing.F) {
	f.Add("cluster.local/ns/a/sa/b", "default", "10.0.0.0/8", "/api/*", "GET", "8080", "request.headers[x-a]", "v*")
	f.Add("*", "ns-*", "1.2.3.4", "*", "*", "70000", "request.auth.claims[groups][0]", "*")
	f.Add("*-x", "a(b", "::1/129", "/p/{*}", "*-suffix", "-1", "destination.ip", "10.0.0.1")
	f.Add("x)", "*", "bad", "*/x", "prefix-*", "", "connection.sni", "*.example.com")
	f.Fuzz(func(t *testing.T, principal, ns, cidr, path, method, port, whenKey, whenValue string) {
		r := &security.Rule{
			From: []*security.Rule_From{{Source: &security.Source{
				Principals: []string{principal}, NotPrincipals: []string{principal},
				Namespaces: []string{ns}, ServiceAccounts: []string{ns + "/" + principal},
				IpBlocks: []string{cidr}, RemoteIpBlocks: []string{cidr},
				RequestPrincipals: []string{principal},
			}}},
			To: []*security.Rule_To{{Operation: &security.Operation{
				Paths: []string{path}, Methods: []string{method}, Hosts: []string{method}, Ports: []string{port}, NotPaths: []string{path},
			}}},
			When: []*security.Condition{{Key: whenKey, Values: []string{whenValue}}},
		}
		for _, tg := range []azTarget{azHTTP, azTCP, azGRPC} {
			for _, a := range []rbac.RBAC_Action{rbac.RBAC_ALLOW, rbac.RBAC_DENY} {
				p, err := azPolicy(r, "shop", nil, tg, a)
				if err != nil {
					continue
				}
				if err := p.ValidateAll(); err != nil {
					t.Fatalf("target %d action %s: %v", tg, a, err)
				}
				azWalkRegex(p.ProtoReflect(), func(re string) {
					if _, err := regexp.Compile(re); err != nil {
						t.Fatalf("target %d action %s: regex %q: %v", tg, a, re, err)
					}
				})
			}
		}
	})
}

// azWalkRegex calls fn with every RegexMatcher's regex under m.
func azWalkRegex(m protoreflect.Message, fn func(string)) {
	if rm, ok := m.Interface().(*matcher.RegexMatcher); ok {
		fn(rm.GetRegex())
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList() && fd.Message() != nil:
			for i := 0; i < v.List().Len(); i++ {
				azWalkRegex(v.List().Get(i).Message(), fn)
			}
		case fd.IsMap() && fd.MapValue().Message() != nil:
			v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
				azWalkRegex(mv.Message(), fn)
				return true
			})
		case fd.Message() != nil && !fd.IsList() && !fd.IsMap():
			azWalkRegex(v.Message(), fn)
		}
		return true
	})
}

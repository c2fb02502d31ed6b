package encode

import (
	"fmt"

	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	rbac "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	rbachttp "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	rbactcp "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/rbac/v3"
	security "istio.io/api/security/v1beta1"

	"github.com/pilotfish-mesh/pilotfish/index"
)

// Filter names of the RBAC filters (istiod's wellknown names; gRPC's deny
// filter needs a distinct name in one filter list).
const (
	rbacHTTPFilterName     = "envoy.filters.http.rbac"
	rbacTCPFilterName      = "envoy.filters.network.rbac"
	rbacGRPCDenyFilterName = "envoy.filters.http.rbac.DENY"
	// istiod sets the ALLOW prefix even when there are no shadow rules
	// (the action of a nil RBAC reads as ALLOW).
	rbacShadowStatPrefix = "istio_dry_run_allow_"
	rbacTCPStatPrefix    = "tcp."
)

// AuthzPolicies are the AuthorizationPolicy rows that apply to one
// workload, grouped by action, each in istiod's order: the root
// namespace's first, then the workload namespace's, each by name. RootDeny
// are the root namespace's DENY policies, which istiod evaluates in a
// filter of their own before the others.
type AuthzPolicies struct {
	Custom   []*index.Config
	Audit    []*index.Config
	RootDeny []*index.Config
	Deny     []*index.Config
	Allow    []*index.Config
	// TrustDomains are the mesh's trust domain then its aliases
	// (meshConfig trustDomainAliases): principals and trust domains of the
	// policies are rewritten to each (authz_trustdomain.go). Empty when no
	// policy applies.
	TrustDomains []string
	// Providers are the ext_authz providers the Custom policies name,
	// resolved (authz_extauthz.go), sorted by name.
	Providers []AuthzProvider
}

// Empty reports whether no policy applies.
func (a *AuthzPolicies) Empty() bool {
	return len(a.Custom)+len(a.Audit)+len(a.RootDeny)+len(a.Deny)+len(a.Allow) == 0
}

func (a *AuthzPolicies) hashInto(h *Hasher) {
	hashCfgRows(h, a.Custom)
	hashCfgRows(h, a.Audit)
	hashCfgRows(h, a.RootDeny)
	hashCfgRows(h, a.Deny)
	hashCfgRows(h, a.Allow)
	h.Strs(a.TrustDomains)
	h.Int(len(a.Providers))
	for i := range a.Providers {
		a.Providers[i].hashInto(h)
	}
}

// azGroup is one RBAC filter: an action and its policies.
type azGroup struct {
	action   rbac.RBAC_Action
	policies []*index.Config
}

// groups lists the RBAC filters in istiod's evaluation order: AUDIT, root
// DENY, DENY, ALLOW. CUSTOM policies have filters of their own, before
// authentication (customHTTPFilters, customTCPFilters).
func (a *AuthzPolicies) groups() []azGroup {
	out := make([]azGroup, 0, 4)
	for _, g := range []azGroup{
		{rbac.RBAC_LOG, a.Audit},
		{rbac.RBAC_DENY, a.RootDeny},
		{rbac.RBAC_DENY, a.Deny},
		{rbac.RBAC_ALLOW, a.Allow},
	} {
		if len(g.policies) > 0 {
			out = append(out, g)
		}
	}
	return out
}

// rbacNever is istiod's policy for an ALLOW policy without rules: it
// matches nothing, so the workload allows nothing.
var rbacNever = &rbac.Policy{
	Permissions: []*rbac.Permission{{Rule: &rbac.Permission_NotRule{NotRule: &rbac.Permission{Rule: &rbac.Permission_Any{Any: true}}}}},
	Principals:  []*rbac.Principal{{Identifier: &rbac.Principal_NotId{NotId: &rbac.Principal{Identifier: &rbac.Principal_Any{Any: true}}}}},
}

// rules translates a group's enforced policies (dry-run ones when shadow
// is set). Rules that cannot be translated are left out (see azPolicy).
// nil when no policy of the group is of that kind.
func (g azGroup) rules(names index.Names, tds []string, t azTarget, shadow bool) *rbac.RBAC {
	var out *rbac.RBAC
	for _, c := range g.policies {
		ap, ok := c.Spec.(*security.AuthorizationPolicy)
		if !ok || c.DryRun != shadow {
			continue
		}
		if out == nil {
			out = &rbac.RBAC{Action: g.action, Policies: map[string]*rbac.Policy{}}
		}
		ns, name := names.String(c.Key.Namespace), names.String(c.Key.Name)
		for i, r := range ap.GetRules() {
			if r == nil {
				continue
			}
			p, err := azPolicy(r, ns, tds, t, g.action)
			if err != nil {
				continue
			}
			out.Policies[azPolicyName(ns, name, i, t)] = p
		}
		if len(ap.GetRules()) == 0 {
			out.Policies[azPolicyName(ns, name, 0, t)] = rbacNever
		}
	}
	return out
}

// shadowStatPrefix is istiod's: by the shadow rules' action, ALLOW's for
// none (a nil RBAC's action reads as ALLOW).
func shadowStatPrefix(shadow *rbac.RBAC) string {
	switch shadow.GetAction() {
	case rbac.RBAC_ALLOW:
		return rbacShadowStatPrefix
	case rbac.RBAC_DENY:
		return "istio_dry_run_deny_"
	}
	return ""
}

func azPolicyName(ns, name string, i int, t azTarget) string {
	if t == azGRPC {
		return fmt.Sprintf("%s-%s-%d", ns, name, i) // istiod's grpcgen names
	}
	return fmt.Sprintf("ns[%s]-policy[%s]-rule[%d]", ns, name, i)
}

// authzHTTPFilters are the RBAC HTTP filters of an inbound HTTP chain.
func authzHTTPFilters(names index.Names, a *AuthzPolicies) []*hcm.HttpFilter {
	var out []*hcm.HttpFilter
	for _, g := range a.groups() {
		shadow := g.rules(names, a.TrustDomains, azHTTP, true)
		out = append(out, hfTyped(rbacHTTPFilterName, &rbachttp.RBAC{
			Rules:                 g.rules(names, a.TrustDomains, azHTTP, false),
			ShadowRules:           shadow,
			ShadowRulesStatPrefix: shadowStatPrefix(shadow),
		}))
	}
	return out
}

// authzTCPFilters are the RBAC network filters of an inbound TCP chain.
func authzTCPFilters(names index.Names, a *AuthzPolicies) []*listener.Filter {
	var out []*listener.Filter
	for _, g := range a.groups() {
		shadow := g.rules(names, a.TrustDomains, azTCP, true)
		out = append(out, &listener.Filter{Name: rbacTCPFilterName, ConfigType: &listener.Filter_TypedConfig{TypedConfig: rtAny(&rbactcp.RBAC{
			Rules:                 g.rules(names, a.TrustDomains, azTCP, false),
			ShadowRules:           shadow,
			StatPrefix:            rbacTCPStatPrefix,
			ShadowRulesStatPrefix: shadowStatPrefix(shadow),
		})}})
	}
	return out
}

// authzGRPCFilters are istiod's grpcgen RBAC filters for an xDS-enabled
// gRPC server: gRPC supports ALLOW and DENY only, so DENY (root and
// namespace, and CUSTOM failing closed) comes first, then ALLOW; AUDIT and
// dry-run policies are not sent.
func authzGRPCFilters(names index.Names, a *AuthzPolicies) []*hcm.HttpFilter {
	var out []*hcm.HttpFilter
	deny := azGroup{action: rbac.RBAC_DENY}
	deny.policies = append(deny.policies, a.Custom...)
	deny.policies = append(deny.policies, a.RootDeny...)
	deny.policies = append(deny.policies, a.Deny...)
	if r := deny.rules(names, a.TrustDomains, azGRPC, false); len(r.GetPolicies()) > 0 {
		out = append(out, hfTyped(rbacGRPCDenyFilterName, &rbachttp.RBAC{Rules: r}))
	}
	// An ALLOW filter whose rules all failed still allows nothing.
	if r := (azGroup{rbac.RBAC_ALLOW, a.Allow}).rules(names, a.TrustDomains, azGRPC, false); r != nil {
		out = append(out, hfTyped(rbacHTTPFilterName, &rbachttp.RBAC{Rules: r}))
	}
	return out
}

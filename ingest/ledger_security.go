package ingest

import (
	"google.golang.org/protobuf/reflect/protoreflect"
	typev1beta1 "istio.io/api/type/v1beta1"
)

// The ledger of security.istio.io (ledger.go): every field reachable from
// the specs of AuthorizationPolicy, PeerAuthentication and
// RequestAuthentication.

// policyTargets classifies targetRef and targetRefs: attached as istiod
// attaches them (rules/authn_target.go), with a warning for the targets
// that reach only waypoints.
var policyTargets = partial("rules.TestPolicyTargetRefsMatchIstiod",
	"attached as istiod attaches it: to the proxies of Gateway API gateways (label "+
		"gateway.networking.k8s.io/gateway-name) it names in its namespace; sidecars and Istio Gateway "+
		"routers ignore a policy with targets, as in istiod").warnWhen(valueWarning{
	applies: waypointTargetsOnly,
	when:    "no target is a Gateway",
	why:     "Service, ServiceEntry and GatewayClass targets attach a policy to waypoints only, which pilotfish does not serve",
	effect:  "the policy applies to no proxy",
})

// waypointTargetsOnly reports whether a targetRef (a message) or targetRefs
// (a list) names only kinds that istiod attaches to waypoints (its
// ShouldAttachPolicy): Service, ServiceEntry, GatewayClass. Validation
// allows those and Gateway only, so any other target (an invalid object)
// does not count as one.
func waypointTargetsOnly(v protoreflect.Value) bool {
	switch x := v.Interface().(type) {
	case protoreflect.Message:
		return waypointTarget(x)
	case protoreflect.List:
		for i := 0; i < x.Len(); i++ {
			if !waypointTarget(x.Get(i).Message()) {
				return false
			}
		}
		return x.Len() > 0
	}
	return false
}

func waypointTarget(m protoreflect.Message) bool {
	r, ok := m.Interface().(*typev1beta1.PolicyTargetReference)
	if !ok {
		return false
	}
	group := r.GetGroup()
	switch r.GetKind() {
	case "Service":
		return group == "" || group == "core"
	case "ServiceEntry":
		return group == "networking.istio.io"
	case "GatewayClass":
		return group == "gateway.networking.k8s.io"
	}
	return false
}

var securityLedger = ledgerTable{
	// AuthorizationPolicy
	"istio.security.v1beta1.AuthorizationPolicy.selector":   honoured("rules.TestWorkloadSecurity"),
	"istio.security.v1beta1.AuthorizationPolicy.targetRef":  policyTargets,
	"istio.security.v1beta1.AuthorizationPolicy.targetRefs": policyTargets,
	"istio.security.v1beta1.AuthorizationPolicy.rules":      honoured("encode.TestAzPolicy"),
	"istio.security.v1beta1.AuthorizationPolicy.action": honouredNote("encode.TestAuthzFilters",
		"CUSTOM calls the mesh config's ext_authz provider as istiod (engine.TestExtAuthzMatchesIstiod); proxyless gRPC servers deny what CUSTOM rules match, where istiod ignores them"),
	"istio.security.v1beta1.AuthorizationPolicy.provider":               honoured("engine.TestExtAuthzMatchesIstiod"),
	"istio.security.v1beta1.AuthorizationPolicy.ExtensionProvider.name": honoured("engine.TestExtAuthzMatchesIstiod"),

	"istio.security.v1beta1.Rule.from":        honoured("encode.TestAzPolicy"),
	"istio.security.v1beta1.Rule.to":          honoured("encode.TestAzPolicy"),
	"istio.security.v1beta1.Rule.when":        honoured("encode.TestAzPolicy"),
	"istio.security.v1beta1.Rule.From.source": honoured("encode.TestAzPolicy"),
	"istio.security.v1beta1.Rule.To.operation": honoured(
		"encode.TestAzPolicy"),
	"istio.security.v1beta1.Source.principals":             honoured("encode.TestAzPolicy"),
	"istio.security.v1beta1.Source.not_principals":         honoured("encode.TestAzPolicy"),
	"istio.security.v1beta1.Source.request_principals":     honoured("encode.TestAzPolicy"),
	"istio.security.v1beta1.Source.not_request_principals": honoured("engine.TestScenarios/ledger-security"),
	"istio.security.v1beta1.Source.namespaces":             honoured("encode.TestAzPolicy"),
	"istio.security.v1beta1.Source.not_namespaces":         honoured("engine.TestScenarios/ledger-security"),
	"istio.security.v1beta1.Source.service_accounts":       honoured("encode.TestAzPolicy"),
	"istio.security.v1beta1.Source.not_service_accounts":   honoured("engine.TestScenarios/ledger-security"),
	"istio.security.v1beta1.Source.ip_blocks":              honoured("encode.TestAzPolicy"),
	"istio.security.v1beta1.Source.not_ip_blocks":          honoured("engine.TestScenarios/ledger-security"),
	"istio.security.v1beta1.Source.remote_ip_blocks":       honoured("encode.TestAzPolicy"),
	"istio.security.v1beta1.Source.not_remote_ip_blocks":   honoured("engine.TestScenarios/ledger-security"),
	"istio.security.v1beta1.Source.trust_domains":          honoured("rules.TestTrustDomainAliasesMatchIstiod"),
	"istio.security.v1beta1.Source.not_trust_domains":      honoured("encode.TestAzTrustDomainPolicy"),
	"istio.security.v1beta1.Operation.hosts":               honoured("encode.TestAzPolicy"),
	"istio.security.v1beta1.Operation.not_hosts":           honoured("engine.TestScenarios/ledger-security"),
	"istio.security.v1beta1.Operation.ports":               honoured("rules.TestWorkloadSecurity"),
	"istio.security.v1beta1.Operation.not_ports":           honoured("encode.TestAzPolicy"),
	"istio.security.v1beta1.Operation.methods":             honoured("encode.TestAzPolicy"),
	"istio.security.v1beta1.Operation.not_methods":         honoured("engine.TestScenarios/ledger-security"),
	"istio.security.v1beta1.Operation.paths":               honoured("rules.TestDryRunPolicy"),
	"istio.security.v1beta1.Operation.not_paths":           honoured("engine.TestScenarios/ledger-security"),
	"istio.security.v1beta1.Condition.key":                 honoured("encode.TestAzPolicy"),
	"istio.security.v1beta1.Condition.values":              honoured("encode.TestAzPolicy"),
	"istio.security.v1beta1.Condition.not_values":          honoured("engine.TestScenarios/ledger-security"),

	// Selectors and targets of the three kinds.
	"istio.type.v1beta1.WorkloadSelector.match_labels":   honoured("rules.TestWorkloadSecurity"),
	"istio.type.v1beta1.PolicyTargetReference.group":     honoured("rules.TestPolicyTargetRefs"),
	"istio.type.v1beta1.PolicyTargetReference.kind":      honoured("rules.TestPolicyTargetRefs"),
	"istio.type.v1beta1.PolicyTargetReference.name":      honoured("rules.TestPolicyTargetRefs"),
	"istio.type.v1beta1.PolicyTargetReference.namespace": honoured("rules.TestPolicyTargetRefs"),

	// PeerAuthentication
	"istio.security.v1beta1.PeerAuthentication.selector":        honoured("rules.TestWorkloadSecurity"),
	"istio.security.v1beta1.PeerAuthentication.mtls":            honoured("rules.TestWorkloadSecurity"),
	"istio.security.v1beta1.PeerAuthentication.port_level_mtls": honoured("rules.TestWorkloadSecurity"),
	"istio.security.v1beta1.PeerAuthentication.MutualTLS.mode":  honoured("rules.TestWorkloadSecurity"),

	// RequestAuthentication
	"istio.security.v1beta1.RequestAuthentication.selector":   honoured("rules.TestWorkloadSecurity"),
	"istio.security.v1beta1.RequestAuthentication.targetRef":  policyTargets,
	"istio.security.v1beta1.RequestAuthentication.targetRefs": policyTargets,
	"istio.security.v1beta1.RequestAuthentication.jwt_rules":  honoured("encode.TestJWTFilter"),
	"istio.security.v1beta1.JWTRule.issuer":                   honoured("encode.TestJWTFilter"),
	"istio.security.v1beta1.JWTRule.audiences":                honoured("encode.TestJWTFilter"),
	"istio.security.v1beta1.JWTRule.jwks_uri":                 honoured("cmd/pilotfish.TestE2EJWKSFetchedAndPushed"),
	"istio.security.v1beta1.JWTRule.jwks":                     honoured("encode.TestJWTFilter"),
	"istio.security.v1beta1.JWTRule.from_headers":             honoured("encode.TestJWTFilter"),
	"istio.security.v1beta1.JWTRule.from_params":              honoured("engine.TestScenarios/ledger-security"),
	"istio.security.v1beta1.JWTRule.output_payload_to_header": honoured("engine.TestScenarios/ledger-security"),
	"istio.security.v1beta1.JWTRule.from_cookies":             honoured("engine.TestScenarios/ledger-security"),
	"istio.security.v1beta1.JWTRule.forward_original_token":   honoured("encode.TestJWTFilter"),
	"istio.security.v1beta1.JWTRule.output_claim_to_headers":  honoured("engine.TestScenarios/ledger-security"),
	"istio.security.v1beta1.JWTRule.timeout": honouredNote("encode.TestJWTFilter",
		"the control plane's JWKS fetch timeout (ingest.TestJWKSInput), or Envoy's with PILOT_JWT_ENABLE_REMOTE_JWKS=envoy"),
	"istio.security.v1beta1.JWTRule.space_delimited_claims": honoured("rules.TestJWTAuthnMatchesIstiod"),
	"istio.security.v1beta1.JWTHeader.name":                 honoured("encode.TestJWTFilter"),
	"istio.security.v1beta1.JWTHeader.prefix":               honoured("encode.TestJWTFilter"),
	"istio.security.v1beta1.ClaimToHeader.header":           honoured("engine.TestScenarios/ledger-security"),
	"istio.security.v1beta1.ClaimToHeader.claim":            honoured("engine.TestScenarios/ledger-security"),
}

package ingest

// The ledger of security.istio.io (ledger.go): every field reachable from
// the specs of AuthorizationPolicy, PeerAuthentication and
// RequestAuthentication.

const whyTargetRefs = "targetRefs attach a policy to Gateway API gateways and waypoints, which pilotfish does not implement"

var securityLedger = ledgerTable{
	// AuthorizationPolicy
	"istio.security.v1beta1.AuthorizationPolicy.selector":   honoured("rules.TestWorkloadSecurity"),
	"istio.security.v1beta1.AuthorizationPolicy.targetRef":  partial("rules.TestPolicyTargetRefsMatchIstiod", "attached as istiod attaches it: to the proxies of Gateway API gateways (label gateway.networking.k8s.io/gateway-name) it names in its namespace; sidecars and Istio Gateway routers ignore a policy with targets, as in istiod; Service, ServiceEntry and GatewayClass targets attach to waypoints, which pilotfish does not serve"),
	"istio.security.v1beta1.AuthorizationPolicy.targetRefs": partial("rules.TestPolicyTargetRefsMatchIstiod", "attached as istiod attaches it: to the proxies of Gateway API gateways (label gateway.networking.k8s.io/gateway-name) it names in its namespace; sidecars and Istio Gateway routers ignore a policy with targets, as in istiod; Service, ServiceEntry and GatewayClass targets attach to waypoints, which pilotfish does not serve"),
	"istio.security.v1beta1.AuthorizationPolicy.rules":      honoured("encode.TestAzPolicy"),
	"istio.security.v1beta1.AuthorizationPolicy.action": partial("encode.TestAuthzFilters",
		"CUSTOM has no extension provider to call: its rules deny, as istiod does for a provider it cannot resolve"),
	"istio.security.v1beta1.AuthorizationPolicy.provider": unsupportedDoes(
		"extension providers (meshConfig.extensionProviders) are not implemented",
		"a CUSTOM policy denies the requests its rules match"),
	"istio.security.v1beta1.AuthorizationPolicy.ExtensionProvider.name": unsupported(
		"extension providers are not implemented"),

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
	"istio.security.v1beta1.RequestAuthentication.targetRef":  partial("rules.TestPolicyTargetRefsMatchIstiod", "attached as istiod attaches it: to the proxies of Gateway API gateways (label gateway.networking.k8s.io/gateway-name) it names in its namespace; sidecars and Istio Gateway routers ignore a policy with targets, as in istiod; Service, ServiceEntry and GatewayClass targets attach to waypoints, which pilotfish does not serve"),
	"istio.security.v1beta1.RequestAuthentication.targetRefs": partial("rules.TestPolicyTargetRefsMatchIstiod", "attached as istiod attaches it: to the proxies of Gateway API gateways (label gateway.networking.k8s.io/gateway-name) it names in its namespace; sidecars and Istio Gateway routers ignore a policy with targets, as in istiod; Service, ServiceEntry and GatewayClass targets attach to waypoints, which pilotfish does not serve"),
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
	"istio.security.v1beta1.JWTRule.timeout":                  honoured("engine.TestScenarios/ledger-security"),
	"istio.security.v1beta1.JWTRule.space_delimited_claims":   honoured("rules.TestJWTAuthnMatchesIstiod"),
	"istio.security.v1beta1.JWTHeader.name":                   honoured("encode.TestJWTFilter"),
	"istio.security.v1beta1.JWTHeader.prefix":                 honoured("encode.TestJWTFilter"),
	"istio.security.v1beta1.ClaimToHeader.header":             honoured("engine.TestScenarios/ledger-security"),
	"istio.security.v1beta1.ClaimToHeader.claim":              honoured("engine.TestScenarios/ledger-security"),
}

package ingest

// envoyFilterLedger classifies EnvoyFilter's fields. Patches are applied
// as istiod applies them (docs/envoyfilter-design.md): rules selects the
// filters of a proxy class (rules/envoyfilter.go), envoypatch applies them
// to the generated clusters, listeners and route configurations;
// EXTENSION_CONFIG patches are served over ECDS (rules/envoyfilter_ecds.go).
var envoyFilterLedger = ledgerTable{
	"istio.networking.v1alpha3.EnvoyFilter.config_patches": partial("engine.TestScenarios/istiod-envoyfilter-basic",
		"applied to sidecars' and routers' clusters, listeners and route configurations as istiod applies them "+
			"(a router's ROUTE_CONFIGURATION portNumber through its gateway port map: engine.TestGatewayTargetPortsMatchIstiod); "+
			"proxyless gRPC gets no patch, as from istiod; "+
			"EXTENSION_CONFIG ADD patches are served over ECDS by name (engine.TestEnvoyFilterExtensionConfigOverECDS), "+
			"one config per name (the last patch's; istiod sends every one)").whole(),
	"istio.networking.v1alpha3.EnvoyFilter.workload_selector": honoured("rules.TestEnvoyFilterClassAndSets"),
	"istio.networking.v1alpha3.EnvoyFilter.targetRefs": partial("rules.TestHoldsEnvoyFilter",
		"validated; a filter with targetRefs applies to no sidecar or Istio gateway, as in istiod; "+
			"attachment to Gateway API gateways by targetRefs is not implemented"),
	"istio.networking.v1alpha3.EnvoyFilter.priority": honoured("rules.TestSelectEnvoyFiltersOrder"),
}

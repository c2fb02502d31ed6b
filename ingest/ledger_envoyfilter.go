package ingest

// envoyFilterLedger classifies EnvoyFilter's fields. pilotfish reads,
// validates and indexes EnvoyFilters but does not apply their patches yet
// (docs/envoyfilter-design.md): configPatches is unsupported, so every
// EnvoyFilter that patches anything gets one precise warning wherever
// warnings are shown (`pilotfish validate`, the admission webhook,
// /debug/config_errors, pilotfish_config_unsupported_fields), and the
// fields that choose where patches apply are read into the index row.
var envoyFilterLedger = ledgerTable{
	"istio.networking.v1alpha3.EnvoyFilter.config_patches": unsupportedDoes(
		"EnvoyFilter is read and validated but its patches are not applied yet",
		"no proxy's configuration is patched"),
	"istio.networking.v1alpha3.EnvoyFilter.workload_selector": partial("ingest.TestEnvoyFilterRow",
		"read into the index row; it chooses proxies once patches are applied"),
	"istio.networking.v1alpha3.EnvoyFilter.targetRefs": partial("ingest.TestEnvoyFilterRow",
		"validated and kept in the index row; it chooses proxies once patches are applied"),
	"istio.networking.v1alpha3.EnvoyFilter.priority": partial("ingest.TestEnvoyFilterRow",
		"read into the index row; it orders patches once they are applied"),
}

package ingest

import (
	"google.golang.org/protobuf/reflect/protoreflect"
	networking "istio.io/api/networking/v1alpha3"
)

// envoyFilterLedger classifies EnvoyFilter's fields. Patches are applied
// as istiod applies them (docs/envoyfilter-design.md): rules selects the
// filters of a proxy class (rules/envoyfilter.go), envoypatch applies them
// to the generated clusters, listeners and route configurations. A patch
// of EXTENSION_CONFIG (ECDS, not served yet) is the one warning left.
var envoyFilterLedger = ledgerTable{
	"istio.networking.v1alpha3.EnvoyFilter.config_patches": partial("engine.TestScenarios/istiod-envoyfilter-basic",
		"applied to sidecars' and routers' clusters, listeners and route configurations as istiod applies them; "+
			"a router's ROUTE_CONFIGURATION match on portNumber compares the route configuration's own port, "+
			"not the server ports merged onto it; proxyless gRPC gets no patch, as from istiod").whole().warnWhen(valueWarning{
		applies: extensionConfigPatch,
		when:    "a patch has applyTo EXTENSION_CONFIG",
		why:     "EXTENSION_CONFIG patches are not applied yet (ECDS serves WasmPlugins only)",
		effect:  "those patches add no extension configuration; the others apply",
	}),
	"istio.networking.v1alpha3.EnvoyFilter.workload_selector": honoured("rules.TestEnvoyFilterClassAndSets"),
	"istio.networking.v1alpha3.EnvoyFilter.targetRefs": partial("rules.TestHoldsEnvoyFilter",
		"validated; a filter with targetRefs applies to no sidecar or Istio gateway, as in istiod; "+
			"attachment to Gateway API gateways by targetRefs is not implemented"),
	"istio.networking.v1alpha3.EnvoyFilter.priority": honoured("rules.TestSelectEnvoyFiltersOrder"),
}

// extensionConfigPatch reports whether configPatches (a list) holds an
// EXTENSION_CONFIG patch.
func extensionConfigPatch(v protoreflect.Value) bool {
	l, ok := v.Interface().(protoreflect.List)
	if !ok {
		return false
	}
	for i := 0; i < l.Len(); i++ {
		p, ok := l.Get(i).Message().Interface().(*networking.EnvoyFilter_EnvoyConfigObjectPatch)
		if ok && p.GetApplyTo() == networking.EnvoyFilter_EXTENSION_CONFIG {
			return true
		}
	}
	return false
}

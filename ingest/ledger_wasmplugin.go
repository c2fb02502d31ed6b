package ingest

// wasmPluginLedger classifies WasmPlugin's fields (docs/wasm.md): each is
// served as istiod serves it, compared field by field with istiod's
// listeners and ECDS resources for the istiodref case wasm-basic.
var wasmPluginLedger = ledgerTable{
	"istio.extensions.v1alpha1.WasmPlugin.url":               honoured(wasmIstiodTest),
	"istio.extensions.v1alpha1.WasmPlugin.selector":          honoured(wasmIstiodTest),
	"istio.extensions.v1alpha1.WasmPlugin.sha256":            honoured(wasmIstiodTest),
	"istio.extensions.v1alpha1.WasmPlugin.image_pull_policy": honoured(wasmIstiodTest),
	"istio.extensions.v1alpha1.WasmPlugin.image_pull_secret": honoured("main.TestWasmPullSecretVerifiedOnly"),
	"istio.extensions.v1alpha1.WasmPlugin.targetRef": partial("engine.TestWasmPluginTargetRefs",
		"attaches only to the Gateway API gateway of its namespace it names, as istiod; not compared with istiod (the reference runs without the Gateway API)"),
	"istio.extensions.v1alpha1.WasmPlugin.targetRefs": partial("engine.TestWasmPluginTargetRefs",
		"attaches only to the Gateway API gateway of its namespace it names, as istiod; not compared with istiod (the reference runs without the Gateway API)"),
	"istio.extensions.v1alpha1.WasmPlugin.verification_key": unsupportedDoes(
		"istiod does not read it either (reserved by the API)", "the field is ignored"),
	"istio.extensions.v1alpha1.WasmPlugin.plugin_config":         honoured(wasmIstiodTest),
	"istio.extensions.v1alpha1.WasmPlugin.plugin_name":           honoured(wasmIstiodTest),
	"istio.extensions.v1alpha1.WasmPlugin.phase":                 honoured(wasmIstiodTest),
	"istio.extensions.v1alpha1.WasmPlugin.priority":              honoured(wasmIstiodTest),
	"istio.extensions.v1alpha1.WasmPlugin.fail_strategy":         honoured(wasmIstiodTest),
	"istio.extensions.v1alpha1.WasmPlugin.vm_config":             honoured(wasmIstiodTest),
	"istio.extensions.v1alpha1.VmConfig.env":                     honoured(wasmIstiodTest),
	"istio.extensions.v1alpha1.EnvVar.name":                      honoured(wasmIstiodTest),
	"istio.extensions.v1alpha1.EnvVar.value_from":                honoured(wasmIstiodTest),
	"istio.extensions.v1alpha1.EnvVar.value":                     honoured(wasmIstiodTest),
	"istio.extensions.v1alpha1.WasmPlugin.match":                 honoured(wasmIstiodTest),
	"istio.extensions.v1alpha1.WasmPlugin.TrafficSelector.mode":  honoured(wasmIstiodTest),
	"istio.extensions.v1alpha1.WasmPlugin.TrafficSelector.ports": honoured(wasmIstiodTest),
	"istio.type.v1beta1.PortSelector.number":                     honoured(wasmIstiodTest),
	"istio.extensions.v1alpha1.WasmPlugin.type":                  honoured(wasmIstiodTest),
}

// wasmIstiodTest compares WasmPlugin's listeners and ECDS with istiod's.
const wasmIstiodTest = "engine.TestWasmPluginMatchesIstiod"

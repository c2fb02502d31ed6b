package ingest

import (
	"math"

	extensions "istio.io/api/extensions/v1alpha1"

	"github.com/pilotfish-mesh/pilotfish/index"
)

// wasmPluginRow fills the fields of a WasmPlugin's config row the generic
// row does not (its priority: istiod sorts a phase's plugins highest
// first, an unset priority last) and returns its selector. Its targetRefs
// stay in the Spec, read by rules as the security kinds' are.
func wasmPluginRow(row *index.Config, wp *extensions.WasmPlugin) (map[string]string, bool) {
	row.Priority = math.MinInt32
	if p := wp.GetPriority(); p != nil {
		row.Priority = p.GetValue()
	}
	return workloadSelector(wp.GetSelector())
}

package ingest

import (
	"github.com/pilotfish-mesh/pilotfish/index"
	networking "istio.io/api/networking/v1alpha3"
)

// envoyFilterRow fills the fields of an EnvoyFilter's config row the
// generic row does not (its priority) and returns its workload selector.
// Its targetRefs stay in the Spec, read by rules as the security kinds'
// are; its creation time, istiod's tie-break after priority, is the
// generic row's.
func envoyFilterRow(row *index.Config, ef *networking.EnvoyFilter) (map[string]string, bool) {
	row.Priority = ef.GetPriority()
	if sel := ef.GetWorkloadSelector(); sel != nil {
		return sel.GetLabels(), true
	}
	return nil, false
}

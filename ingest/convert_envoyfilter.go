package ingest

import (
	"github.com/pilotfish-mesh/pilotfish/envoypatch"
	"github.com/pilotfish-mesh/pilotfish/index"
	networking "istio.io/api/networking/v1alpha3"
)

// envoyFilterRow fills the fields of an EnvoyFilter's config row the
// generic row does not (its priority, and its patches compiled once per
// object version into Derived: an *envoypatch.Filter, never nil) and
// returns its workload selector.
// Its targetRefs stay in the Spec, read by rules as the security kinds'
// are; its creation time, istiod's tie-break after priority, is the
// generic row's.
func envoyFilterRow(row *index.Config, namespace, name string, ef *networking.EnvoyFilter) (map[string]string, bool) {
	row.Priority = ef.GetPriority()
	// A patch that does not compile is left out, as istiod leaves it out;
	// validation reported it (sources validate before they convert).
	f, _ := envoypatch.Compile(namespace, name, ef)
	row.Derived = f
	if sel := ef.GetWorkloadSelector(); sel != nil {
		return sel.GetLabels(), true
	}
	return nil, false
}

package engine

import "github.com/pilotfish-mesh/pilotfish/index"

// endpointsOnly reports whether cs can take the endpoint fast path: only
// endpoint shards changed, or besides them only ServiceEntry config rows
// whose services did not change. A ServiceEntry's inline endpoints live in
// its config row too, so moving one endpoint rewrites the row; but no
// generator reads ServiceEntry rows (their services and endpoints are
// indexed separately, and a change to anything else of the entry shows in
// cs.Services), so such a change is an endpoint change, as istiod treats
// it. Without this, every ServiceEntry endpoint change was a full push.
func endpointsOnly(cs *index.ChangeSet) bool {
	if cs.EndpointsOnly() {
		return true
	}
	if len(cs.Endpoints) == 0 || len(cs.Namespaces)+len(cs.Workloads)+len(cs.Services) > 0 {
		return false
	}
	for kind, keys := range cs.Configs {
		if len(keys) > 0 && index.ConfigKind(kind) != index.ConfigServiceEntry {
			return false
		}
	}
	return true
}

package rules

import (
	"fmt"
	"slices"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/index"
)

// ProviderLookupFailures lists the mesh's extension providers whose
// service snap does not resolve (istiod's LookupCluster, which logs and
// counts the failure): where a Telemetry, the default providers or an
// AuthorizationPolicy use one, its access logger, tracer or ext_authz check
// is left out, so a typo in a service name is said, not silent. One line
// per provider, in mesh order.
func ProviderLookupFailures(snap *index.Snapshot, mesh *encode.Mesh) []string {
	if mesh == nil {
		return nil
	}
	var out []string
	var seen []string
	check := func(name, service, what string) {
		if service == "" || slices.Contains(seen, name) {
			return
		}
		if _, err := lookupProviderService(snap, service); err != nil {
			seen = append(seen, name)
			out = append(out, fmt.Sprintf("warning: MeshConfig: mesh.extensionProviders[%s]: %v: its %s is left out, as in istiod", name, err, what))
		}
	}
	for i := range mesh.TelemetryProviders {
		p := &mesh.TelemetryProviders[i]
		check(p.Name, p.Service, "access logger")
		if p.Trace != nil {
			check(p.Name, p.Trace.Service, "tracer")
		}
	}
	for i := range mesh.ExtAuthz {
		check(mesh.ExtAuthz[i].Name, mesh.ExtAuthz[i].Service, "ext_authz check (CUSTOM policies naming it deny what they match)")
	}
	return out
}

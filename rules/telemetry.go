package rules

import (
	telemetry "istio.io/api/telemetry/v1alpha1"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/index"
)

// Telemetry resources (telemetry.istio.io), selected and merged as
// istiod's Telemetries does (pilot/pkg/model/telemetry.go,
// applicableTelemetries): the root namespace's namespace-wide Telemetry,
// then the proxy's namespace's (the oldest without selector or targetRefs
// in each), then those of the proxy's namespace whose selector matches
// the workload or, on a Gateway API gateway, whose targetRefs name it
// (attaches), oldest first; later levels override earlier ones
// (telemetry_merge.go). The result is a value in the keys of the
// listeners it changes, so classes that resolve to the same telemetry
// share listener bytes, and a class no Telemetry reaches keeps the mesh's
// default (encode.Mesh.DefaultTelemetry).

// telemetryOf is the telemetry of sc's class.
func telemetryOf(sc *Scope, mesh *encode.Mesh) *encode.Telemetry {
	snap := sc.Snapshot
	if snap.NumConfigs(index.ConfigTelemetry) == 0 {
		return defaultTelemetry(snap, mesh) // telemetry_logs.go
	}
	specs := applicableTelemetries(sc, mesh.RootNamespace)
	if len(specs) == 0 {
		return defaultTelemetry(snap, mesh)
	}
	return mergeTelemetry(specs, mesh, serviceResolver(snap))
}

// applicableTelemetries are the specs of the Telemetries that apply to
// sc's proxies, in istiod's order (root, namespace, workload).
func applicableTelemetries(sc *Scope, rootNS string) []*telemetry.Telemetry {
	snap := sc.Snapshot
	root, _ := snap.Symbols.Lookup(rootNS)
	ns := sc.Namespace
	var out []*telemetry.Telemetry
	if root != 0 {
		if t := namespaceWideTelemetry(snap, root); t != nil {
			out = append(out, t)
		}
	}
	if ns != root && ns != 0 {
		if t := namespaceWideTelemetry(snap, ns); t != nil {
			out = append(out, t)
		}
	}
	if ns == 0 {
		return out
	}
	labels := scopeLabels(sc)
	for _, c := range sortedConfigs(snap, index.ConfigTelemetry, ns) {
		if !c.HasSelector && len(policyTargets(c.Spec)) == 0 {
			continue // namespace-wide: above
		}
		// A selector with no labels is namespace-wide to istiod too
		// (len(matchLabels) == 0), handled above only when it is the
		// oldest; istiod skips the others here as well.
		if c.HasSelector && len(snap.Labels.Get(c.Selector)) == 0 && len(policyTargets(c.Spec)) == 0 {
			continue
		}
		if attaches(snap, c, ns, labels) {
			out = append(out, c.Spec.(*telemetry.Telemetry))
		}
	}
	return out
}

// namespaceWideTelemetry is istiod's namespaceWideTelemetryConfig: the
// oldest Telemetry of ns without selector labels and targetRefs.
func namespaceWideTelemetry(snap *index.Snapshot, ns index.Sym) *telemetry.Telemetry {
	for _, c := range sortedConfigs(snap, index.ConfigTelemetry, ns) {
		if c.HasSelector && len(snap.Labels.Get(c.Selector)) > 0 || len(policyTargets(c.Spec)) > 0 {
			continue
		}
		return c.Spec.(*telemetry.Telemetry)
	}
	return nil
}

package engine

import (
	"fmt"
	"slices"
	"strings"

	meshv1alpha1 "istio.io/api/mesh/v1alpha1"

	"github.com/pilotfish-mesh/pilotfish/encode"
)

// applyTelemetryMesh copies into m the telemetry pilotfish implements
// (docs/mesh-config.md, "Telemetry"): the mesh's default metrics
// providers. As istiod does without Telemetry resources, a provider that
// defaultProviders.metrics names (extensionProviders' names compared
// without case, istiod's built-in "prometheus" included: cfg has istiod's
// defaults merged) and whose kind is prometheus puts the istio.stats
// filters on every sidecar and gateway (encode.Mesh.Stats); a name no
// provider has, or a provider of another kind, adds nothing, as in istiod.
// Two names of prometheus providers (istiod keys them as written, so
// "prometheus" and "Prometheus" are two) would give istiod two identical
// stats filters, counting every metric twice; pilotfish refuses that.
func applyTelemetryMesh(m *encode.Mesh, cfg *meshv1alpha1.MeshConfig) error {
	var prom []string
	for _, name := range cfg.GetDefaultProviders().GetMetrics() {
		p := meshProvider(cfg, name)
		if p == nil || p.GetPrometheus() == nil {
			continue
		}
		if !slices.Contains(prom, name) {
			prom = append(prom, name)
		}
	}
	if len(prom) > 1 {
		return fmt.Errorf("%w: defaultProviders.metrics names %d prometheus providers (%s): want at most one", ErrBadMeshSetting, len(prom), strings.Join(prom, ", "))
	}
	m.Stats = len(prom) == 1
	applyAccessLogMesh(m, cfg) // mesh_accesslog.go
	return nil
}

// meshProvider is istiod's fetchProvider: the first extension provider
// named name, whatever its case.
func meshProvider(cfg *meshv1alpha1.MeshConfig, name string) *meshv1alpha1.MeshConfig_ExtensionProvider {
	for _, p := range cfg.GetExtensionProviders() {
		if strings.EqualFold(p.GetName(), name) {
			return p
		}
	}
	return nil
}

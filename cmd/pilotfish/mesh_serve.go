package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes"

	"github.com/pilotfish-mesh/pilotfish/engine"
	"github.com/pilotfish-mesh/pilotfish/serve"
)

// meshSource is the mesh config's wiring in serve: its inputs, read once
// at start (so the first push and the CA use them) and then watched.
type meshSource struct {
	*meshState
	o      *serveOptions
	client kubernetes.Interface // nil without an API server
	cmNS   string
	cmName string
}

// startMesh reads the mesh config's inputs and returns the source and
// the engine's first mesh. A mesh config that does not parse at start is
// reported (and the flags and istiod's defaults apply); a flag value
// that is invalid fails.
func startMesh(ctx context.Context, o *serveOptions, log *slog.Logger) (*meshSource, engine.MeshSettings, error) {
	_, cmName := configMapNames(o.inject.revision)
	s := &meshSource{o: o, cmNS: o.inject.namespace, cmName: cmName, meshState: &meshState{
		log: log.With("component", "mesh-config"),
		base: engine.MeshSettings{DomainSuffix: o.domain, ClusterID: o.kube.clusterID, JWKSFetchMode: o.jwks.mode,
			TrustDomain: o.ca.trustDomain, TrustDomainAliases: o.trustDomainAliases, OutboundTrafficPolicy: o.outboundPolicy,
			TraceSampling: o.traceSampling},
		flags: meshFlags{outboundPolicy: o.outboundPolicy, outboundSet: o.explicit["outbound-traffic-policy"],
			trustDomainAliases: o.trustDomainAliases, aliasesSet: o.explicit["trust-domain-aliases"],
			trustDomain: o.ca.trustDomain, trustDomainSet: o.explicit["trust-domain"]},
		errCount: prometheus.NewCounter(prometheus.CounterOpts{Name: "pilotfish_mesh_config_errors_total",
			Help: "Mesh configs refused (they do not parse or istiod's validation refuses them); the last good one stays in force."}),
		applied: prometheus.NewGauge(prometheus.GaugeOpts{Name: "pilotfish_mesh_config_last_applied_timestamp_seconds",
			Help: "Unix time the mesh config in force was applied (at start, then at each accepted change)."}),
		overrides: map[string]bool{},
	}}
	// A bad flag value fails at start, as before the mesh config.
	if _, err := s.base.Mesh(); err != nil {
		return nil, engine.MeshSettings{}, fmt.Errorf("--outbound-traffic-policy: %w", err)
	}
	var first engine.MeshSettings
	s.apply = func(st engine.MeshSettings) error {
		if _, err := st.Mesh(); err != nil {
			return err
		}
		first = st
		return nil
	}
	if o.mesh.configMap {
		if cfg, err := o.kube.restConfig(o.configDir); err == nil && cfg != nil {
			if s.client, err = kubernetes.NewForConfig(cfg); err != nil {
				return nil, engine.MeshSettings{}, fmt.Errorf("kubernetes client: %w", err)
			}
			s.inputs[meshFromAPI] = initialMeshConfigMap(ctx, s.client, s.cmNS, s.cmName)
		}
	}
	if o.configDir != "" {
		s.inputs[meshFromDir] = findDirConfigMap(o.configDir, s.cmName)
	}
	if o.mesh.file != "" {
		s.inputs[meshFromFile] = readMeshFile(o.mesh.file)
	}
	first = s.base
	_ = s.set(meshFromFile, s.inputs[meshFromFile]) // applies the first present input
	// The CA starts with the mesh config's trust domain unless
	// --trust-domain (TRUST_DOMAIN) is given.
	if !s.flags.trustDomainSet && first.TrustDomain != "" {
		o.ca.trustDomain = first.TrustDomain
	}
	s.caTD = o.ca.trustDomain
	first.TrustDomain = o.ca.trustDomain
	return s, first, nil
}

// connect makes later mesh configs reach the engine and the xDS server.
func (s *meshSource) connect(eng *engine.Engine, xds *serve.XDSServer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.apply = func(st engine.MeshSettings) error {
		m, err := st.Mesh()
		if err != nil {
			return err
		}
		xds.SetRootNamespace(m.RootNamespace)
		eng.SetMesh(m)
		return nil
	}
}

// run watches the inputs until ctx ends.
func (s *meshSource) run(ctx context.Context) {
	if s.client != nil {
		go watchMeshConfigMap(ctx, s.client, s.meshState, s.cmNS, s.cmName)
	}
	s.mu.Lock()
	file, dir := s.inputs[meshFromFile], s.inputs[meshFromDir]
	s.mu.Unlock()
	pollMesh(ctx, s.meshState, s.o.mesh.file, s.o.configDir, s.cmName, file, dir)
}

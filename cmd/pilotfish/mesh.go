package main

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	meshv1 "istio.io/api/mesh/v1alpha1"

	"github.com/pilotfish-mesh/pilotfish/engine"
	"github.com/pilotfish-mesh/pilotfish/ingest"
	"github.com/pilotfish-mesh/pilotfish/meshconfig"
)

// meshOptions are serve's flags of the mesh config (docs/mesh-config.md).
type meshOptions struct {
	// file is --mesh-config (istiod's --meshConfig): it wins over the
	// ConfigMaps.
	file string
	// configMap: with an API server, watch ConfigMap istio (istio-REV)
	// in --inject-namespace.
	configMap bool
}

func addMeshFlags(f *pflag.FlagSet, o *meshOptions) {
	f.StringVar(&o.file, "mesh-config", envString("PILOTFISH_MESH_CONFIG", ""), "istiod's mesh config file (the `mesh` key of ConfigMap istio; istiod's --meshConfig), re-read when it changes; "+
		"it wins over ConfigMap istio from the API server and from --config-dir (PILOTFISH_MESH_CONFIG)")
	f.StringVar(&o.file, "meshConfig", "", "alias of --mesh-config, istiod's spelling")
	_ = f.MarkHidden("meshConfig")
	f.BoolVar(&o.configMap, "mesh-configmap", true, "with an API server, read and watch ConfigMap istio (istio-REVISION for a non-default --revision) in --inject-namespace, keys mesh and meshNetworks, for the control plane and sidecar injection (one watch)")
}

// meshInput is one source's mesh config document.
type meshInput struct {
	origin   string // where it came from, for errors
	mesh     []byte
	networks []byte
	present  bool
	// file, when the document is a key of a ConfigMap in a file: its
	// problems name the file, the ConfigMap and the line in the file
	// (the document's line plus lineOffset).
	file            string
	lineOffset      int
	namespace, name string
}

// The sources in precedence order: the first present one is read.
const (
	meshFromFile = iota
	meshFromAPI
	meshFromDir
	numMeshInputs
)

// meshFlags are the settings explicitly given as flags (or their
// environment variables), which win over the mesh config.
type meshFlags struct {
	outboundPolicy     string
	outboundSet        bool
	trustDomainAliases []string
	aliasesSet         bool
	trustDomain        string // the CA's (--trust-domain), used by xDS too when set
	trustDomainSet     bool
}

// meshState applies the mesh config to the engine, the xDS server and the
// subscribers, and keeps its problems for /debug/config_errors.
type meshState struct {
	log      *slog.Logger
	base     engine.MeshSettings // what flags give (domain, cluster, JWKS mode)
	flags    meshFlags
	apply    func(engine.MeshSettings) error // engine and xDS server
	errCount prometheus.Counter
	// applied is the time of the last mesh config applied (nil in unit
	// tests): a benchmark (tools/mesh-change.sh) or an operator sees when
	// a change took effect, whether or not it pushed anything.
	applied prometheus.Gauge

	mu        sync.Mutex
	inputs    [numMeshInputs]meshInput   // guarded by mu
	current   *meshv1.MeshConfig         // guarded by mu; the last good
	problems  []error                    // guarded by mu
	subs      []func(*meshv1.MeshConfig) // guarded by mu
	caTD      string                     // the CA's trust domain at start; guarded by mu
	overrides map[string]bool            // flag overrides already logged; guarded by mu
}

// subscribe registers fn for every mesh config applied from now on (the
// injector's, for one); it is called at once with the current one. fn is
// called with mu held, so that calls never reorder; it must not call
// back into s. The config is shared: fn must not change it.
func (s *meshState) subscribe(fn func(*meshv1.MeshConfig)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.subs = append(s.subs, fn)
	if s.current != nil {
		fn(s.current)
	}
}

// Errors is the current problems of the mesh config, for
// /debug/config_errors and the unsupported-fields gauge.
func (s *meshState) Errors() []error {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.problems)
}

// set records a source's document and applies the one in force. A
// document that does not parse keeps the last good config (logged,
// counted, listed); it returns that error.
func (s *meshState) set(which int, in meshInput) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inputs[which] = in
	in = meshInput{origin: "istiod's defaults"}
	for _, i := range s.inputs {
		if i.present {
			in = i
			break
		}
	}
	mc, problems, err := parseMeshInput(in)
	if err != nil {
		s.errCount.Inc()
		s.log.Error("mesh config refused: keeping the last good one", "source", in.origin, "err", err)
		s.problems = problems
		return err
	}
	settings := s.settingsLocked(mc)
	if err := s.apply(settings); err != nil {
		s.errCount.Inc()
		s.log.Error("mesh config refused: keeping the last good one", "source", in.origin, "err", err)
		s.problems = append(problems, ingest.MeshProblem(in.origin, 0, "", err.Error(), false))
		return err
	}
	for _, p := range problems {
		s.log.Warn("mesh config", "source", in.origin, "problem", p)
	}
	if s.caTD != "" && settings.TrustDomain != s.caTD {
		msg := fmt.Sprintf("trustDomain %q differs from the CA's %q: xDS uses the mesh config's, the CA keeps signing for %q until pilotfish restarts", settings.TrustDomain, s.caTD, s.caTD)
		s.log.Warn("mesh config: "+msg, "source", in.origin)
		problems = append(problems, ingest.MeshProblem(in.origin, 0, "trustDomain", msg, true))
	}
	s.problems = problems
	s.current = mc
	if s.applied != nil {
		s.applied.SetToCurrentTime()
	}
	s.log.Info("mesh config applied", "source", in.origin, "rootNamespace", settings.RootNamespace,
		"outboundTrafficPolicy", settings.OutboundTrafficPolicy, "trustDomain", settings.TrustDomain)
	for _, fn := range s.subs {
		fn(mc)
	}
	return nil
}

// parseMeshInput parses a document; problems are its warnings (unknown
// fields, unsupported fields set, meshNetworks), or on error the error's
// parts, as ingest errors of kind MeshConfig.
func parseMeshInput(in meshInput) (*meshv1.MeshConfig, []error, error) {
	mc, warns, err := meshconfig.Parse(in.mesh)
	var problems []error
	for _, w := range warns {
		problems = append(problems, ingest.MeshProblem(in.origin, w.Line, w.Field, w.Message, true))
	}
	if err != nil {
		for _, p := range meshconfig.Problems(err) {
			problems = append(problems, ingest.MeshProblem(in.origin, p.Line, p.Field, p.Message, false))
		}
		if len(problems) == 0 {
			problems = append(problems, ingest.MeshProblem(in.origin, 0, "", err.Error(), false))
		}
		return nil, in.place(problems), fmt.Errorf("%s: %w", in.origin, err)
	}
	if bare, err := meshconfig.Bare(in.mesh); err == nil {
		problems = append(problems, ingest.MeshUnsupported(in.origin, in.mesh, bare)...)
	}
	problems = in.place(problems)
	if _, err := meshconfig.ParseNetworks(in.networks); err != nil {
		var p *meshconfig.Problem
		if errors.As(err, &p) {
			problems = append(problems, ingest.MeshProblem(in.origin+" key meshNetworks", p.Line, "", p.Message, true))
		}
	}
	return mc, problems, nil
}

// place locates problems of the mesh key in the ConfigMap's file: file
// name, line in the file, ConfigMap namespace/name.
func (in meshInput) place(problems []error) []error {
	if in.file == "" {
		return problems
	}
	for _, p := range problems {
		var e *ingest.Error
		if !errors.As(p, &e) {
			continue
		}
		e.Pos.File = in.file
		if e.Pos.Line > 0 {
			e.Pos.Line += in.lineOffset
		}
		e.Namespace, e.Name = in.namespace, in.name
	}
	return problems
}

// settingsLocked is the engine's settings for mc: flags given explicitly
// win (logged once each).
func (s *meshState) settingsLocked(mc *meshv1.MeshConfig) engine.MeshSettings {
	st := s.base
	st.Config = mc
	st.RootNamespace = mc.RootNamespace
	st.ConnectTimeout = mc.GetConnectTimeout().AsDuration()
	st.ProtocolDetectionTimeout = mc.GetProtocolDetectionTimeout().AsDuration()
	st.DisableAutoMTLS = mc.EnableAutoMtls != nil && !mc.EnableAutoMtls.Value
	st.OutboundTrafficPolicy = mc.GetOutboundTrafficPolicy().GetMode().String()
	st.TrustDomainAliases = mc.TrustDomainAliases
	st.TrustDomain = mc.TrustDomain
	override := func(name string, flagVal, meshVal any) {
		if !s.overrides[name] {
			s.overrides[name] = true
			s.log.Info("a flag overrides the mesh config", "flag", name, "flag-value", flagVal, "mesh-config-value", meshVal)
		}
	}
	if s.flags.outboundSet {
		if st.OutboundTrafficPolicy != s.flags.outboundPolicy {
			override("--outbound-traffic-policy", s.flags.outboundPolicy, st.OutboundTrafficPolicy)
		}
		st.OutboundTrafficPolicy = s.flags.outboundPolicy
	}
	if s.flags.aliasesSet {
		if !slices.Equal(st.TrustDomainAliases, s.flags.trustDomainAliases) {
			override("--trust-domain-aliases", s.flags.trustDomainAliases, st.TrustDomainAliases)
		}
		st.TrustDomainAliases = s.flags.trustDomainAliases
	}
	if s.flags.trustDomainSet {
		if st.TrustDomain != s.flags.trustDomain {
			override("--trust-domain", s.flags.trustDomain, st.TrustDomain)
		}
		st.TrustDomain = s.flags.trustDomain
	}
	return st
}

// discoverySelectors is what the mesh config's discoverySelectors give a
// namespace filter (nil: every namespace).
func discoverySelectors(mc *meshv1.MeshConfig) []*metav1.LabelSelector {
	return meshconfig.DiscoverySelectors(mc)
}

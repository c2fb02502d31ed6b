package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"

	meshv1 "istio.io/api/mesh/v1alpha1"

	"github.com/pilotfish-mesh/pilotfish/inject"
)

// injectOptions are the sidecar injector's flags of `pilotfish serve`
// (docs/injection.md).
type injectOptions struct {
	configFile string // the `config` key of istiod's istio-sidecar-injector ConfigMap
	valuesFile string // its `values` key
	meshFile   string // the `mesh` key of ConfigMap istio; empty: the mesh config in force (mesh.go)
	native     bool
	revision   string
	reload     time.Duration
	// configMaps: with an API server, read the injector's ConfigMaps
	// (inject_configmap.go) for what the files do not give.
	configMaps bool
	namespace  string // where the ConfigMaps are (POD_NAMESPACE)
	// webhookCABundle: the leader keeps the injection webhooks' caBundle
	// current (inject_cabundle.go).
	webhookCABundle bool
}

func addInjectFlags(f *pflag.FlagSet, o *injectOptions) {
	f.StringVar(&o.configFile, "inject-config", "", "the injector config (the `config` key of istiod's istio-sidecar-injector ConfigMap): serve sidecar injection on the webhook port (POST "+inject.Path+"); overrides the ConfigMap's; empty: the ConfigMap's (--inject-configmaps), else no injection")
	f.StringVar(&o.valuesFile, "inject-values", "", "the injector's Helm values (the `values` key of the istio-sidecar-injector ConfigMap); required with --inject-config")
	f.StringVar(&o.meshFile, "inject-mesh-config", "", "the mesh config injection reads (the `mesh` key of ConfigMap istio); overrides the mesh config in force; empty: the mesh config serve reads (--mesh-config, ConfigMap istio, istiod's defaults; docs/mesh-config.md)")
	f.BoolVar(&o.native, "inject-native-sidecars", envString("ENABLE_NATIVE_SIDECARS", "false") == "true", "inject the proxy as a Kubernetes native sidecar (ENABLE_NATIVE_SIDECARS=true; istiod's \"auto\" is not supported); a pod's sidecar.istio.io/nativeSidecar wins")
	f.StringVar(&o.revision, "revision", envString("REVISION", ""), "the control plane's revision (REVISION): the istio.io/rev the injector serves, rendered into pods, and the Istio config read: objects without an istio.io/rev label and those labelled with this revision (empty: all; istiod's rule)")
	// The flag's name before it selected config too; old command lines
	// keep working.
	f.StringVar(&o.revision, "inject-revision", envString("REVISION", ""), "deprecated name of --revision")
	_ = f.MarkDeprecated("inject-revision", "use --revision")
	f.DurationVar(&o.reload, "inject-reload", 5*time.Second, "re-read the injector files this often when they changed (0: never); a file that does not parse keeps the last good settings")
	f.BoolVar(&o.configMaps, "inject-configmaps", true, "with an API server, read and watch istiod's injector ConfigMap istio-sidecar-injector (keys config, values; istio-sidecar-injector-REVISION for a non-default --revision) in --inject-namespace; --inject-config and --inject-values override it; a ConfigMap that does not parse keeps the last good settings (the mesh config, ConfigMap istio, is the mesh config reader's: --mesh-configmap)")
	f.BoolVar(&o.webhookCABundle, "inject-webhook-cabundle", false, "the elected replica keeps the caBundle of the sidecar-injector webhooks (names ending in "+injectWebhookSuffix+") of every MutatingWebhookConfiguration labelled istio.io/rev=<--revision, or default> equal to pilotfish's CA roots, as istiod does (with an API server, and without --webhook-cert); off: leave them alone (an istiod may own them)")
	f.StringVar(&o.namespace, "inject-namespace", envString("POD_NAMESPACE", "istio-system"), "namespace of the injector's ConfigMaps (POD_NAMESPACE)")
}

// The injector's inputs, by index.
const (
	inputConfig = iota
	inputValues
	inputMesh
	numInputs
)

// injectInput is one input as last read, and where from (for errors).
type injectInput struct {
	data   []byte
	origin string // "--inject-config /path" or "ConfigMap ns/name key config"
	set    bool
	// missing: a ConfigMap without the key (an error, not an empty input).
	missing bool
	// mesh is the mesh config in force (inputMesh from the mesh config
	// reader), already parsed and validated; nil: parse data.
	mesh *meshv1.MeshConfig
}

// errInjectFileEmpty: an injector file that had content reads empty.
var errInjectFileEmpty = errors.New("empty: mid-write, or emptied (the last good settings stay)")

// errInjectKeyMissing: an injector ConfigMap lacks a key it must have.
var errInjectKeyMissing = errors.New("key missing")

// injectState holds the injector's inputs from files and ConfigMaps and
// the injector built from the last set that parsed. A set that does not
// parse is logged, counted and reported (/debug/config_errors); the last
// good settings stay in force.
type injectState struct {
	o       injectOptions
	log     *slog.Logger
	errors  prometheus.Counter
	metrics *injectMetrics
	// handler serves /inject once a set parsed; nil until then.
	handler atomic.Pointer[http.Handler]

	mu      sync.Mutex
	inputs  [numInputs]injectInput // guarded by mu
	in      *inject.Injector       // guarded by mu
	lastErr error                  // guarded by mu
}

func newInjectState(o injectOptions, reg prometheus.Registerer, log *slog.Logger) *injectState {
	s := &injectState{o: o, log: log, metrics: newInjectMetrics(reg), errors: prometheus.NewCounter(prometheus.CounterOpts{
		Name: "pilotfish_inject_config_errors_total",
		Help: "Injector settings (files or ConfigMaps) that did not parse and were not applied.",
	})}
	if reg != nil {
		reg.MustRegister(s.errors)
	}
	return s
}

// set records new inputs (index -> input) and rebuilds the injector.
func (s *injectState) set(in map[int]injectInput) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.in != nil && s.lastErr == nil && s.unchangedLocked(in) {
		// The same bytes again (a file re-read after its stat moved, a
		// ConfigMap resynced): the injector in force stays, templates and
		// caches included.
		return nil
	}
	for i, v := range in {
		s.inputs[i] = v
	}
	err := s.rebuildLocked()
	if err != nil {
		s.lastErr = err
		s.errors.Inc()
		if s.in != nil {
			s.log.Error("injector settings not applied; keeping the last good ones", "err", err)
		} else {
			s.log.Error("injector settings not applied; /inject answers 503 until a good set arrives", "err", err)
		}
		return err
	}
	s.lastErr = nil
	return nil
}

// unchangedLocked reports whether every input of in is the one in force.
func (s *injectState) unchangedLocked(in map[int]injectInput) bool {
	for i, v := range in {
		cur := s.inputs[i]
		if cur.set != v.set || cur.missing != v.missing || cur.origin != v.origin ||
			cur.mesh != v.mesh || !bytes.Equal(cur.data, v.data) {
			return false
		}
	}
	return true
}

func (s *injectState) rebuildLocked() error {
	cfg, vals := s.inputs[inputConfig], s.inputs[inputValues]
	if !cfg.set || !vals.set {
		return nil // nothing to inject with yet
	}
	for _, in := range s.inputs {
		if in.missing {
			return fmt.Errorf("%s: %w", in.origin, errInjectKeyMissing)
		}
	}
	c, err := inject.ParseConfig(cfg.data)
	if err != nil {
		return fmt.Errorf("%s: %w", cfg.origin, err)
	}
	v, err := inject.ParseValues(vals.data)
	if err != nil {
		return fmt.Errorf("%s: %w", vals.origin, err)
	}
	mesh := inject.DefaultMesh()
	if m := s.inputs[inputMesh]; m.mesh != nil {
		mesh = m.mesh
	} else if m.set {
		if mesh, err = inject.ParseMesh(m.data); err != nil {
			return fmt.Errorf("%s: %w", m.origin, err)
		}
	}
	settings := &inject.Settings{Config: c, Values: v, Mesh: mesh, Revision: s.o.revision,
		NativeSidecars: s.o.native, CompliancePolicy: os.Getenv("COMPLIANCE_POLICY")}
	if s.in == nil {
		in, err := inject.New(settings, s.log)
		if err != nil {
			return err
		}
		s.in = in
		h := inject.NewWebhook(in, s.log, s.metrics)
		s.handler.Store(&h)
		s.log.Info("serving sidecar injection", "path", inject.Path, "templates", c.TemplateNames(), "policy", c.Policy,
			"config", cfg.origin, "values", vals.origin)
		return nil
	}
	if err := s.in.Update(settings); err != nil {
		return err
	}
	s.log.Info("injector settings reloaded", "templates", c.TemplateNames(), "policy", c.Policy, "config", cfg.origin)
	return nil
}

// useMesh makes mc (read only, shared with the mesh config's other
// readers) the mesh config injection reads, unless --inject-mesh-config
// gives one: the injector subscribes to the mesh config reader (mesh.go)
// rather than watching ConfigMap istio itself.
func (s *injectState) useMesh(mc *meshv1.MeshConfig) {
	if s.o.meshFile != "" {
		return
	}
	_ = s.set(map[int]injectInput{inputMesh: {mesh: mc, origin: "the mesh config", set: true}}) // logged and counted
}

// injector is the injector in force (nil before the first good set).
func (s *injectState) injector() *inject.Injector {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.in
}

// Errors is the current problem with the injector's settings, for
// /debug/config_errors (none when the last set parsed).
func (s *injectState) Errors() []error {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lastErr == nil {
		return nil
	}
	return []error{fmt.Errorf("sidecar injector: %w", s.lastErr)}
}

func (s *injectState) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := s.handler.Load()
	if h == nil {
		http.Error(w, "sidecar injector: no injector config loaded yet", http.StatusServiceUnavailable)
		return
	}
	(*h).ServeHTTP(w, r)
}

// withInjectErrors adds the injector's problems to a source's.
func withInjectErrors(src func() []error, s *injectState) func() []error {
	if s == nil {
		return src
	}
	return func() []error { return append(src(), s.Errors()...) }
}

// injectFiles are the injector's file inputs; modTime and size are the
// files' as last read, parsed or not, so that a broken set is reported
// once, not at every check.
type injectFiles struct {
	o       injectOptions
	modTime [numInputs]time.Time
	size    [numInputs]int64
}

func (f *injectFiles) paths() [numInputs]string {
	return [numInputs]string{f.o.configFile, f.o.valuesFile, f.o.meshFile}
}

var inputFlags = [numInputs]string{"--inject-config", "--inject-values", "--inject-mesh-config"}

// changed stats the files and reports whether any differs from the last
// load.
func (f *injectFiles) changed() bool {
	for i, p := range f.paths() {
		if p == "" {
			continue
		}
		st, err := os.Stat(p)
		if err != nil {
			return false // mid-rewrite: try again next time
		}
		if !st.ModTime().Equal(f.modTime[i]) || st.Size() != f.size[i] {
			return true
		}
	}
	return false
}

// read reads the files that are given.
func (f *injectFiles) read() (map[int]injectInput, error) {
	out := map[int]injectInput{}
	var mod [numInputs]time.Time
	var size [numInputs]int64
	for i, p := range f.paths() {
		if p == "" {
			continue
		}
		st, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(b)) == 0 && f.size[i] > 0 {
			// Saved in place, a file is truncated first: read empty, it is
			// most likely mid-write (an injector without templates is no
			// good set anyway). The next tick reads it again.
			return nil, fmt.Errorf("%s %s: %w", inputFlags[i], p, errInjectFileEmpty)
		}
		mod[i], size[i] = st.ModTime(), st.Size()
		out[i] = injectInput{data: b, origin: inputFlags[i] + " " + p, set: true}
	}
	f.modTime, f.size = mod, size
	return out, nil
}

// serveInjection mounts sidecar injection on the webhook server when it
// has settings to inject with: the --inject-* files, or (with an API
// server and --inject-configmaps) istiod's injector ConfigMap, which it
// then watches. Its mesh config is mesh's (the one in force) unless
// --inject-mesh-config gives one. It returns nil when injection is off.
func (w *webhookServer) serveInjection(ctx context.Context, so *serveOptions, mesh *meshState, reg prometheus.Registerer, log *slog.Logger) (*injectState, error) {
	o := so.inject
	if o.configFile != "" && o.valuesFile == "" {
		return nil, errors.New("--inject-config needs --inject-values")
	}
	if o.valuesFile != "" && o.configFile == "" {
		return nil, errors.New("--inject-values needs --inject-config")
	}
	var client kubernetes.Interface
	if o.configMaps {
		cfg, err := so.kube.restConfig(so.configDir)
		if err != nil {
			return nil, err
		}
		if cfg != nil {
			if client, err = kubernetes.NewForConfig(cfg); err != nil {
				return nil, fmt.Errorf("kubernetes client: %w", err)
			}
		}
	}
	if o.configFile == "" && client == nil {
		return nil, nil
	}
	log = log.With("component", "injector")
	s := newInjectState(o, reg, log)
	if mesh != nil {
		mesh.subscribe(s.useMesh)
	}
	files := &injectFiles{o: o}
	if o.configFile != "" || o.meshFile != "" {
		in, err := files.read()
		if err != nil {
			return nil, err
		}
		if err := s.set(in); err != nil {
			return nil, err
		}
	}
	if w == nil {
		log.Warn("sidecar injection off: the webhook server is off")
		return nil, nil
	}
	mux, ok := w.srv.Handler.(*http.ServeMux)
	if !ok {
		return nil, errors.New("webhook server has no ServeMux")
	}
	mux.Handle(inject.Path, s)
	mux.Handle(inject.Path+"/", s)
	if o.reload > 0 && (o.configFile != "" || o.meshFile != "") {
		go pprof.Do(ctx, pprof.Labels("component", "injector-reload"), func(ctx context.Context) {
			reloadInjector(ctx, s, files, o.reload)
		})
	}
	if client != nil && o.configFile == "" {
		go pprof.Do(ctx, pprof.Labels("component", "injector-configmaps"), func(ctx context.Context) {
			watchInjectConfigMaps(ctx, client, s)
		})
	}
	return s, nil
}

// reloadInjector re-reads the files when they change; a set that does
// not parse is logged and the last good one stays in force.
func reloadInjector(ctx context.Context, s *injectState, files *injectFiles, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !files.changed() {
			continue
		}
		in, err := files.read()
		if err != nil {
			s.log.Error("injector files not reloaded; keeping the last good settings", "err", err)
			continue
		}
		_ = s.set(in) // logged and counted
	}
}

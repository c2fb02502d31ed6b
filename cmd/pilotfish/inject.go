package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"runtime/pprof"
	"time"

	"github.com/spf13/pflag"

	"github.com/pilotfish-mesh/pilotfish/inject"
)

// injectOptions are the sidecar injector's flags of `pilotfish serve`
// (docs/injection.md).
type injectOptions struct {
	configFile string // the `config` key of istiod's istio-sidecar-injector ConfigMap
	valuesFile string // its `values` key
	meshFile   string // the `mesh` key of ConfigMap istio; empty: istiod's defaults
	native     bool
	revision   string
	reload     time.Duration
}

func addInjectFlags(f *pflag.FlagSet, o *injectOptions) {
	f.StringVar(&o.configFile, "inject-config", "", "the injector config (the `config` key of istiod's istio-sidecar-injector ConfigMap): serve sidecar injection on the webhook port (POST "+inject.Path+"); empty: no injection")
	f.StringVar(&o.valuesFile, "inject-values", "", "the injector's Helm values (the `values` key of the istio-sidecar-injector ConfigMap); required with --inject-config")
	f.StringVar(&o.meshFile, "inject-mesh-config", "", "the mesh config injection reads (the `mesh` key of ConfigMap istio); empty: istiod's built-in defaults")
	f.BoolVar(&o.native, "inject-native-sidecars", envString("ENABLE_NATIVE_SIDECARS", "false") == "true", "inject the proxy as a Kubernetes native sidecar (ENABLE_NATIVE_SIDECARS=true; istiod's \"auto\" is not supported); a pod's sidecar.istio.io/nativeSidecar wins")
	f.StringVar(&o.revision, "inject-revision", envString("REVISION", ""), "the istio.io/rev the injector serves, rendered into pods (REVISION); empty is the default revision")
	f.DurationVar(&o.reload, "inject-reload", 5*time.Second, "re-read the injector files this often when they changed (0: never); a file that does not parse keeps the last good settings")
}

// injectFiles are the injector's inputs; modTime and size are the files'
// as last read, parsed or not, so that a broken set is reported once, not
// at every check.
type injectFiles struct {
	o       injectOptions
	modTime [3]time.Time
	size    [3]int64
}

func (f *injectFiles) paths() [3]string {
	return [3]string{f.o.configFile, f.o.valuesFile, f.o.meshFile}
}

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

// load reads and parses all three files.
func (f *injectFiles) load() (*inject.Settings, error) {
	var data [3][]byte
	var mod [3]time.Time
	var size [3]int64
	for i, p := range f.paths() {
		if p == "" {
			continue
		}
		st, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if data[i], err = os.ReadFile(p); err != nil {
			return nil, err
		}
		mod[i], size[i] = st.ModTime(), st.Size()
	}
	f.modTime, f.size = mod, size
	cfg, err := inject.ParseConfig(data[0])
	if err != nil {
		return nil, fmt.Errorf("--inject-config %s: %w", f.o.configFile, err)
	}
	vals, err := inject.ParseValues(data[1])
	if err != nil {
		return nil, fmt.Errorf("--inject-values %s: %w", f.o.valuesFile, err)
	}
	mesh := inject.DefaultMesh()
	if f.o.meshFile != "" {
		if mesh, err = inject.ParseMesh(data[2]); err != nil {
			return nil, fmt.Errorf("--inject-mesh-config %s: %w", f.o.meshFile, err)
		}
	}
	return &inject.Settings{Config: cfg, Values: vals, Mesh: mesh, Revision: f.o.revision,
		NativeSidecars: f.o.native, CompliancePolicy: os.Getenv("COMPLIANCE_POLICY")}, nil
}

// serveInjection mounts sidecar injection on the webhook server (with
// --inject-config) and keeps its settings current with the files until
// ctx ends.
func (w *webhookServer) serveInjection(ctx context.Context, o injectOptions, log *slog.Logger) error {
	if o.configFile == "" {
		return nil
	}
	if o.valuesFile == "" {
		return errors.New("--inject-config needs --inject-values")
	}
	files := &injectFiles{o: o}
	s, err := files.load()
	if err != nil {
		return err
	}
	if w == nil {
		log.Warn("sidecar injection off: the webhook server is off")
		return nil
	}
	log = log.With("component", "injector")
	in, err := inject.New(s, log)
	if err != nil {
		return err
	}
	mux, ok := w.srv.Handler.(*http.ServeMux)
	if !ok {
		return errors.New("webhook server has no ServeMux")
	}
	h := inject.NewWebhook(in, log)
	mux.Handle(inject.Path, h)
	mux.Handle(inject.Path+"/", h)
	log.Info("serving sidecar injection", "path", inject.Path, "templates", s.Config.TemplateNames(), "policy", s.Config.Policy)
	if o.reload > 0 {
		go pprof.Do(ctx, pprof.Labels("component", "injector-reload"), func(ctx context.Context) {
			reloadInjector(ctx, in, files, o.reload, log)
		})
	}
	return nil
}

// reloadInjector re-reads the files when they change; a set that does
// not parse is logged and the last good one stays in force.
func reloadInjector(ctx context.Context, in *inject.Injector, files *injectFiles, every time.Duration, log *slog.Logger) {
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
		s, err := files.load()
		if err != nil {
			log.Error("injector settings not reloaded; keeping the last good ones", "err", err)
			continue
		}
		if err := in.Update(s); err != nil {
			log.Error("injector settings not reloaded; keeping the last good ones", "err", err)
			continue
		}
		log.Info("injector settings reloaded", "templates", s.Config.TemplateNames(), "policy", s.Config.Policy)
	}
}

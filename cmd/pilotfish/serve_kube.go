package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"
	istioclient "istio.io/client-go/pkg/clientset/versioned"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/pilotfish-mesh/pilotfish/engine"
	"github.com/pilotfish-mesh/pilotfish/ingest"
)

// inClusterKubeconfig is the --kubeconfig value that selects the pod's
// service account explicitly (needed only together with --config-dir).
const inClusterKubeconfig = "in-cluster"

// kubeOptions are serve's flags of the Kubernetes source.
type kubeOptions struct {
	kubeconfig string
	clusterID  string
	// discoveryInterval: how often discovery is polled for Istio CRDs
	// (tests shorten it).
	discoveryInterval time.Duration
	// watchSecrets: read Secrets for gateway credentials.
	watchSecrets bool
}

func addKubeFlags(f *pflag.FlagSet, o *kubeOptions) {
	f.StringVar(&o.kubeconfig, "kubeconfig", "", `kubeconfig of the Kubernetes API server to watch, or "in-cluster" for the pod's service account; `+
		`empty: in-cluster when running in a pod (KUBERNETES_SERVICE_HOST is set) and --config-dir is not given, else no API server`)
	f.StringVar(&o.clusterID, "cluster-id", envString("CLUSTER_ID", "Kubernetes"), "ID of the cluster the endpoints belong to (CLUSTER_ID): stamped on endpoint and cluster metadata (istio.workload) whatever a proxy's own CLUSTER_ID says, and logged with the API server source")
	f.DurationVar(&o.discoveryInterval, "crd-poll-interval", 10*time.Second, "how often the API server is asked whether Istio's CRDs were installed or removed")
	f.BoolVar(&o.watchSecrets, "watch-secrets", false, "watch the API server's Secrets for gateway credentials (credentialName, served over SDS to the gateways of their namespace); "+
		"needs get, list and watch on secrets cluster-wide (the chart's gatewayCredentials value grants it); only the certificate keys of a Secret are kept, and a kubernetes.io/dockerconfigjson Secret's .dockerconfigjson (a WasmPlugin's imagePullSecret, sent only to authenticated proxies)")
}

// restConfig is the API server to watch, nil when none is configured. The
// rule: an explicit --kubeconfig wins; without it, a pod watches its own
// cluster (as istiod does) unless --config-dir makes it a file-only server.
func (o *kubeOptions) restConfig(configDir string) (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	switch {
	case o.kubeconfig == inClusterKubeconfig,
		o.kubeconfig == "" && configDir == "" && os.Getenv("KUBERNETES_SERVICE_HOST") != "":
		if cfg, err = rest.InClusterConfig(); err != nil {
			return nil, fmt.Errorf("in-cluster Kubernetes config: %w", err)
		}
	case o.kubeconfig != "":
		if cfg, err = clientcmd.BuildConfigFromFlags("", o.kubeconfig); err != nil {
			return nil, fmt.Errorf("--kubeconfig %q: %w", o.kubeconfig, err)
		}
	default:
		return nil, nil
	}
	cfg.UserAgent = "pilotfish/" + version
	// Informers list once and then watch; the headroom is for relists
	// after an API server restart and for discovery polls.
	cfg.QPS, cfg.Burst = 50, 100
	return cfg, nil
}

// configSources are the sources serve reads: the file source, the
// Kubernetes source, or both, writing to one index (its writer serializes
// Apply), each with its own converter; with both, an ingest.Precedence
// makes the API server's definition of an object win.
type configSources struct {
	// index is what they write, as the engine reads it.
	index engine.Index
	file  *ingest.FileSource
	kube  *ingest.KubeSource
	jwks  *jwksWiring // serve_jwks.go
}

// newSources builds the sources the flags ask for; at least one is
// required.
func newSources(o *serveOptions, log *slog.Logger) (*configSources, error) {
	w := ingest.NewIndexWriter()
	s := &configSources{index: w}
	cfg, err := o.kube.restConfig(o.configDir)
	if err != nil {
		return nil, err
	}
	s.jwks, err = newJWKS(o.jwks, func(opts ingest.JWKSInputOptions) *ingest.JWKSInput { return ingest.NewJWKSInput(w, opts) }, log)
	if err != nil {
		return nil, err
	}
	// With both, the API server's definition of an object wins over the
	// directory's.
	var prec *ingest.Precedence
	if o.configDir != "" && cfg != nil {
		prec = ingest.NewPrecedence()
	}
	if o.configDir != "" {
		if fi, err := os.Stat(o.configDir); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("--config-dir %q: not a readable directory", o.configDir)
		}
		s.file = ingest.NewFileSource(w, ingest.FileSourceOptions{
			Dir: o.configDir, DomainSuffix: o.domain, Logger: log, Resync: resyncOption(o.resync), Precedence: prec,
			Revision: o.inject.revision,
		})
	}
	if cfg != nil {
		client, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return nil, fmt.Errorf("kubernetes client: %w", err)
		}
		istio, err := istioclient.NewForConfig(cfg)
		if err != nil {
			return nil, fmt.Errorf("istio client: %w", err)
		}
		routeKlog(log)
		s.kube = ingest.NewKubeSource(w, ingest.KubeSourceOptions{
			Client: client, Istio: istio, DomainSuffix: o.domain,
			DiscoveryInterval: o.kube.discoveryInterval,
			Secrets:           o.kube.watchSecrets,
			Precedence:        prec,
			Revision:          o.inject.revision,
			Logger:            log.With("cluster", o.kube.clusterID, "api-server", cfg.Host),
		})
	}
	if s.file == nil && s.kube == nil {
		return nil, errors.New("no configuration source: give --config-dir, --kubeconfig, or run in a pod")
	}
	return s, nil
}

// Synced reports whether every source has applied its initial state, and
// the key sets its RequestAuthentications name have been fetched once (or
// failed to be, each within its timeout), as istiod's first push waits
// for them.
func (s *configSources) Synced() bool {
	return (s.file == nil || s.file.Synced()) && (s.kube == nil || s.kube.Synced()) &&
		(s.jwks == nil || s.jwks.settled())
}

// Errors lists the current problems of every source.
func (s *configSources) Errors() []error {
	var out []error
	if s.file != nil {
		out = append(out, s.file.Errors()...)
	}
	if s.kube != nil {
		out = append(out, s.kube.Errors()...)
	}
	return out
}

// Run runs the sources until ctx ends; it returns the first error (the
// file source's directory is missing at start).
func (s *configSources) Run(ctx context.Context) error {
	var runs []func(context.Context) error
	if s.file != nil {
		runs = append(runs, s.file.Run)
	}
	if s.kube != nil {
		runs = append(runs, s.kube.Run)
	}
	if s.jwks != nil {
		runs = append(runs, s.jwks.run)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, len(runs))
	var wg sync.WaitGroup
	for _, run := range runs {
		wg.Go(func() {
			err := run(ctx)
			if err != nil {
				cancel()
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// describe names the sources for the startup log line.
func (s *configSources) describe(o *serveOptions) string {
	var parts []string
	if s.file != nil {
		parts = append(parts, "dir "+o.configDir)
	}
	if s.kube != nil {
		parts = append(parts, "kubernetes cluster "+o.kube.clusterID)
	}
	return strings.Join(parts, ", ")
}

// routeKlog sends client-go's logging (klog: informers, leader election,
// watch errors) to the server's logger, so --log-level and the log format
// apply to it too and nothing is written to stderr behind the server's back.
// At debug level klog's verbosity is raised to 4 (reflector restarts, watch
// expiry and relists); otherwise its V-logs are not even formatted.
func routeKlog(log *slog.Logger) {
	klog.SetSlogLogger(log.With("component", "client-go"))
	v := "0"
	if log.Enabled(context.Background(), slog.LevelDebug) {
		v = "4"
	}
	var level klog.Level
	_ = level.Set(v) // sets klog's global verbosity; "0" and "4" parse
}

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	meshv1 "istio.io/api/mesh/v1alpha1"

	"github.com/pilotfish-mesh/pilotfish/debug"
	"github.com/pilotfish-mesh/pilotfish/engine"
	"github.com/pilotfish-mesh/pilotfish/serve"
)

// serveOptions are the flags of `pilotfish serve`.
type serveOptions struct {
	configDir         string
	grpcAddr          string
	httpAddr          string
	domain            string
	outboundPolicy    string
	traceSampling     float64
	logLevel          string
	debounceAfter     time.Duration
	debounceMax       time.Duration
	enableEDSDebounce bool
	pushThrottle      int
	resync            time.Duration
	shutdownGrace     time.Duration
	// trustDomainAliases: meshConfig trustDomainAliases until the mesh
	// ConfigMap is read (then it is the flag's default).
	trustDomainAliases []string
	ca                 caOptions      // ca.go
	limits             limitOptions   // serve_limits.go
	webhook            webhookOptions // webhook.go
	inject             injectOptions  // inject.go
	kube               kubeOptions    // serve_kube.go
	leader             leaderOptions  // leader.go
	jwks               jwksOptions    // serve_jwks.go
	mesh               meshOptions    // mesh.go
	// explicit names the mesh-related flags given on the command line or
	// by their environment variables: they win over the mesh config.
	explicit map[string]bool
	logOut   io.Writer // where logs go; nil is stderr (tests capture them)
}

func newServeCommand() *cobra.Command {
	o := &serveOptions{}
	cmd := &cobra.Command{
		Use:   "serve [--config-dir DIR] [--kubeconfig PATH]",
		Short: "Run the control plane: watch config, serve xDS to proxies",
		Long: `serve reads the mesh's configuration from --config-dir (Kubernetes Services,
EndpointSlices, Pods, Namespaces and Istio config as YAML or JSON, watched for
changes) and/or a Kubernetes API server (--kubeconfig, or in-cluster in a pod),
and serves it as Envoy xDS on --grpc-addr to sidecars, gateways and proxyless
gRPC clients configured for istiod.

The defaults listen on 127.0.0.1 for local runs. In a cluster, listen on all
interfaces with istiod's ports: --grpc-addr :15010 --http-addr :15014.

Settings also read istiod's environment variables where they mean the same:
PILOT_DEBOUNCE_AFTER, PILOT_DEBOUNCE_MAX, PILOT_ENABLE_EDS_DEBOUNCE,
PILOT_PUSH_THROTTLE, PILOT_XDS_SEND_TIMEOUT and ISTIO_GPRC_MAXRECVMSGSIZE (a
flag on the command line wins).`,
		Example: `  # Serve the example mesh
  pilotfish serve --config-dir examples

  # In a cluster, on istiod's ports, watching the pod's API server
  pilotfish serve --grpc-addr :15010 --http-addr :15014

  # Against a cluster from outside, plus local manifests
  pilotfish serve --kubeconfig ~/.kube/config --config-dir extra/`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			o.explicit = map[string]bool{}
			for flag, env := range map[string]string{"outbound-traffic-policy": "PILOTFISH_OUTBOUND_TRAFFIC_POLICY",
				"trust-domain-aliases": "PILOTFISH_TRUST_DOMAIN_ALIASES", "trust-domain": "TRUST_DOMAIN"} {
				_, inEnv := os.LookupEnv(env)
				o.explicit[flag] = cmd.Flags().Changed(flag) || inEnv
			}
			return runServe(ctx, o, nil)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.configDir, "config-dir", "", "directory of YAML/JSON manifests to serve, watched recursively (required unless an API server is watched)")
	f.StringVar(&o.grpcAddr, "grpc-addr", "127.0.0.1:15010", "listen address of the plaintext gRPC server (xDS); istiod's port is 15010")
	f.StringVar(&o.httpAddr, "http-addr", "127.0.0.1:15014", "listen address of the HTTP server (/ready, /metrics, /debug/...); istiod's port is 15014")
	f.StringVar(&o.domain, "domain", "cluster.local", "the cluster DNS domain suffix")
	f.Float64Var(&o.traceSampling, "trace-sampling", envFloat("PILOT_TRACE_SAMPLING", 1), "tracing sampling percentage (0 to 100) of HTTP connection managers where the mesh config's defaultConfig.tracing.sampling (or a proxy's PROXY_CONFIG) sets none, as istiod's PILOT_TRACE_SAMPLING (docs/telemetry.md)")
	f.StringVar(&o.outboundPolicy, "outbound-traffic-policy", envString("PILOTFISH_OUTBOUND_TRAFFIC_POLICY", "ALLOW_ANY"), "mesh-wide outboundTrafficPolicy.mode for traffic to destinations no service defines: ALLOW_ANY (PassthroughCluster) or REGISTRY_ONLY (BlackHoleCluster); a Sidecar's outboundTrafficPolicy overrides it (PILOTFISH_OUTBOUND_TRAFFIC_POLICY)")
	f.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn or error (client-go's logging too, as component=client-go; at debug with its klog -v=4 detail)")
	f.DurationVar(&o.debounceAfter, "debounce-after", envDuration("PILOT_DEBOUNCE_AFTER", 100*time.Millisecond), "push once no change has arrived for this long (PILOT_DEBOUNCE_AFTER)")
	f.DurationVar(&o.debounceMax, "debounce-max", envDuration("PILOT_DEBOUNCE_MAX", 10*time.Second), "push at the latest this long after the first change (PILOT_DEBOUNCE_MAX)")
	f.BoolVar(&o.enableEDSDebounce, "eds-debounce", envBool("PILOT_ENABLE_EDS_DEBOUNCE", true), "debounce endpoint-only changes too (PILOT_ENABLE_EDS_DEBOUNCE)")
	f.IntVar(&o.pushThrottle, "push-throttle", envInt("PILOT_PUSH_THROTTLE", 100), "how many proxies are pushed to concurrently (PILOT_PUSH_THROTTLE)")
	f.DurationVar(&o.resync, "resync", 30*time.Second, "re-check every config file this often in case a watch event was lost (0 disables)")
	f.DurationVar(&o.shutdownGrace, "shutdown-grace", 10*time.Second, "on SIGTERM, let streams finish for up to this long")
	f.StringSliceVar(&o.trustDomainAliases, "trust-domain-aliases", envList("PILOTFISH_TRUST_DOMAIN_ALIASES", nil),
		"comma-separated trust domains whose identities count as the mesh's own (meshConfig trustDomainAliases): AuthorizationPolicy principals match them too (PILOTFISH_TRUST_DOMAIN_ALIASES)")
	addCAFlags(f, &o.ca)
	addLimitFlags(f, &o.limits)
	addWebhookFlags(f, &o.webhook)
	addInjectFlags(f, &o.inject)
	addKubeFlags(f, &o.kube)
	addLeaderFlags(f, &o.leader)
	addJWKSFlags(f, &o.jwks)
	addMeshFlags(f, &o.mesh)
	return cmd
}

// started reports the bound addresses, for tests.
type started struct {
	grpcAddr, httpAddr net.Addr
	grpcTLSAddr        net.Addr // nil when the TLS port is off
	webhookAddr        net.Addr // nil when the webhook is off
}

// runServe wires and runs the server until ctx ends. onStart, if set, is
// called with the bound addresses once both servers listen.
func runServe(ctx context.Context, o *serveOptions, onStart func(started)) error {
	log, err := newLogger(o.logLevel, o.logOut)
	if err != nil {
		return err
	}
	meshSrc, meshSettings, err := startMesh(ctx, o, log) // mesh_serve.go
	if err != nil {
		return err
	}
	mesh, err := meshSettings.Mesh()
	if err != nil {
		return err
	}

	source, err := newSources(o, log) // serve_kube.go
	if err != nil {
		return err
	}
	if source.kube != nil {
		// The mesh config's discoverySelectors limit the namespaces the API
		// server's objects are read from, now and on every change.
		meshSrc.subscribe(func(mc *meshv1.MeshConfig) {
			if err := source.kube.SetDiscoverySelectors(discoverySelectors(mc)); err != nil {
				log.Warn("mesh config discoverySelectors not applied", "err", err)
			}
		})
	}
	metrics := newMetrics(source.index)
	metrics.registry.MustRegister(source.jwks.fetches)
	eng := engine.New(source.index, engine.Options{
		DebounceAfter:      o.debounceAfter,
		DebounceMax:        o.debounceMax,
		DisableEDSDebounce: !o.enableEDSDebounce,
		PushThrottle:       o.pushThrottle,
		Mesh:               mesh,
		Logger:             log,
		Metrics:            metrics.engine(),
	})
	metrics.watchCache(eng.Cache())
	metrics.watchResponses(eng.ResponseStats)
	sourceErrors := func() []error { return append(source.Errors(), meshSrc.Errors()...) }
	metrics.watchUnsupported(sourceErrors)
	metrics.registry.MustRegister(meshSrc.errCount, meshSrc.applied)

	grpcServer := grpc.NewServer(append(serve.ServerOptions(), o.limits.grpcOptions()...)...)
	gate := newSyncGate(source.Synced, metrics.registry)
	go gate.run(ctx)
	controlPlaneID := debug.ControlPlaneID(version)
	xdsServer := serve.NewXDSServer(backend{e: eng, gate: gate}, serve.XDSOptions{Logger: log, Metrics: metrics.xds(), Limits: o.limits.xds(),
		ControlPlaneID: controlPlaneID, Debug: debug.XDS(eng), RootNamespace: mesh.RootNamespace})
	xdsServer.Register(grpcServer)
	meshSrc.connect(eng, xdsServer)
	// The CA on the plaintext server, and the TLS server (xDS and CA): ca.go.
	o.ca.grpcOptions = o.limits.grpcOptions() // the TLS server's too (serve_limits.go)
	o.ca.authMetrics = metrics.xds()
	secure, err := newSecureServing(ctx, o.ca, log, metrics.registry, grpcServer, xdsServer.RegisterAuthenticated)
	if err != nil {
		return err
	}
	webhook, err := newWebhookServer(o.webhook, o.ca.tlsSANs, secure, log)
	if err != nil {
		secure.stop()
		return err
	}
	defer webhook.close()
	injection, err := webhook.serveInjection(ctx, o, meshSrc.meshState, metrics.registry, log) // sidecar injection: inject.go
	if err != nil {
		secure.stop()
		return err
	}
	leader, err := serveLeader(o, secure, webhook, log) // once-per-cluster duties: leader.go
	if err != nil {
		secure.stop()
		return err
	}
	lis, err := net.Listen("tcp", o.grpcAddr)
	if err != nil {
		secure.stop()
		return fmt.Errorf("gRPC listen on %s: %w", o.grpcAddr, err)
	}
	httpServer := serve.NewHTTPServer(serve.HTTPOptions{Addr: o.httpAddr, Ready: source.Synced, Gatherer: metrics.registry, Logger: log})
	debug.Register(httpServer, debug.Views{Engine: eng, XDS: xdsServer, Errors: withInjectErrors(sourceErrors, injection), Pushes: metrics.push,
		ControlPlaneID: controlPlaneID})
	httpAddr, err := httpServer.Start()
	if err != nil {
		lis.Close()
		secure.stop()
		return fmt.Errorf("HTTP listen on %s: %w", o.httpAddr, err)
	}

	runCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sourceErr := make(chan error, 1)
	go func() { sourceErr <- source.Run(runCtx) }()
	go eng.Run(runCtx)
	go meshSrc.run(runCtx)
	secure.run(runCtx)
	webhook.run(runCtx)
	leader.start(runCtx)
	defer leader.wait() // after the cancel below: the Lease is released
	go func() {
		if err := grpcServer.Serve(lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			log.Error("gRPC server stopped", "err", err)
		}
	}()
	log.Info("pilotfish serving", "version", version, "sources", source.describe(o), "grpc", lis.Addr().String(),
		"grpc-tls", addrOrOff(secure.tlsAddr()), "http", httpAddr.String(), "webhook", addrOrOff(webhook.addr()))
	if onStart != nil {
		onStart(started{grpcAddr: lis.Addr(), httpAddr: httpAddr, grpcTLSAddr: secure.tlsAddr(), webhookAddr: webhook.addr()})
	}

	select {
	case <-ctx.Done():
	case err := <-sourceErr:
		if err != nil {
			cancel()
			grpcServer.Stop()
			secure.stop()
			_ = httpServer.Shutdown(context.Background())
			return err
		}
	}
	log.Info("shutting down")
	cancel()
	stopped := make(chan struct{})
	go func() { grpcServer.GracefulStop(); secure.gracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(o.shutdownGrace):
		grpcServer.Stop()
		secure.stop()
	}
	shutdownCtx, done := context.WithTimeout(context.Background(), 5*time.Second)
	defer done()
	return httpServer.Shutdown(shutdownCtx)
}

// addrOrOff names a listening address for the start-up log, "off" for a
// server that is not running.
func addrOrOff(a net.Addr) string {
	if a == nil {
		return "off"
	}
	return a.String()
}

func resyncOption(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

func newLogger(level string, out io.Writer) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	if out == nil {
		out = os.Stderr
	}
	return slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: l})), nil
}

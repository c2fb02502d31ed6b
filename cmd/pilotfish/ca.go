package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pilotfish-mesh/pilotfish/ca"
	"github.com/pilotfish-mesh/pilotfish/serve"
)

// caOptions are the certificate authority's flags of `pilotfish serve`.
// The zero value (as tests build serveOptions) runs the CA on the plaintext
// port with an in-memory self-signed root and no TLS port.
type caOptions struct {
	disabled       bool
	tlsAddr        string
	cacertsDir     string
	stateDir       string
	trustDomain    string
	defaultTTL     time.Duration
	maxTTL         time.Duration
	tlsSANs        []string
	rootCertOut    string
	jwtRule        string
	tokenAudiences []string
	kubeconfig     string
	rootKeyType    string
	// servingTTL is the TLS serving certificate's lifetime (tests shorten
	// it to watch it rotate); zero is DefaultTTL's default, 24h.
	servingTTL time.Duration
	// grpcOptions are added to the TLS server's (runServe sets the limits'
	// keepalive and message size, as on the plaintext server).
	grpcOptions []grpc.ServerOption
	// noXDSAuth serves xDS on the TLS port without authenticating callers
	// (istiod's XDS_AUTH=false); noXDSIdentityCheck authenticates them but
	// does not match their node against their identity
	// (PILOT_ENABLE_XDS_IDENTITY_CHECK=false). Both off by default.
	noXDSAuth          bool
	noXDSIdentityCheck bool
	// authMetrics counts the TLS port's refused handshakes (runServe sets
	// the xDS metrics).
	authMetrics serve.XDSMetrics
}

func addCAFlags(f *pflag.FlagSet, o *caOptions) {
	f.BoolVar(&o.disabled, "disable-ca", !envBool("ENABLE_CA_SERVER", true), "do not serve the certificate authority (istiod's ENABLE_CA_SERVER=false)")
	f.StringVar(&o.tlsAddr, "grpc-tls-addr", "127.0.0.1:15012", "listen address of the TLS gRPC server (xDS and CA), with a certificate from pilotfish's CA; istiod's port is 15012; empty disables")
	f.StringVar(&o.cacertsDir, "cacerts-dir", "", "plug-in CA directory (ca-cert.pem, ca-key.pem, cert-chain.pem, root-cert.pem, or tls.crt, tls.key, ca.crt), watched and hot-reloaded; istiod mounts it at ./etc/cacerts")
	f.StringVar(&o.stateDir, "ca-state-dir", "", "without --cacerts-dir: directory where the self-signed root is kept ("+ca.StateFileName+") and reused on restart; empty keeps it in Secret "+ca.SecretName+" of $POD_NAMESPACE when an API server is configured (--token-review-kubeconfig or in a pod), else in memory only (workloads then distrust a restarted pilotfish)")
	f.StringVar(&o.trustDomain, "trust-domain", envString("TRUST_DOMAIN", ca.DefaultTrustDomain), "trust domain of workload SPIFFE IDs: what the CA signs and what xDS SAN checks expect (TRUST_DOMAIN)")
	f.DurationVar(&o.defaultTTL, "workload-cert-ttl", envDuration("DEFAULT_WORKLOAD_CERT_TTL", ca.DefaultWorkloadTTL), "lifetime of a workload certificate whose request names none (DEFAULT_WORKLOAD_CERT_TTL)")
	f.DurationVar(&o.maxTTL, "max-workload-cert-ttl", envDuration("MAX_WORKLOAD_CERT_TTL", ca.DefaultMaxTTL), "requests for longer certificates are refused (MAX_WORKLOAD_CERT_TTL)")
	f.StringSliceVar(&o.tlsSANs, "tls-san", nil, "extra DNS names or IPs of the TLS serving certificate, besides "+ca.DefaultServingDNSName+" (repeatable)")
	f.StringVar(&o.rootCertOut, "root-cert-out", "", "write the trusted root certificates (root-cert.pem) to this file, and again whenever they change")
	f.StringVar(&o.jwtRule, "jwt-rule", os.Getenv("JWT_RULE"), `trusted JWT issuers for meshes without Kubernetes (JWT_RULE): {"issuer","audiences","jwks" or "jwks_uri": "file://..."}, or a JSON list of them`)
	f.StringSliceVar(&o.tokenAudiences, "token-audiences", envList("TOKEN_AUDIENCES", []string{ca.DefaultTokenAudience}), "audiences a Kubernetes service account token must be valid for (TOKEN_AUDIENCES)")
	f.StringVar(&o.kubeconfig, "token-review-kubeconfig", "", "kubeconfig of the API server that reviews service account tokens (and, without --cacerts-dir and --ca-state-dir, keeps the self-signed root in Secret "+ca.SecretName+"); in a pod, the in-cluster config is used without it")
	f.StringVar(&o.rootKeyType, "ca-key-type", ca.KeyECDSAP256, "key of a new self-signed root: ecdsa-p256 or rsa-2048")
	f.BoolVar(&o.noXDSAuth, "disable-xds-auth", !envBool("XDS_AUTH", true), "serve xDS on the TLS port to any client that completes the TLS handshake, without a client certificate or token (istiod's XDS_AUTH=false); insecure")
	f.BoolVar(&o.noXDSIdentityCheck, "disable-xds-identity-check", !envBool("PILOT_ENABLE_XDS_IDENTITY_CHECK", true), "on the TLS port, serve an authenticated client whatever namespace and service account its node claims (istiod's PILOT_ENABLE_XDS_IDENTITY_CHECK=false); insecure")
}

// secureServing is the CA and the TLS gRPC port, wired. Every method is
// safe on a nil receiver (CA disabled).
type secureServing struct {
	log       *slog.Logger
	opts      caOptions
	authority *ca.Authority
	store     ca.Store // nil unless a persisted self-signed root
	rootOpts  ca.SelfSignedOptions
	serving   *ca.Serving
	tlsServer *grpc.Server
	tlsLis    net.Listener
}

// newSecureServing builds the CA, registers its service on plain (the
// plaintext gRPC server), and opens the TLS gRPC listener with a server on
// which register (the xDS service, with the CA's authenticators: clients
// present a certificate from the mesh CA or a token, and their node must be
// theirs) and the CA are registered. Nothing runs until run.
func newSecureServing(ctx context.Context, o caOptions, log *slog.Logger, reg prometheus.Registerer,
	plain *grpc.Server, register func(grpc.ServiceRegistrar, serve.AuthOptions),
) (*secureServing, error) {
	if o.disabled {
		if o.tlsAddr != "" {
			log.Warn("the CA is disabled: no TLS gRPC port (it serves a certificate from the CA)")
		}
		return nil, nil
	}
	s := &secureServing{log: log, opts: o}
	bundle, err := s.loadBundle(ctx)
	if err != nil {
		return nil, err
	}
	authn, err := authenticators(o, log)
	if err != nil {
		return nil, err
	}
	s.authority, err = ca.New(bundle, ca.Options{
		TrustDomain: o.trustDomain, DefaultTTL: o.defaultTTL, MaxTTL: o.maxTTL,
		Authenticators: authn, Logger: log.With("component", "ca"), Metrics: newCAMetrics(reg),
	})
	if err != nil {
		return nil, err
	}
	if err := s.writeRoots(); err != nil {
		return nil, err
	}
	caServer := serve.NewCAServer(s.authority)
	caServer.Register(plain)
	if o.tlsAddr == "" {
		return s, nil
	}
	s.serving, err = ca.NewServing(s.authority, ca.ServingOptions{Names: o.tlsSANs, TTL: o.servingTTL, Logger: log.With("component", "ca")})
	if err != nil {
		return nil, err
	}
	opts := append(serve.ServerOptions(), o.grpcOptions...) // keepalive and message size (serve_limits.go)
	creds := serve.CountHandshakeFailures(credentials.NewTLS(s.serving.ServerTLSConfig()), o.authMetrics, log)
	s.tlsServer = grpc.NewServer(append(opts, grpc.Creds(creds))...)
	auth := serve.AuthOptions{Authenticator: s.authority, SkipIdentityCheck: o.noXDSIdentityCheck}
	if o.noXDSAuth {
		auth.Authenticator = nil
		log.Warn("xDS on the TLS port is not authenticated (--disable-xds-auth, XDS_AUTH=false): any client that completes the TLS handshake is served any node's config")
	} else if o.noXDSIdentityCheck {
		log.Warn("xDS on the TLS port does not check that a node is the caller's (--disable-xds-identity-check, PILOT_ENABLE_XDS_IDENTITY_CHECK=false)")
	}
	register(s.tlsServer, auth)
	caServer.Register(s.tlsServer)
	if s.tlsLis, err = net.Listen("tcp", o.tlsAddr); err != nil {
		return nil, fmt.Errorf("gRPC TLS listen on %s: %w", o.tlsAddr, err)
	}
	return s, nil
}

// loadBundle reads --cacerts-dir, or loads (creating on first start) the
// self-signed root of --ca-state-dir, or makes an in-memory one.
func (s *secureServing) loadBundle(ctx context.Context) (*ca.Bundle, error) {
	o := s.opts
	if o.cacertsDir != "" {
		b, err := ca.LoadDir(o.cacertsDir)
		if err != nil {
			return nil, fmt.Errorf("--cacerts-dir: %w", err)
		}
		s.log.Info("CA: signing with plug-in certificates", "dir", o.cacertsDir, "signing", b.Certificate().Subject.String(),
			"not_after", b.NotAfter(), "trusted_roots", len(b.Roots()))
		return b, nil
	}
	s.rootOpts = ca.SelfSignedOptions{Org: o.trustDomain, KeyType: o.rootKeyType, Logger: s.log.With("component", "ca")}
	if o.stateDir == "" {
		if b, err := s.loadKubeRoot(ctx); b != nil || err != nil {
			return b, err
		}
		s.log.Warn("CA: self-signed root kept in memory only; set --ca-state-dir or --cacerts-dir so that workloads trust pilotfish after a restart")
		m, err := ca.NewRoot(s.rootOpts)
		if err != nil {
			return nil, err
		}
		return ca.NewBundle(m)
	}
	s.store = ca.FileStore{Path: filepath.Join(o.stateDir, ca.StateFileName)}
	b, err := ca.LoadOrCreateRoot(ctx, s.store, s.rootOpts)
	if err != nil {
		return nil, fmt.Errorf("--ca-state-dir: %w", err)
	}
	return b, nil
}

// loadKubeRoot keeps the self-signed root in Secret istio-ca-secret of the
// pod's namespace (POD_NAMESPACE), as istiod does, when an API server is
// configured (--token-review-kubeconfig or in-cluster): replicas share one
// root and a restart reuses it. It returns nil, nil without an API server.
func (s *secureServing) loadKubeRoot(ctx context.Context) (*ca.Bundle, error) {
	cfg, err := tokenReviewConfig(s.opts.kubeconfig)
	if err != nil || cfg == nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("CA Secret client: %w", err)
	}
	ns := envString("POD_NAMESPACE", "istio-system")
	s.store = &ca.KubeStore{Secrets: cs.CoreV1(), Namespace: ns}
	b, err := ca.LoadOrCreateRoot(ctx, s.store, s.rootOpts)
	if err != nil {
		return nil, fmt.Errorf("CA root in Secret %s/%s: %w", ns, ca.SecretName, err)
	}
	s.log.Info("CA: self-signed root kept in a Secret", "namespace", ns, "name", ca.SecretName)
	return b, nil
}

// authenticators builds the token authenticators, after the built-in
// client certificate check: Kubernetes TokenReview when an API server is
// configured or pilotfish runs in a pod, then JWT_RULE issuers.
func authenticators(o caOptions, log *slog.Logger) ([]ca.Authenticator, error) {
	var out []ca.Authenticator
	cfg, err := tokenReviewConfig(o.kubeconfig)
	if err != nil {
		return nil, err
	}
	if cfg != nil {
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return nil, fmt.Errorf("token review client: %w", err)
		}
		out = append(out, ca.NewKubeAuthenticator(cs.AuthenticationV1().TokenReviews(), o.tokenAudiences))
		log.Info("CA: Kubernetes service account tokens accepted", "api_server", cfg.Host, "audiences", o.tokenAudiences)
	}
	rules, err := ca.ParseJWTRules(o.jwtRule)
	if err != nil {
		return nil, fmt.Errorf("--jwt-rule: %w", err)
	}
	if len(rules) > 0 {
		j, err := ca.NewJWTAuthenticator(rules)
		if err != nil {
			return nil, fmt.Errorf("--jwt-rule: %w", err)
		}
		out = append(out, j)
		for _, r := range rules {
			log.Info("CA: JWT issuer accepted", "issuer", r.Issuer, "audiences", r.Audiences)
		}
	}
	if len(out) == 0 {
		log.Warn("CA: no token authenticator configured (no Kubernetes API server, no JWT rule): only renewals with a certificate from this CA are signed")
	}
	return out, nil
}

// tokenReviewConfig returns the API server config for TokenReview: from
// kubeconfig, in-cluster when running in a pod, else nil (none). The
// Kubernetes issue replaces this with the shared client of the Kubernetes
// source.
func tokenReviewConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("--token-review-kubeconfig: %w", err)
		}
		return cfg, nil
	}
	if os.Getenv("KUBERNETES_SERVICE_HOST") == "" {
		return nil, nil
	}
	cfg, err := rest.InClusterConfig()
	if errors.Is(err, rest.ErrNotInCluster) {
		return nil, nil
	}
	return cfg, err
}

func (s *secureServing) writeRoots() error {
	if s.opts.rootCertOut == "" {
		return nil
	}
	if err := ca.WriteRootsFile(s.opts.rootCertOut, s.authority.Bundle()); err != nil {
		return fmt.Errorf("--root-cert-out: %w", err)
	}
	return nil
}

// run starts the CA's background work and the TLS server; it returns at
// once.
func (s *secureServing) run(ctx context.Context) {
	if s == nil {
		return
	}
	if s.opts.cacertsDir != "" {
		go ca.WatchDir(ctx, s.opts.cacertsDir, s.authority, ca.DirWatchOptions{Logger: s.log.With("component", "ca")})
	} else if s.store != nil {
		go ca.RunRootRotation(ctx, s.authority, s.store, s.rootOpts)
	}
	if s.opts.rootCertOut != "" {
		go pprof.Do(ctx, pprof.Labels("pilotfish", "ca-root-cert-out"), func(ctx context.Context) {
			for {
				select {
				case <-ctx.Done():
					return
				case <-s.authority.Changed():
				}
				if err := s.writeRoots(); err != nil {
					s.log.Error("CA: writing the root certificates failed", "err", err)
				}
			}
		})
	}
	if s.tlsServer != nil {
		go s.serving.Run(ctx)
		go func() {
			if err := s.tlsServer.Serve(s.tlsLis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
				s.log.Error("gRPC TLS server stopped", "err", err)
			}
		}()
	}
}

// tlsAddr is the bound TLS address, or nil.
func (s *secureServing) tlsAddr() net.Addr {
	if s == nil || s.tlsLis == nil {
		return nil
	}
	return s.tlsLis.Addr()
}

func (s *secureServing) gracefulStop() {
	if s != nil && s.tlsServer != nil {
		s.tlsServer.GracefulStop()
	}
}

func (s *secureServing) stop() {
	if s != nil && s.tlsServer != nil {
		s.tlsServer.Stop()
		s.tlsLis.Close() // Stop closes it only once Serve ran
	}
}

func envString(name, def string) string {
	if v, ok := os.LookupEnv(name); ok && v != "" {
		return v
	}
	return def
}

// envList reads a comma-separated list.
func envList(name string, def []string) []string {
	v, ok := os.LookupEnv(name)
	if !ok || strings.TrimSpace(v) == "" {
		return def
	}
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

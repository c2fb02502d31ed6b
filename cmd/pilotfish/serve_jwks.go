package main

import (
	"context"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"

	"github.com/pilotfish-mesh/pilotfish/engine"
	"github.com/pilotfish-mesh/pilotfish/ingest"
	"github.com/pilotfish-mesh/pilotfish/jwks"
)

// jwksOptions are serve's flags of the JWKS fetcher (RequestAuthentication
// key sets fetched by the control plane, as istiod does).
type jwksOptions struct {
	mode          string
	refresh       time.Duration
	maxBytes      int64
	maxConcurrent int
	maxSources    int
	caFile        string
	insecure      bool
	blocked       []string
	// roots, when set (tests), replaces the system pool and caFile.
	roots []byte
}

// istiodExtraRoots is where istiod reads extra roots for JWKS servers.
const istiodExtraRoots = "/cacerts/extra.pem"

func addJWKSFlags(f *pflag.FlagSet, o *jwksOptions) {
	f.StringVar(&o.mode, "jwks-fetch-mode", envString("PILOT_JWT_ENABLE_REMOTE_JWKS", "istiod"),
		"who fetches a RequestAuthentication jwksUri (PILOT_JWT_ENABLE_REMOTE_JWKS): istiod/false, the control plane, inlining the keys; "+
			"hybrid/true, Envoy when the URI's host is a mesh service, else the control plane; envoy, Envoy through the host's cluster. "+
			"Issuer-only rules (OpenID discovery) are always fetched by the control plane")
	f.DurationVar(&o.refresh, "jwks-refresh-interval", envDuration("PILOT_JWT_PUB_KEY_REFRESH_INTERVAL", jwks.DefaultRefreshInterval),
		"how often each key set is fetched again (PILOT_JWT_PUB_KEY_REFRESH_INTERVAL)")
	f.Int64Var(&o.maxBytes, "jwks-max-bytes", jwks.DefaultMaxBytes, "largest JWKS or OpenID discovery response accepted")
	f.IntVar(&o.maxConcurrent, "jwks-max-concurrent", jwks.DefaultMaxConcurrent, "JWKS requests in flight at once")
	f.IntVar(&o.maxSources, "jwks-max-sources", jwks.DefaultMaxSources,
		"distinct key sets (issuer and jwksUri) fetched; rules naming more get a key set that accepts no token")
	f.StringVar(&o.caFile, "jwks-ca-file", istiodExtraRoots, "PEM roots trusted for https key servers besides the system's (istiod's path; a missing file adds none)")
	f.BoolVar(&o.insecure, "jwks-insecure-skip-verify", envBool("JWKS_RESOLVER_INSECURE_SKIP_VERIFY", false),
		"do not verify key servers' certificates (JWKS_RESOLVER_INSECURE_SKIP_VERIFY)")
	f.StringSliceVar(&o.blocked, "jwks-blocked-cidrs", envList("BLOCKED_CIDRS_IN_JWKS_URIS", nil),
		"comma-separated CIDRs no JWKS request may connect to, checked after DNS (BLOCKED_CIDRS_IN_JWKS_URIS)")
}

// jwksWiring connects the fetcher to the index: the index's
// RequestAuthentications tell it what to fetch (ingest.JWKSInput), and
// what it fetches is written back as index rows.
type jwksWiring struct {
	resolver *jwks.Resolver
	input    *ingest.JWKSInput
	fetches  *prometheus.CounterVec
	// waitFrom is when readiness started waiting for the first fetches
	// (unix nanoseconds, 0 before).
	waitFrom atomic.Int64
}

// jwksReadyWait bounds how long readiness waits for the first fetches
// once the sources are synced: with many slow key servers, serving with
// the reject-all set for their rules beats not serving at all.
const jwksReadyWait = 30 * time.Second

// settled reports whether readiness may stop waiting for key sets: each
// source named at start was fetched once (or failed), or jwksReadyWait
// passed since the first call.
func (jw *jwksWiring) settled() bool {
	if jw.resolver.Settled() {
		return true
	}
	now := time.Now().UnixNano()
	jw.waitFrom.CompareAndSwap(0, now)
	return time.Duration(now-jw.waitFrom.Load()) > jwksReadyWait
}

// newJWKS builds the fetcher; newInput binds an ingest.JWKSInput to the
// sources' index writer (whose type cmd does not name).
func newJWKS(o jwksOptions, newInput func(ingest.JWKSInputOptions) *ingest.JWKSInput, log *slog.Logger) (*jwksWiring, error) {
	if !engine.CheckJWKSFetchMode(o.mode) {
		return nil, fmt.Errorf("--jwks-fetch-mode %q: want istiod, false, hybrid, true or envoy", o.mode)
	}
	var blocked []netip.Prefix
	for _, s := range o.blocked {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("--jwks-blocked-cidrs %q: %w", s, err)
		}
		blocked = append(blocked, p.Masked())
	}
	var roots *x509.CertPool
	if o.roots != nil {
		roots = x509.NewCertPool()
		roots.AppendCertsFromPEM(o.roots)
	}
	var extra []byte
	if roots == nil && o.caFile != "" {
		b, err := os.ReadFile(o.caFile)
		switch {
		case err == nil:
			extra = b
		case !os.IsNotExist(err) || o.caFile != istiodExtraRoots:
			return nil, fmt.Errorf("--jwks-ca-file: %w", err)
		}
	}
	jw := &jwksWiring{fetches: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pilotfish_jwks_fetches_total", Help: "HTTP requests of the JWKS fetcher (key sets and OpenID discovery), by result (success, fail).",
	}, []string{"result"})}
	jw.resolver = jwks.New(jwks.Options{
		RefreshInterval: o.refresh, MaxBytes: o.maxBytes, MaxConcurrent: o.maxConcurrent, MaxSources: o.maxSources,
		RootCAs: roots, ExtraRootsPEM: extra, InsecureSkipVerify: o.insecure, BlockedCIDRs: blocked,
		Logger: log.With("component", "jwks"), Metrics: jwksMetrics{jw.fetches},
	})
	jw.input = newInput(ingest.JWKSInputOptions{
		FetchURIs: o.mode != "envoy",
		Want: func(srcs []ingest.JWKSSource) {
			out := make([]jwks.Source, len(srcs))
			for i, s := range srcs {
				out[i] = jwks.Source{Issuer: s.Issuer, URI: s.URI, Timeout: s.Timeout}
			}
			jw.resolver.Want(out)
		},
	})
	return jw, nil
}

// run fetches until ctx ends, writing each new list of key sets to the
// index.
func (jw *jwksWiring) run(ctx context.Context) error {
	jw.resolver.Run(ctx, func(sets []jwks.KeySet) {
		out := make([]ingest.JWKSKeySet, len(sets))
		for i, s := range sets {
			out[i] = ingest.JWKSKeySet{Issuer: s.Issuer, URI: s.URI, JWKS: s.JWKS}
		}
		jw.input.Apply(out)
	})
	return nil
}

type jwksMetrics struct{ c *prometheus.CounterVec }

func (m jwksMetrics) Fetched(ok bool) {
	if ok {
		m.c.WithLabelValues("success").Inc()
	} else {
		m.c.WithLabelValues("fail").Inc()
	}
}

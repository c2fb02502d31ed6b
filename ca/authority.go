package ca

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults, as istiod's.
const (
	DefaultWorkloadTTL = 24 * time.Hour      // DEFAULT_WORKLOAD_CERT_TTL
	DefaultMaxTTL      = 90 * 24 * time.Hour // MAX_WORKLOAD_CERT_TTL
	DefaultMaxCSRBytes = 32 << 10            // a PEM CSR with an RSA 8192 key is ~2.5 KiB
	DefaultTrustDomain = "cluster.local"
)

// Options configure an Authority.
type Options struct {
	// TrustDomain of every SPIFFE ID signed (TRUST_DOMAIN). Default
	// cluster.local.
	TrustDomain string
	// DefaultTTL is used when a request asks for none. Default 24h.
	DefaultTTL time.Duration
	// MaxTTL: a request asking for more is refused. Default 90 days.
	MaxTTL time.Duration
	// MaxCSRBytes: a larger CSR is refused before it is parsed. Default
	// 32 KiB.
	MaxCSRBytes int
	// Authenticators are tried in order after the built-in client
	// certificate check; the first success wins.
	Authenticators []Authenticator
	// Logger receives per-request events at Debug and authentication
	// failures at Warn. Default: discard.
	Logger *slog.Logger
	// Metrics, if set, counts requests and outcomes.
	Metrics Metrics
	// Now is the clock (tests). Default time.Now.
	Now func() time.Time
}

// Metrics counts the CA's outcomes; cmd wires it to Prometheus with
// istiod's citadel_server_* names.
type Metrics interface {
	CSR()                    // every request
	AuthnError()             // no authenticator accepted the caller
	SignError(reason string) // a refused or failed signature: "csr", "identity", "ttl", "not_ready", "internal"
	Signed()                 // a certificate was issued
	BundleChanged(b *Bundle) // new signing material (root and chain expiry)
}

// Authority signs workload certificates. Its signing material is one
// *Bundle behind an atomic pointer: SetBundle swaps it (reload, rotation)
// while signatures run, and every signature uses one bundle throughout.
type Authority struct {
	opts   Options
	log    *slog.Logger
	bundle atomic.Pointer[Bundle]

	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every SetBundle; guarded by mu
}

// New returns an Authority signing with b.
func New(b *Bundle, opts Options) (*Authority, error) {
	if b == nil {
		return nil, fmt.Errorf("%w: no bundle", ErrInvalidBundle)
	}
	if opts.TrustDomain == "" {
		opts.TrustDomain = DefaultTrustDomain
	}
	if strings.ContainsAny(opts.TrustDomain, "/:@?#") {
		return nil, fmt.Errorf("ca: trust domain %q is not a host name", opts.TrustDomain)
	}
	if opts.DefaultTTL <= 0 {
		opts.DefaultTTL = DefaultWorkloadTTL
	}
	if opts.MaxTTL <= 0 {
		opts.MaxTTL = DefaultMaxTTL
	}
	if opts.DefaultTTL > opts.MaxTTL {
		return nil, fmt.Errorf("ca: default TTL %s above the maximum %s", opts.DefaultTTL, opts.MaxTTL)
	}
	if opts.MaxCSRBytes <= 0 {
		opts.MaxCSRBytes = DefaultMaxCSRBytes
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	a := &Authority{opts: opts, log: log, changed: make(chan struct{})}
	a.bundle.Store(b)
	if opts.Metrics != nil {
		opts.Metrics.BundleChanged(b)
	}
	return a, nil
}

// TrustDomain returns the trust domain of the identities signed.
func (a *Authority) TrustDomain() string { return a.opts.TrustDomain }

// Bundle returns the current signing material.
func (a *Authority) Bundle() *Bundle { return a.bundle.Load() }

// SetBundle replaces the signing material and wakes every Changed waiter.
func (a *Authority) SetBundle(b *Bundle) {
	a.bundle.Store(b)
	if a.opts.Metrics != nil {
		a.opts.Metrics.BundleChanged(b)
	}
	a.mu.Lock()
	close(a.changed)
	a.changed = make(chan struct{})
	a.mu.Unlock()
}

// Changed returns a channel closed at the next SetBundle.
func (a *Authority) Changed() <-chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.changed
}

// Request is one certificate request.
type Request struct {
	Credentials Credentials
	CSRPEM      []byte
	// TTL asked for (IstioCertificateRequest.validity_duration); zero or
	// negative means the default.
	TTL time.Duration
}

// CreateCertificate authenticates the caller and signs its CSR for the
// caller's own identity. It returns the PEM chain as istiod does: the leaf
// first, then the signing certificate and intermediates, and last all
// trusted roots as one string. Every error wraps one of the sentinels of
// errors.go; nothing is signed when it returns one.
func (a *Authority) CreateCertificate(ctx context.Context, r Request) ([]string, Identity, error) {
	if m := a.opts.Metrics; m != nil {
		m.CSR()
	}
	caller, err := a.Authenticate(ctx, r.Credentials)
	if err != nil {
		if m := a.opts.Metrics; m != nil {
			m.AuthnError()
		}
		a.log.Warn("CSR refused: caller not authenticated", "err", err)
		return nil, Identity{}, err
	}
	id := Identity{TrustDomain: a.opts.TrustDomain, Namespace: caller.Namespace, ServiceAccount: caller.ServiceAccount}
	chain, err := a.Sign(id, r.CSRPEM, r.TTL)
	if err != nil {
		if m := a.opts.Metrics; m != nil {
			m.SignError(errorReason(err))
		}
		a.log.Debug("CSR refused", "identity", id.String(), "source", caller.Source, "err", err)
		return nil, id, err
	}
	if m := a.opts.Metrics; m != nil {
		m.Signed()
	}
	a.log.Debug("certificate issued", "identity", id.String(), "source", caller.Source, "ttl", r.TTL)
	return chain, id, nil
}

// Authenticate runs the client certificate check, then each configured
// authenticator, and returns the first caller accepted. The error of a
// total failure wraps ErrUnauthenticated and names each authenticator's
// reason.
func (a *Authority) Authenticate(ctx context.Context, c Credentials) (Caller, error) {
	var reasons []string
	caller, err := a.authenticateCert(c)
	if err == nil {
		return caller, nil
	}
	reasons = append(reasons, "client certificate: "+reason(err))
	for _, au := range a.opts.Authenticators {
		caller, err := au.Authenticate(ctx, c)
		if err == nil {
			caller.Source = au.Name()
			return caller, nil
		}
		reasons = append(reasons, au.Name()+": "+reason(err))
	}
	return Caller{}, fmt.Errorf("%w (%s)", ErrUnauthenticated, strings.Join(reasons, "; "))
}

func reason(err error) string {
	if errors.Is(err, ErrNoCredential) {
		return "none presented"
	}
	return err.Error()
}

// authenticateCert accepts a client certificate that this CA issued (it
// chains to a currently trusted root) carrying one SPIFFE ID of our trust
// domain: a workload renewing its certificate over mTLS. Verification is
// done here against the current roots, not only by the TLS handshake, so a
// root removed from the bundle stops authenticating at once.
func (a *Authority) authenticateCert(c Credentials) (Caller, error) {
	if len(c.PeerCertificates) == 0 {
		return Caller{}, ErrNoCredential
	}
	b := a.bundle.Load()
	inter := x509.NewCertPool()
	for _, ic := range c.PeerCertificates[1:] {
		inter.AddCert(ic)
	}
	leaf := c.PeerCertificates[0]
	if _, err := leaf.Verify(x509.VerifyOptions{
		Roots: b.rootPool, Intermediates: inter, CurrentTime: a.opts.Now(),
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}); err != nil {
		return Caller{}, fmt.Errorf("not issued by this CA: %v", err)
	}
	if len(leaf.URIs) != 1 {
		return Caller{}, fmt.Errorf("want exactly one URI SAN, have %d", len(leaf.URIs))
	}
	id, err := ParseIdentity(leaf.URIs[0])
	if err != nil {
		return Caller{}, err
	}
	if id.TrustDomain != a.opts.TrustDomain {
		return Caller{}, fmt.Errorf("trust domain %q, want %q", id.TrustDomain, a.opts.TrustDomain)
	}
	return Caller{Namespace: id.Namespace, ServiceAccount: id.ServiceAccount, Source: "client certificate"}, nil
}

// Sign signs csrPEM for id, for ttl (the default if zero or negative),
// without authenticating anyone: the caller has done that. The CSR must
// not ask for another identity. It returns the chain as CreateCertificate
// does.
func (a *Authority) Sign(id Identity, csrPEM []byte, ttl time.Duration) ([]string, error) {
	if len(csrPEM) > a.opts.MaxCSRBytes {
		return nil, fmt.Errorf("%w: %d bytes, the limit is %d", ErrCSRTooLarge, len(csrPEM), a.opts.MaxCSRBytes)
	}
	if ttl > a.opts.MaxTTL {
		return nil, fmt.Errorf("%w: asked for %s, the maximum is %s", ErrTTL, ttl, a.opts.MaxTTL)
	}
	if ttl <= 0 {
		ttl = a.opts.DefaultTTL
	}
	csr, err := parseCSR(csrPEM)
	if err != nil {
		return nil, err
	}
	if err := checkCSRIdentity(csr, id); err != nil {
		return nil, err
	}
	b := a.bundle.Load()
	tmpl, err := leafTemplate(b, a.opts.Now(), ttl)
	if err != nil {
		return nil, err
	}
	tmpl.URIs = append(tmpl.URIs, id.URL())
	der, err := x509.CreateCertificate(rand.Reader, tmpl, b.cert, csr.PublicKey, b.signer)
	if err != nil {
		return nil, fmt.Errorf("ca: signing for %s: %w", id, err)
	}
	out := make([]string, 0, len(b.interPEM)+2)
	out = append(out, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})))
	out = append(out, b.interPEM...)
	out = append(out, b.rootsPEM)
	return out, nil
}

// errorReason names a Sign error for metrics.
func errorReason(err error) string {
	switch {
	case errors.Is(err, ErrInvalidCSR), errors.Is(err, ErrCSRTooLarge):
		return "csr"
	case errors.Is(err, ErrIdentityMismatch):
		return "identity"
	case errors.Is(err, ErrTTL):
		return "ttl"
	case errors.Is(err, ErrNotReady):
		return "not_ready"
	}
	return "internal"
}

package ca

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"runtime/pprof"
	"time"
)

// Store persists a self-signed CA's material so that the root survives a
// restart. FileStore keeps it in one file; KubeStore in Secret
// istio-ca-secret (keys ca-cert.pem, ca-key.pem, cert-chain.pem,
// root-cert.pem, as Material has them), with its create-if-absent race
// resolved by the API server: Save returns ErrStoreConflict to the loser.
type Store interface {
	// Load returns the stored material, or an error wrapping ErrNotFound
	// when there is none yet.
	Load(ctx context.Context) (Material, error)
	// Save replaces the stored material.
	Save(ctx context.Context, m Material) error
}

// Key types of a self-signed root.
const (
	KeyECDSAP256 = "ecdsa-p256"
	KeyRSA2048   = "rsa-2048"
)

// SelfSignedOptions configure a self-signed root, as istiod's
// CITADEL_SELF_SIGNED_* settings do.
type SelfSignedOptions struct {
	// Org is the root's subject organization; istiod uses the trust
	// domain.
	Org string
	// TTL of a new root. Default 10 years (CITADEL_SELF_SIGNED_CA_CERT_TTL).
	TTL time.Duration
	// GraceRatio: the root is renewed once less than this fraction of its
	// lifetime remains. Default 0.2
	// (CITADEL_SELF_SIGNED_ROOT_CERT_GRACE_PERIOD_PERCENTILE 20).
	GraceRatio float64
	// KeyType is KeyECDSAP256 (default: signs ~10x faster, see
	// BenchmarkSign) or KeyRSA2048 (istiod's default).
	KeyType string
	// CheckInterval between rotation checks. Default 1h
	// (CITADEL_SELF_SIGNED_ROOT_CERT_CHECK_INTERVAL).
	CheckInterval time.Duration
	Logger        *slog.Logger
	Now           func() time.Time
}

func (o *SelfSignedOptions) defaults() {
	if o.TTL <= 0 {
		o.TTL = 10 * 365 * 24 * time.Hour
	}
	if o.GraceRatio <= 0 || o.GraceRatio >= 1 {
		o.GraceRatio = 0.2
	}
	if o.KeyType == "" {
		o.KeyType = KeyECDSAP256
	}
	if o.CheckInterval <= 0 {
		o.CheckInterval = time.Hour
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Org == "" {
		o.Org = DefaultTrustDomain
	}
}

// NewRoot generates a self-signed root: a CA certificate whose key signs
// workload certificates directly, as istiod's self-signed CA does.
func NewRoot(o SelfSignedOptions) (Material, error) {
	o.defaults()
	var key crypto.Signer
	var err error
	switch o.KeyType {
	case KeyECDSAP256:
		key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case KeyRSA2048:
		key, err = rsa.GenerateKey(rand.Reader, 2048)
	default:
		return Material{}, fmt.Errorf("ca: root key type %q, want %s or %s", o.KeyType, KeyECDSAP256, KeyRSA2048)
	}
	if err != nil {
		return Material{}, fmt.Errorf("ca: root key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return Material{}, err
	}
	now := o.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{Organization: []string{o.Org}},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.Add(o.TTL),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return Material{}, fmt.Errorf("ca: root certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return Material{}, fmt.Errorf("ca: root key: %w", err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	return Material{
		CertPEM:  certPEM,
		KeyPEM:   pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
		RootsPEM: certPEM,
	}, nil
}

// LoadOrCreateRoot returns the self-signed bundle kept in store, creating
// and saving a new root when the store has none, and renewing it first when
// it is within its grace period (see RotateRoot).
func LoadOrCreateRoot(ctx context.Context, store Store, o SelfSignedOptions) (*Bundle, error) {
	o.defaults()
	m, err := store.Load(ctx)
	if errors.Is(err, ErrNotFound) {
		if m, err = NewRoot(o); err != nil {
			return nil, err
		}
		if err := store.Save(ctx, m); errors.Is(err, ErrStoreConflict) {
			// Another replica created the root first: use it, so every
			// replica signs under one root.
			o.Logger.Info("another replica stored a self-signed root first; loading it")
			if m, err = store.Load(ctx); err != nil {
				return nil, err
			}
			return NewBundle(m)
		} else if err != nil {
			return nil, fmt.Errorf("ca: saving the new root: %w", err)
		}
		o.Logger.Info("generated a self-signed root", "org", o.Org, "key", o.KeyType, "ttl", o.TTL)
		return NewBundle(m)
	}
	if err != nil {
		return nil, err
	}
	b, err := NewBundle(m)
	if err != nil {
		if errors.Is(err, ErrInvalidBundle) && o.Now().After(certNotAfter(m.CertPEM)) {
			// The stored root expired: nothing it signed verifies any
			// more, so start over rather than refuse to run.
			o.Logger.Warn("the stored self-signed root has expired; generating a new one")
			if m, err = NewRoot(o); err != nil {
				return nil, err
			}
			if err := store.Save(ctx, m); err != nil {
				return nil, err
			}
			return NewBundle(m)
		}
		return nil, fmt.Errorf("ca: stored root: %w", err)
	}
	o.Logger.Info("loaded the self-signed root", "not_after", b.cert.NotAfter, "roots", len(b.roots))
	if needsRotation(b, o) {
		return RotateRoot(ctx, store, b, o)
	}
	return b, nil
}

// needsRotation reports whether b's signing root is within its grace
// period.
func needsRotation(b *Bundle, o SelfSignedOptions) bool {
	life := b.cert.NotAfter.Sub(b.cert.NotBefore)
	return b.cert.NotAfter.Sub(o.Now()) < time.Duration(float64(life)*o.GraceRatio)
}

// RotateRoot renews a self-signed root: a new key and root sign from now
// on, and the old roots stay in the bundle (trusted, sent to workloads)
// until they expire, so certificates they signed keep verifying while
// workloads renew. The result is saved before it is returned.
func RotateRoot(ctx context.Context, store Store, old *Bundle, o SelfSignedOptions) (*Bundle, error) {
	o.defaults()
	m, err := NewRoot(o)
	if err != nil {
		return nil, err
	}
	var roots bytes.Buffer
	roots.Write(m.CertPEM)
	for _, r := range old.roots {
		if o.Now().Before(r.NotAfter) {
			roots.Write(encodeCert(r))
		}
	}
	m.RootsPEM = roots.Bytes()
	b, err := NewBundle(m)
	if err != nil {
		return nil, err
	}
	if err := store.Save(ctx, b.Material()); err != nil {
		return nil, fmt.Errorf("ca: saving the renewed root: %w", err)
	}
	o.Logger.Info("renewed the self-signed root", "not_after", b.cert.NotAfter, "trusted_roots", len(b.roots))
	return b, nil
}

// RunRootRotation checks the Authority's self-signed root every
// CheckInterval and renews it within its grace period, until ctx ends. A
// failed renewal is logged and retried at the next check.
func RunRootRotation(ctx context.Context, a *Authority, store Store, o SelfSignedOptions) {
	o.defaults()
	pprof.Do(ctx, pprof.Labels("pilotfish", "ca-root-rotation"), func(ctx context.Context) {
		t := time.NewTicker(o.CheckInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			b := a.Bundle()
			if !needsRotation(b, o) {
				continue
			}
			nb, err := RotateRoot(ctx, store, b, o)
			if err != nil {
				o.Logger.Error("renewing the self-signed root failed; will retry", "err", err)
				continue
			}
			a.SetBundle(nb)
		}
	})
}

// certNotAfter returns the NotAfter of the first certificate in pemData,
// or the zero time.
func certNotAfter(pemData []byte) time.Time {
	certs, err := parseCerts(pemData)
	if err != nil || len(certs) == 0 {
		return time.Time{}
	}
	return certs[0].NotAfter
}

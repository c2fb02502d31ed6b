package ca

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"runtime/pprof"
	"slices"
	"sync/atomic"
	"time"
)

// DefaultServingDNSName is the name istio-agent expects on istiod's TLS
// port (it also maps a "localhost" address to it).
const DefaultServingDNSName = "istiod.istio-system.svc"

// ServingOptions configure the TLS serving certificate of port 15012.
type ServingOptions struct {
	// Names are the certificate's SANs: DNS names, or IP addresses for
	// entries that parse as one. DefaultServingDNSName is always
	// included.
	Names []string
	// TTL of each certificate. Default 24h (clamped to the CA's expiry).
	TTL time.Duration
	// RenewAfter: a certificate is replaced once this fraction of its
	// lifetime has passed. Default 0.5, as istio-agent renews.
	RenewAfter float64
	Logger     *slog.Logger
}

// Serving holds the TLS certificate that pilotfish serves on its TLS gRPC
// port, issued by the Authority itself (so every workload that trusts the
// mesh root trusts the control plane), and renews it before it expires and
// whenever the Authority's bundle changes.
type Serving struct {
	a    *Authority
	o    ServingOptions
	dns  []string
	ips  []net.IP
	cert atomic.Pointer[tls.Certificate]
}

// NewServing issues the first serving certificate.
func NewServing(a *Authority, o ServingOptions) (*Serving, error) {
	if o.TTL <= 0 {
		o.TTL = DefaultWorkloadTTL
	}
	if o.RenewAfter <= 0 || o.RenewAfter >= 1 {
		o.RenewAfter = 0.5
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Serving{a: a, o: o, dns: []string{DefaultServingDNSName}}
	for _, n := range o.Names {
		if ip := net.ParseIP(n); ip != nil {
			s.ips = append(s.ips, ip)
		} else if n != "" && !slices.Contains(s.dns, n) {
			s.dns = append(s.dns, n)
		}
	}
	if err := s.renew(); err != nil {
		return nil, err
	}
	return s, nil
}

// renew issues a new certificate with a new ECDSA P-256 key.
func (s *Serving) renew() error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	b := s.a.Bundle()
	tmpl, err := leafTemplate(b, s.a.opts.Now(), s.o.TTL)
	if err != nil {
		return err
	}
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	tmpl.DNSNames = s.dns
	tmpl.IPAddresses = s.ips
	der, err := x509.CreateCertificate(rand.Reader, tmpl, b.cert, key.Public(), b.signer)
	if err != nil {
		return fmt.Errorf("ca: serving certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return err
	}
	c := &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
	for _, ic := range b.inter {
		c.Certificate = append(c.Certificate, ic.Raw)
	}
	s.cert.Store(c)
	s.o.Logger.Info("issued the TLS serving certificate", "dns", s.dns, "ips", s.ips, "not_after", leaf.NotAfter)
	return nil
}

// Certificate returns the current serving certificate.
func (s *Serving) Certificate() *tls.Certificate { return s.cert.Load() }

// Run renews the certificate once RenewAfter of its lifetime has passed,
// and at once when the Authority's bundle changes (a new root must not
// leave the port serving a certificate clients no longer trust), until
// ctx ends. A failed renewal is retried every 10 seconds.
func (s *Serving) Run(ctx context.Context) {
	pprof.Do(ctx, pprof.Labels("pilotfish", "ca-serving-cert"), func(ctx context.Context) {
		for {
			changed := s.a.Changed()
			leaf := s.cert.Load().Leaf
			life := leaf.NotAfter.Sub(leaf.NotBefore.Add(clockSkew))
			wait := time.Until(leaf.NotBefore.Add(clockSkew).Add(time.Duration(float64(life) * s.o.RenewAfter)))
			t := time.NewTimer(max(wait, 0))
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-changed:
			case <-t.C:
			}
			t.Stop()
			if err := s.renew(); err != nil {
				s.o.Logger.Error("renewing the TLS serving certificate failed; retrying in 10s", "err", err)
				select {
				case <-ctx.Done():
					return
				case <-time.After(10 * time.Second):
				}
			}
		}
	})
}

// ServerTLSConfig returns the TLS configuration of the TLS gRPC port: the
// serving certificate, and client certificates verified if given against
// the Authority's current roots (a workload renewing over mTLS; callers
// without one authenticate with a token). Each handshake reads the
// current certificate and roots, so rotation needs no restart.
func (s *Serving) ServerTLSConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2"},
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return &tls.Config{
				MinVersion:   tls.VersionTLS12,
				NextProtos:   []string{"h2"},
				Certificates: []tls.Certificate{*s.cert.Load()},
				ClientAuth:   tls.VerifyClientCertIfGiven,
				ClientCAs:    s.a.Bundle().RootPool(),
			}, nil
		},
	}
}

package ca

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/pprof"
	"time"

	"github.com/fsnotify/fsnotify"
)

// File names of a cacerts directory, istiod's two layouts: the plug-in CA
// Secret cacerts (ca-cert.pem, ca-key.pem, cert-chain.pem, root-cert.pem)
// and a kubernetes.io/tls Secret (tls.crt, tls.key, ca.crt).
const (
	CACertFile    = "ca-cert.pem"
	CAKeyFile     = "ca-key.pem"
	CertChainFile = "cert-chain.pem"
	RootCertFile  = "root-cert.pem"
	TLSCertFile   = "tls.crt"
	TLSKeyFile    = "tls.key"
	TLSCAFile     = "ca.crt"
)

// ReadDir reads the CA material of a cacerts directory. With tls.crt
// present it reads the kubernetes.io/tls layout (tls.crt signs, ca.crt is
// the root); otherwise istiod's (cert-chain.pem may be absent when
// ca-cert.pem is issued by the root directly). root-cert.pem may hold
// several roots: all are trusted (root rotation).
func ReadDir(dir string) (Material, error) {
	read := func(name string, optional bool) ([]byte, error) {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if optional && errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalidBundle, err)
		}
		return b, nil
	}
	var m Material
	var err error
	if _, statErr := os.Stat(filepath.Join(dir, TLSCertFile)); statErr == nil {
		if m.CertPEM, err = read(TLSCertFile, false); err != nil {
			return Material{}, err
		}
		if m.KeyPEM, err = read(TLSKeyFile, false); err != nil {
			return Material{}, err
		}
		if m.RootsPEM, err = read(TLSCAFile, false); err != nil {
			return Material{}, err
		}
		// tls.crt may carry its intermediates after the signing certificate.
		m.ChainPEM = m.CertPEM
		return m, nil
	}
	if m.CertPEM, err = read(CACertFile, false); err != nil {
		return Material{}, err
	}
	if m.KeyPEM, err = read(CAKeyFile, false); err != nil {
		return Material{}, err
	}
	if m.ChainPEM, err = read(CertChainFile, true); err != nil {
		return Material{}, err
	}
	if m.RootsPEM, err = read(RootCertFile, false); err != nil {
		return Material{}, err
	}
	return m, nil
}

// LoadDir reads and verifies a cacerts directory.
func LoadDir(dir string) (*Bundle, error) {
	m, err := ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("cacerts %s: %w", dir, err)
	}
	b, err := NewBundle(m)
	if err != nil {
		return nil, fmt.Errorf("cacerts %s: %w", dir, err)
	}
	return b, nil
}

// DirWatchOptions tune WatchDir.
type DirWatchOptions struct {
	// Debounce: reload once no change has arrived for this long (a Secret
	// volume update touches several files). Default 200ms.
	Debounce time.Duration
	// Resync: re-read the directory this often in case a watch event was
	// lost. Default 1 minute.
	Resync time.Duration
	Logger *slog.Logger
}

// WatchDir hot-reloads a cacerts directory into a until ctx ends: on a
// change (fsnotify, including Kubernetes' atomic ..data symlink swap) or a
// resync, it re-reads the files and, when they differ from the material in
// use and verify, swaps the bundle. Material that does not verify (a
// half-written update, a wrong key) is logged and the last good bundle
// stays in use.
func WatchDir(ctx context.Context, dir string, a *Authority, o DirWatchOptions) {
	if o.Debounce <= 0 {
		o.Debounce = 200 * time.Millisecond
	}
	if o.Resync <= 0 {
		o.Resync = time.Minute
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	pprof.Do(ctx, pprof.Labels("pilotfish", "ca-cacerts-watch"), func(ctx context.Context) {
		var events <-chan fsnotify.Event
		var errs <-chan error
		if w, err := fsnotify.NewWatcher(); err != nil {
			log.Warn("cacerts: no file watch, relying on resync", "err", err)
		} else {
			defer w.Close()
			if err := w.Add(dir); err != nil {
				log.Warn("cacerts: no file watch, relying on resync", "dir", dir, "err", err)
			} else {
				events, errs = w.Events, w.Errors
			}
		}
		last := a.Bundle().Material()
		debounce := time.NewTimer(time.Hour)
		debounce.Stop()
		resync := time.NewTicker(o.Resync)
		defer resync.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-events:
				debounce.Reset(o.Debounce)
				continue
			case err := <-errs:
				log.Warn("cacerts: watch error", "err", err)
				continue
			case <-debounce.C:
			case <-resync.C:
			}
			m, err := ReadDir(dir)
			if err != nil {
				log.Error("cacerts: reading failed; keeping the CA in use", "dir", dir, "err", err)
				continue
			}
			if sameMaterial(m, last) {
				continue
			}
			b, err := NewBundle(m)
			if err != nil {
				log.Error("cacerts: new files do not verify; keeping the CA in use", "dir", dir, "err", err)
				continue
			}
			last = m
			a.SetBundle(b)
			log.Info("cacerts: reloaded the CA", "dir", dir, "signing", b.cert.Subject.String(),
				"not_after", b.notAfter, "trusted_roots", len(b.roots))
		}
	})
}

// sameMaterial reports whether two reads of the files are identical.
func sameMaterial(a, b Material) bool {
	return bytes.Equal(a.CertPEM, b.CertPEM) && bytes.Equal(a.KeyPEM, b.KeyPEM) &&
		bytes.Equal(a.ChainPEM, b.ChainPEM) && bytes.Equal(a.RootsPEM, b.RootsPEM)
}

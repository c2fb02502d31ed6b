package ca

import (
	"bytes"
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// FileStore keeps a self-signed CA in one file, written atomically
// (temporary file, fsync, rename) with mode 0600: the private key first,
// then the signing root, then older roots still trusted. One file, so a
// crash can never leave a key beside a certificate it does not match. It
// holds self-signed material only (no intermediate chain), and assumes one
// pilotfish process per file.
type FileStore struct {
	Path string
}

// StateFileName is the file FileStore uses inside --ca-state-dir.
const StateFileName = "self-signed-ca.pem"

// Load implements Store.
func (s FileStore) Load(context.Context) (Material, error) {
	data, err := os.ReadFile(s.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return Material{}, fmt.Errorf("%w: %s", ErrNotFound, s.Path)
	}
	if err != nil {
		return Material{}, err
	}
	var m Material
	var certs [][]byte
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		enc := pem.EncodeToMemory(block)
		switch block.Type {
		case "PRIVATE KEY", "EC PRIVATE KEY", "RSA PRIVATE KEY":
			if m.KeyPEM != nil {
				return Material{}, fmt.Errorf("%w: %s: more than one private key", ErrInvalidBundle, s.Path)
			}
			m.KeyPEM = enc
		case "CERTIFICATE":
			certs = append(certs, enc)
		default:
			return Material{}, fmt.Errorf("%w: %s: unexpected PEM block %q", ErrInvalidBundle, s.Path, block.Type)
		}
	}
	if m.KeyPEM == nil || len(certs) == 0 {
		return Material{}, fmt.Errorf("%w: %s: want a private key and at least one certificate", ErrInvalidBundle, s.Path)
	}
	m.CertPEM = certs[0]
	m.RootsPEM = bytes.Join(certs, nil)
	return m, nil
}

// Save implements Store.
func (s FileStore) Save(_ context.Context, m Material) error {
	if len(bytes.TrimSpace(m.ChainPEM)) > 0 {
		return fmt.Errorf("ca: FileStore holds self-signed roots only, not a chain")
	}
	var buf bytes.Buffer
	buf.Write(m.KeyPEM)
	buf.Write(m.CertPEM)
	roots, err := parseCerts(m.RootsPEM)
	if err != nil {
		return err
	}
	signing, err := parseCerts(m.CertPEM)
	if err != nil || len(signing) == 0 {
		return fmt.Errorf("%w: no signing certificate", ErrInvalidBundle)
	}
	for _, r := range roots {
		if !r.Equal(signing[0]) {
			buf.Write(encodeCert(r))
		}
	}
	return writeFileAtomic(s.Path, buf.Bytes(), 0o600)
}

// writeFileAtomic writes data to path through a temporary file in the
// same directory, synced and renamed over path.
func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // no-op after the rename
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// WriteRootsFile writes b's trusted roots to path atomically (mode 0644),
// for workloads and tools that read the root from a file (CA_ROOT_CA,
// XDS_ROOT_CA) until the Kubernetes issue distributes it as the
// istio-ca-root-cert ConfigMap.
func WriteRootsFile(path string, b *Bundle) error {
	return writeFileAtomic(path, b.RootsPEM(), 0o644)
}

package ca_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pilotfish-mesh/pilotfish/ca"
)

func writeMaterial(t *testing.T, dir string, m ca.Material, tlsLayout bool) {
	t.Helper()
	files := map[string][]byte{ca.CACertFile: m.CertPEM, ca.CAKeyFile: m.KeyPEM, ca.CertChainFile: m.ChainPEM, ca.RootCertFile: m.RootsPEM}
	if tlsLayout {
		files = map[string][]byte{ca.TLSCertFile: m.CertPEM, ca.TLSKeyFile: m.KeyPEM, ca.TLSCAFile: m.RootsPEM}
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func TestLoadDir(t *testing.T) {
	m := intermediateMaterial(t, 24*time.Hour, 12*time.Hour)
	for _, tlsLayout := range []bool{false, true} {
		dir := t.TempDir()
		writeMaterial(t, dir, m, tlsLayout)
		b, err := ca.LoadDir(dir)
		if err != nil {
			t.Fatalf("tls layout %t: %v", tlsLayout, err)
		}
		a, _ := ca.New(b, ca.Options{})
		chain, err := a.Sign(reviews, csrPEM(t, ecKey(t), []string{reviewsID}), 0)
		if err != nil {
			t.Fatal(err)
		}
		leaf, middle, roots := parseChain(t, chain)
		verifyLeaf(t, leaf, middle, roots)
	}

	bad := map[string]func(m *ca.Material){
		"key of another CA": func(m *ca.Material) { m.KeyPEM = intermediateMaterial(t, time.Hour, time.Hour).KeyPEM },
		"root of another CA": func(m *ca.Material) {
			m.RootsPEM = intermediateMaterial(t, time.Hour, time.Hour).RootsPEM
			m.ChainPEM = m.CertPEM
		},
		"no root": func(m *ca.Material) { m.RootsPEM = nil },
		"garbage key": func(m *ca.Material) {
			m.KeyPEM = []byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")
		},
		"leaf as signing": func(m *ca.Material) { m.CertPEM, m.KeyPEM = leafMaterial(t) },
	}
	for name, mutate := range bad {
		t.Run(name, func(t *testing.T) {
			mm := m
			mutate(&mm)
			dir := t.TempDir()
			writeMaterial(t, dir, mm, false)
			if _, err := ca.LoadDir(dir); !errors.Is(err, ca.ErrInvalidBundle) {
				t.Fatalf("err %v, want ErrInvalidBundle", err)
			}
		})
	}
	if _, err := ca.LoadDir(t.TempDir()); !errors.Is(err, ca.ErrInvalidBundle) {
		t.Fatalf("empty dir: %v", err)
	}
}

// leafMaterial returns a workload certificate and key: not a CA.
func leafMaterial(t *testing.T) (certPEM, keyPEM []byte) {
	t.Helper()
	m, _ := ca.NewRoot(ca.SelfSignedOptions{})
	b, _ := ca.NewBundle(m)
	a, _ := ca.New(b, ca.Options{})
	k := ecKey(t)
	chain, err := a.Sign(reviews, csrPEM(t, k, nil), 0)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKCS8PrivateKey(k)
	return []byte(chain[0]), pemBlock("PRIVATE KEY", der)
}

// WatchDir swaps in new cacerts (a plug-in CA rotation, written the way a
// Kubernetes Secret volume is: a new directory, then the ..data symlink
// swapped) and keeps the last good CA when the new files do not verify.
func TestWatchDirHotReload(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "cacerts")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	generation := 0
	publish := func(m ca.Material) {
		generation++
		data := filepath.Join(dir, "..data_"+string(rune('a'+generation)))
		if err := os.Mkdir(data, 0o755); err != nil {
			t.Fatal(err)
		}
		writeMaterial(t, data, m, false)
		tmp := filepath.Join(dir, "..data_tmp")
		if err := os.Symlink(filepath.Base(data), tmp); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{ca.CACertFile, ca.CAKeyFile, ca.CertChainFile, ca.RootCertFile} {
			_ = os.Symlink(filepath.Join("..data", f), filepath.Join(dir, f))
		}
	}
	m1 := intermediateMaterial(t, 24*time.Hour, 12*time.Hour)
	publish(m1)
	b1, err := ca.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := ca.New(b1, ca.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		ca.WatchDir(ctx, dir, a, ca.DirWatchOptions{Debounce: 20 * time.Millisecond, Resync: 100 * time.Millisecond})
		close(done)
	}()
	defer func() { cancel(); <-done }()

	// A rotation to a new root where both roots are trusted for a while.
	m2 := intermediateMaterial(t, 24*time.Hour, 12*time.Hour)
	m2.RootsPEM = append(append([]byte{}, m2.RootsPEM...), m1.RootsPEM...)
	changed := a.Changed()
	publish(m2)
	select {
	case <-changed:
	case <-time.After(5 * time.Second):
		t.Fatal("the new cacerts were not loaded")
	}
	b2 := a.Bundle()
	if b2.Certificate().Equal(b1.Certificate()) || len(b2.Roots()) != 2 {
		t.Fatalf("bundle after reload: same signer %t, %d roots", b2.Certificate().Equal(b1.Certificate()), len(b2.Roots()))
	}
	chain, err := a.Sign(reviews, csrPEM(t, ecKey(t), nil), 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, roots := parseChain(t, chain); len(roots) != 2 {
		t.Errorf("response root bundle has %d roots, want both", len(roots))
	}

	// Broken files: the last good CA stays.
	broken := m2
	broken.KeyPEM = m1.KeyPEM
	publish(broken)
	time.Sleep(400 * time.Millisecond) // several resyncs
	if !a.Bundle().Certificate().Equal(b2.Certificate()) {
		t.Fatal("a broken cacerts update replaced the CA")
	}
}

func TestSelfSignedPersistedAndReused(t *testing.T) {
	store := ca.FileStore{Path: filepath.Join(t.TempDir(), "state", ca.StateFileName)}
	b1, err := ca.LoadOrCreateRoot(context.Background(), store, ca.SelfSignedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(store.Path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("state file mode %v, want 0600", fi.Mode().Perm())
	}
	b2, err := ca.LoadOrCreateRoot(context.Background(), store, ca.SelfSignedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !b1.Certificate().Equal(b2.Certificate()) {
		t.Fatal("a restart made a new root")
	}
	if got := b2.Certificate().Subject.Organization; len(got) != 1 || got[0] != "cluster.local" {
		t.Errorf("root organization %v, want the trust domain", got)
	}
	if err := os.WriteFile(store.Path, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ca.LoadOrCreateRoot(context.Background(), store, ca.SelfSignedOptions{}); err == nil {
		t.Fatal("a corrupt state file was silently replaced: it must stop the start, not orphan every workload")
	}
}

// Root rotation: the renewed root signs, the old one stays trusted (and is
// sent to workloads) so that certificates it signed keep verifying.
func TestSelfSignedRootRotation(t *testing.T) {
	store := ca.FileStore{Path: filepath.Join(t.TempDir(), ca.StateFileName)}
	// A root made 40 minutes ago with a 1h lifetime: within its grace
	// period (half) now.
	o := ca.SelfSignedOptions{TTL: time.Hour, GraceRatio: 0.5, Now: func() time.Time { return time.Now().Add(-40 * time.Minute) }}
	b1, err := ca.LoadOrCreateRoot(context.Background(), store, o)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := ca.New(b1, ca.Options{})
	old, err := a.Sign(reviews, csrPEM(t, ecKey(t), nil), 0)
	if err != nil {
		t.Fatal(err)
	}
	oldLeaf, _, _ := parseChain(t, old)

	later := ca.SelfSignedOptions{TTL: time.Hour, GraceRatio: 0.5, CheckInterval: 10 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	changed := a.Changed()
	go func() { ca.RunRootRotation(ctx, a, store, later); close(done) }()
	select {
	case <-changed:
	case <-time.After(5 * time.Second):
		t.Fatal("the root was not renewed")
	}
	cancel()
	<-done
	b2 := a.Bundle()
	if b2.Certificate().Equal(b1.Certificate()) || len(b2.Roots()) != 2 {
		t.Fatalf("after rotation: same root %t, %d trusted roots", b2.Certificate().Equal(b1.Certificate()), len(b2.Roots()))
	}
	fresh, err := a.Sign(reviews, csrPEM(t, ecKey(t), nil), 0)
	if err != nil {
		t.Fatal(err)
	}
	leaf, middle, roots := parseChain(t, fresh)
	verifyLeaf(t, leaf, middle, roots)
	verifyLeaf(t, oldLeaf, nil, roots) // the old certificate against the new bundle
	// The old root's certificates still authenticate renewals.
	if _, err := a.Authenticate(context.Background(), ca.Credentials{PeerCertificates: []*x509.Certificate{oldLeaf}}); err != nil {
		t.Errorf("renewal with a certificate of the previous root: %v", err)
	}
	// Persisted: a restart keeps both.
	b3, err := ca.LoadOrCreateRoot(context.Background(), store, later)
	if err != nil {
		t.Fatal(err)
	}
	if !b3.Certificate().Equal(b2.Certificate()) || len(b3.Roots()) != 2 {
		t.Fatalf("after restart: %d roots", len(b3.Roots()))
	}
}

func TestAuthenticateClientCertificate(t *testing.T) {
	a := newAuthority(t, ca.Options{})
	issue := func(a *ca.Authority, id ca.Identity) *x509.Certificate {
		chain, err := a.Sign(id, csrPEM(t, ecKey(t), nil), 0)
		if err != nil {
			t.Fatal(err)
		}
		leaf, _, _ := parseChain(t, chain)
		return leaf
	}
	mine := issue(a, reviews)
	c, err := a.Authenticate(context.Background(), ca.Credentials{PeerCertificates: []*x509.Certificate{mine}})
	if err != nil || c.Namespace != "shop" || c.ServiceAccount != "reviews" {
		t.Fatalf("own certificate: %+v %v", c, err)
	}
	other := newAuthority(t, ca.Options{})
	otherTD := newAuthority(t, ca.Options{TrustDomain: "other.example"})
	otherTD.SetBundle(a.Bundle()) // same CA, another trust domain
	for name, cert := range map[string]*x509.Certificate{
		"another CA":           issue(other, reviews),
		"another trust domain": issue(otherTD, ca.Identity{TrustDomain: "other.example", Namespace: "shop", ServiceAccount: "reviews"}),
	} {
		if _, err := a.Authenticate(context.Background(), ca.Credentials{PeerCertificates: []*x509.Certificate{cert}}); !errors.Is(err, ca.ErrUnauthenticated) {
			t.Errorf("%s: err %v, want ErrUnauthenticated", name, err)
		}
	}
	// The root leaves the bundle: its certificates stop authenticating.
	a.SetBundle(newRootBundle(t, ca.KeyECDSAP256))
	if _, err := a.Authenticate(context.Background(), ca.Credentials{PeerCertificates: []*x509.Certificate{mine}}); err == nil {
		t.Error("a certificate of a root no longer trusted authenticated")
	}
}

func TestServingCertificate(t *testing.T) {
	a := newAuthority(t, ca.Options{})
	s, err := ca.NewServing(a, ca.ServingOptions{Names: []string{"pilotfish.example", "127.0.0.1"}, TTL: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	first := s.Certificate().Leaf
	if len(first.DNSNames) != 2 || first.DNSNames[0] != ca.DefaultServingDNSName || first.DNSNames[1] != "pilotfish.example" ||
		len(first.IPAddresses) != 1 || !first.IPAddresses[0].IsLoopback() {
		t.Fatalf("SANs %v %v", first.DNSNames, first.IPAddresses)
	}
	if _, err := first.Verify(x509.VerifyOptions{Roots: a.Bundle().RootPool(), DNSName: ca.DefaultServingDNSName}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	waitNew := func(what string, prev *x509.Certificate) *x509.Certificate {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			if c := s.Certificate().Leaf; !c.Equal(prev) {
				return c
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatalf("no new serving certificate after %s", what)
		return nil
	}
	second := waitNew("half its lifetime", first)
	a.SetBundle(newRootBundle(t, ca.KeyECDSAP256))
	third := waitNew("a new root", second)
	if _, err := third.Verify(x509.VerifyOptions{Roots: a.Bundle().RootPool(), DNSName: ca.DefaultServingDNSName}); err != nil {
		t.Fatalf("after the root change: %v", err)
	}
	// The TLS config serves the current certificate.
	cfg, err := s.ServerTLSConfig().GetConfigForClient(&tls.ClientHelloInfo{})
	if err != nil || !bytes.Equal(cfg.Certificates[0].Certificate[0], s.Certificate().Certificate[0]) {
		t.Fatalf("TLS config: %v", err)
	}
}

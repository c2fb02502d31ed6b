package main

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/grpc"

	"github.com/pilotfish-mesh/pilotfish/ca"
	"github.com/pilotfish-mesh/pilotfish/serve"
)

// --ca-state-dir keeps the self-signed root: a restarted pilotfish signs
// under the same root, so running workloads keep trusting it.
func TestCAStateDirReusedOnRestart(t *testing.T) {
	dir := t.TempDir()
	rootOut := filepath.Join(t.TempDir(), "root-cert.pem")
	start := func() *secureServing {
		t.Helper()
		s, err := newSecureServing(context.Background(), caOptions{stateDir: dir, rootCertOut: rootOut},
			slog.New(slog.DiscardHandler), nil, grpc.NewServer(), func(grpc.ServiceRegistrar, serve.AuthOptions) {})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	first := start().authority.Bundle()
	second := start().authority.Bundle()
	if !first.Certificate().Equal(second.Certificate()) {
		t.Fatal("the restarted CA made a new root")
	}
	got, err := os.ReadFile(rootOut)
	if err != nil || string(got) != string(second.RootsPEM()) {
		t.Fatalf("--root-cert-out: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, ca.StateFileName)); err != nil {
		t.Fatal(err)
	}
}

// Bad CA settings stop the start with a message naming the flag.
func TestCABadSettingsRefused(t *testing.T) {
	for name, o := range map[string]caOptions{
		"cacerts dir without files": {cacertsDir: t.TempDir()},
		"JWT rule not JSON":         {jwtRule: "issuer=x"},
		"JWT rule https jwks_uri":   {jwtRule: `{"issuer": "x", "audiences": ["istio-ca"], "jwks_uri": "https://x/jwks"}`},
		"unknown root key type":     {rootKeyType: "dsa"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := newSecureServing(context.Background(), o, slog.New(slog.DiscardHandler), nil, grpc.NewServer(), func(grpc.ServiceRegistrar, serve.AuthOptions) {})
			if err == nil {
				t.Fatal("accepted")
			}
			t.Log(err)
		})
	}
}

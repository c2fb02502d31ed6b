package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The real istioctl (istio.io/istio's, built by `make istioctl` into
// .cache/bin from tools/pilot-agent's module) reads pilotfish's sync status
// over xDS, as it reads istiod's: `istioctl proxy-status --xds-address
// --plaintext` asks for istio.io/debug/syncz on an ADS stream. `make test`
// builds it first, so this runs in CI; run alone, it is skipped when the
// binary is absent and CI is unset.

func istioctlBinary(t *testing.T) string {
	t.Helper()
	p := os.Getenv("ISTIOCTL")
	if p == "" {
		p = filepath.Join("..", "..", ".cache", "bin", "istioctl")
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(abs); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("istioctl not built (%v): `make test` builds it first (make istioctl)", err)
		}
		t.Skipf("istioctl not built (%v): run `make istioctl` (make test does)", err)
	}
	return abs
}

// runIstioctl runs istioctl with a kubeconfig that points nowhere: with
// --xds-address it must not need a cluster.
func runIstioctl(t *testing.T, bin string, args ...string) string {
	t.Helper()
	home := t.TempDir()
	kubeconfig := filepath.Join(home, "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: none, cluster: {server: "https://127.0.0.1:1"}}]
contexts: [{name: none, context: {cluster: none, user: none}}]
users: [{name: none, user: {}}]
current-context: none
`), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// --revision: without one istioctl first looks the default revision up
	// in the cluster, and waits for it.
	cmd := exec.CommandContext(ctx, bin, append(args, "--kubeconfig", kubeconfig, "--revision", "default")...)
	cmd.Env = append(os.Environ(), "HOME="+home)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("istioctl %v: %v\nstdout:\n%s\nstderr:\n%s", args, err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// tableCells reads a normalized table into proxy → column → cell
// (istioctl orders its type columns by type URL, pilotfish as istioctl
// used to).
func tableCells(norm string) map[string]map[string]string {
	lines := strings.Split(strings.TrimSpace(norm), "\n")
	head := strings.Split(lines[0], " | ")
	out := map[string]map[string]string{}
	for _, l := range lines[1:] {
		cells := strings.Split(l, " | ")
		row := map[string]string{}
		for i, h := range head {
			if i < len(cells) {
				row[h] = cells[i]
			}
		}
		out[cells[0]] = row
	}
	return out
}

func TestIstioctlProxyStatus(t *testing.T) {
	bin := istioctlBinary(t)
	s := newScenario(t)
	xds := s.addrs.grpcAddr.String()

	// -v 1: istioctl's table with one column per type, as pilotfish
	// proxy-status prints it.
	got := normalizeTable(runIstioctl(t, bin, "proxy-status", "--xds-address", xds, "--plaintext", "--timeout", "20s", "-v", "1"))
	want := normalizeTable(func() string {
		var out bytes.Buffer
		if err := runProxyStatus(context.Background(), &proxyStatusOptions{xdsAddr: xds, output: "table", timeout: 10 * time.Second}, &out); err != nil {
			t.Fatal(err)
		}
		return out.String()
	}())
	if g, w := tableCells(got), tableCells(want); !reflect.DeepEqual(g, w) || len(g) != 3 {
		t.Errorf("istioctl proxy-status -v 1:\n%s\npilotfish proxy-status:\n%s", got, want)
	}

	// The default table: subscribed types per proxy.
	def := runIstioctl(t, bin, "proxy-status", "--xds-address", xds, "--plaintext", "--timeout", "20s")
	for _, line := range []string{
		`productpage-1.shop\s+Kubernetes\s+pilotfish-0\s+1.28.0\s+1 \(CDS\)`,
		`ratings-1.other\s+Kubernetes\s+pilotfish-0\s+1.28.0\s+1 \(CDS\)`,
		`reviews-1.shop\s+Kubernetes\s+pilotfish-0\s+1.28.0\s+3 \(CDS,LDS,EDS\)`,
	} {
		if !regexp.MustCompile(line).MatchString(def) {
			t.Errorf("istioctl proxy-status lacks a line matching %q:\n%s", line, def)
		}
	}
	if n := strings.Count(strings.TrimSpace(def), "\n"); n != 3 {
		t.Errorf("istioctl proxy-status: %d proxies, want 3 (the tool's own stream is not listed):\n%s", n, def)
	}
}

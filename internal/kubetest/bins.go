package kubetest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The binaries the harness runs, by file name in the binary directory.
const (
	etcdBin      = "etcd"
	apiserverBin = "kube-apiserver"
	kubectlBin   = "kubectl"
)

// BinDir returns the directory holding etcd, kube-apiserver and kubectl:
// $PILOTFISH_KUBE_BIN, else <repo>/.cache/kube/bin. It skips the test when
// one is missing, or fails it when $CI is set.
func BinDir(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("PILOTFISH_KUBE_BIN")
	if dir == "" {
		root, err := RepoRoot()
		if err != nil {
			t.Fatalf("kubetest: %v", err)
		}
		dir = filepath.Join(root, ".cache", "kube", "bin")
	}
	for _, b := range []string{etcdBin, apiserverBin, kubectlBin} {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("kubetest: %s not built (%v): `make test` builds it first (make kube-bins)", b, err)
			}
			t.Skipf("kubetest: %s not built (%v): run `make kube-bins` (make test does)", b, err)
		}
	}
	return dir
}

// RepoRoot returns the root of the pilotfish repository: the nearest
// ancestor of the working directory whose go.mod declares the pilotfish
// module (a test's working directory is its package directory).
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.HasPrefix(string(b), "module github.com/pilotfish-mesh/pilotfish\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", os.ErrNotExist
		}
		dir = parent
	}
}

// moduleDir returns the directory of a module in pilotfish's build list
// (for example istio.io/api, which ships Istio's CRDs), through the go
// command that runs the tests.
func moduleDir(t testing.TB, module string) string {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", module)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubetest: go list -m %s: %v", module, err)
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" {
		t.Fatalf("kubetest: module %s is not downloaded (go mod download %s)", module, module)
	}
	return dir
}

package kubetest

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// Kubectl runs the harness's kubectl against the cluster as the admin and
// returns its combined output and error (a non-zero exit is an error, not a
// test failure, so a test can expect one).
func (c *Cluster) Kubectl(t testing.TB, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(c.BinDir, kubectlBin), append([]string{"--kubeconfig=" + c.Kubeconfig}, args...)...)
	cmd.Env = []string{"HOME=" + t.TempDir()} // no user kubeconfig or cache
	out, err := cmd.CombinedOutput()
	return string(out), err
}

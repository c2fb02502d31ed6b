package deploy_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pilotfish-mesh/pilotfish/internal/kubetest"
)

// TestSelfSignedCARBAC renders the chart without a cacerts Secret (the
// self-signed root kept in istio-ca-secret), applies it to a real API server
// and checks that the service account may read, create and update that
// Secret in its own namespace and no other Secret.
func TestSelfSignedCARBAC(t *testing.T) {
	out := runHelm(t, "template", "pilotfish", "charts/pilotfish", "--namespace", namespace, "--set", "ca.cacertsSecret=")
	// The Deployment's document only: the injector ConfigMap's templates
	// mention secretName too.
	var deployment string
	for _, doc := range strings.Split(string(out), "\n---\n") {
		if strings.Contains(doc, "\nkind: Deployment\n") {
			deployment = doc
		}
	}
	if deployment == "" {
		t.Fatal("no Deployment rendered")
	}
	if strings.Contains(deployment, "--cacerts-dir") || strings.Contains(deployment, "secretName:") {
		t.Fatal("without ca.cacertsSecret the deployment still mounts cacerts")
	}
	checkRBAC(t, out, []canI{
		{[]string{"get", "secrets/istio-ca-secret", "-n", namespace}, "yes"},
		{[]string{"update", "secrets/istio-ca-secret", "-n", namespace}, "yes"},
		{[]string{"create", "secrets", "-n", namespace}, "yes"},
		{[]string{"get", "secrets/cacerts", "-n", namespace}, "no"},
		{[]string{"list", "secrets", "-n", namespace}, "no"},
		{[]string{"get", "secrets/istio-ca-secret", "-n", "default"}, "no"},
		{[]string{"create", "secrets", "-n", "default"}, "no"},
		{[]string{"delete", "secrets/istio-ca-secret", "-n", namespace}, "no"},
	})
}

// canI is a `kubectl auth can-i` question for pilotfish's service account
// and the answer ("yes" or "no") the chart must give.
type canI struct {
	args []string
	want string
}

// checkRBAC applies a rendered chart to a real API server and asks it each
// question as pilotfish's service account.
func checkRBAC(t *testing.T, rendered []byte, questions []canI) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "pilotfish.yaml")
	if err := os.WriteFile(file, rendered, 0o644); err != nil {
		t.Fatal(err)
	}
	c := kubetest.Start(t, kubetest.Options{IstioCRDs: true})
	c.EnsureNamespace(t, namespace)
	if out, err := c.Kubectl(t, "apply", "-f", file); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
	sa := "--as=system:serviceaccount:" + namespace + ":pilotfish"
	for _, q := range questions {
		out, _ := c.Kubectl(t, append([]string{"auth", "can-i", sa}, q.args...)...)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if got := lines[len(lines)-1]; got != q.want {
			t.Errorf("can pilotfish %s? %q, want %q", strings.Join(q.args, " "), got, q.want)
		}
	}
}

package deploy_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pilotfish-mesh/pilotfish/internal/kubetest"
)

// TestGatewayCredentialsRBAC: gatewayCredentials=true passes --watch-secrets
// and lets the service account get, list and watch Secrets in every
// namespace (the Secret informer needs nothing else); the default chart
// does neither.
func TestGatewayCredentialsRBAC(t *testing.T) {
	if def := runHelm(t, "template", "pilotfish", "charts/pilotfish", "--namespace", namespace); strings.Contains(string(def), "--watch-secrets") {
		t.Fatal("the default chart watches Secrets")
	}
	out := runHelm(t, "template", "pilotfish", "charts/pilotfish", "--namespace", namespace, "--set", "gatewayCredentials=true")
	if !strings.Contains(string(out), "- --watch-secrets") {
		t.Fatal("gatewayCredentials=true does not pass --watch-secrets")
	}
	file := filepath.Join(t.TempDir(), "pilotfish.yaml")
	if err := os.WriteFile(file, out, 0o644); err != nil {
		t.Fatal(err)
	}
	c := kubetest.Start(t, kubetest.Options{IstioCRDs: true})
	c.EnsureNamespace(t, namespace)
	if out, err := c.Kubectl(t, "apply", "-f", file); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
	sa := "--as=system:serviceaccount:" + namespace + ":pilotfish"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"list", "secrets", "--all-namespaces"}, "yes"},
		{[]string{"watch", "secrets", "--all-namespaces"}, "yes"},
		{[]string{"get", "secrets/gw-cert", "-n", "default"}, "yes"},
		{[]string{"update", "secrets/gw-cert", "-n", "default"}, "no"},
		{[]string{"delete", "secrets/gw-cert", "-n", "default"}, "no"},
	} {
		out, _ := c.Kubectl(t, append([]string{"auth", "can-i", sa}, tc.args...)...)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if got := lines[len(lines)-1]; got != tc.want {
			t.Errorf("can pilotfish %s? %q, want %q", strings.Join(tc.args, " "), got, tc.want)
		}
	}
}

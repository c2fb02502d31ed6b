package deploy_test

import (
	"strings"
	"testing"
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
	checkRBAC(t, out, []canI{
		{[]string{"list", "secrets", "--all-namespaces"}, "yes"},
		{[]string{"watch", "secrets", "--all-namespaces"}, "yes"},
		{[]string{"get", "secrets/gw-cert", "-n", "default"}, "yes"},
		{[]string{"update", "secrets/gw-cert", "-n", "default"}, "no"},
		{[]string{"delete", "secrets/gw-cert", "-n", "default"}, "no"},
	})
}

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pilotfish-mesh/pilotfish/internal/kubetest"
)

// TestUnsupportedFieldsEverywhere follows one unsupported field (a TCP
// match's sourceSubnet) and one unsupported DestinationRule field
// (outlierDetection.consecutiveErrors) through
// a real kube-apiserver and a serving replica: kubectl apply prints the
// webhook's warning and the object is stored; /debug/config_errors lists
// the warnings of the API server's object and of the config directory's,
// and pilotfish_config_unsupported_fields counts them; fixing the object
// and deleting the file clear both.
func TestUnsupportedFieldsEverywhere(t *testing.T) {
	c := kubetest.Start(t, kubetest.Options{IstioCRDs: true})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	registerWebhook(ctx, t, c)
	c.EnsureNamespace(t, "shop")

	dir := t.TempDir()
	manifest := func(name, content string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	vs := `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews, namespace: shop}
spec:
  hosts: [reviews]
  tcp:
  - match:
    - sourceSubnet: 10.0.0.0/8
    route:
    - destination: {host: reviews}
`
	vsFile := filepath.Join(t.TempDir(), "vs.yaml")
	if err := os.WriteFile(vsFile, []byte(vs), 0o644); err != nil {
		t.Fatal(err)
	}
	// The API server starts calling the webhook a moment after it is
	// registered: apply until the warning shows.
	warning := "Warning: VirtualService shop/reviews: spec.tcp[0].match[0].sourceSubnet: not supported by pilotfish: " +
		"matching on the client's subnet is not implemented; the field is ignored"
	eventuallyFor(t, 30*time.Second, "kubectl apply prints the webhook's warning", func() string {
		out, err := c.Kubectl(t, "apply", "-f", vsFile)
		if err != nil {
			return fmt.Sprintf("%v: %s", err, out)
		}
		if !strings.Contains(out, warning) || !strings.Contains(out, "virtualservice.networking.istio.io/reviews") {
			_, _ = c.Kubectl(t, "delete", "-f", vsFile)
			return out
		}
		return ""
	})

	manifest("dr.yaml", `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: ratings, namespace: shop}
spec:
  host: ratings
  trafficPolicy:
    outlierDetection: {consecutiveErrors: 5}
`)
	s := startKubeServe(t, c.Kubeconfig, func(o *serveOptions) { o.configDir = dir })

	configErrors := func() []string {
		code, body := get(t, s.http+"/debug/config_errors")
		if code != 200 {
			t.Fatalf("/debug/config_errors: %d", code)
		}
		var out []string
		if err := json.Unmarshal(body, &out); err != nil {
			t.Fatalf("/debug/config_errors: %v: %s", err, body)
		}
		return out
	}
	gauge := func(kind, field string) string {
		_, body := get(t, s.http+"/metrics")
		prefix := fmt.Sprintf(`pilotfish_config_unsupported_fields{field=%q,kind=%q} `, field, kind)
		for line := range strings.SplitSeq(string(body), "\n") {
			if v, ok := strings.CutPrefix(line, prefix); ok {
				return v
			}
		}
		return "absent"
	}
	const vsField, drField = "spec.tcp[].match[].sourceSubnet", "spec.trafficPolicy.outlierDetection.consecutiveErrors"
	has := func(list []string, parts ...string) bool {
		for _, l := range list {
			ok := true
			for _, p := range parts {
				ok = ok && strings.Contains(l, p)
			}
			if ok {
				return true
			}
		}
		return false
	}
	eventually(t, "both warnings listed and counted", func() string {
		errs := configErrors()
		switch {
		case !has(errs, "warning: VirtualService shop/reviews: spec.tcp[0].match[0].sourceSubnet: not supported by pilotfish"):
			return fmt.Sprintf("no sourceSubnet warning in %q", errs)
		case !has(errs, "dr.yaml:7: warning: DestinationRule shop/ratings: spec.trafficPolicy.outlierDetection.consecutiveErrors: not supported by pilotfish"):
			return fmt.Sprintf("no consecutiveErrors warning in %q", errs)
		case gauge("VirtualService", vsField) != "1":
			return "sourceSubnet gauge " + gauge("VirtualService", vsField)
		case gauge("DestinationRule", drField) != "1":
			return "consecutiveErrors gauge " + gauge("DestinationRule", drField)
		}
		return ""
	})

	// Fixing the API server's object and removing the file clear both.
	fixed := strings.Replace(vs, "  - match:\n    - sourceSubnet: 10.0.0.0/8\n    route:", "  - route:", 1)
	if fixed == vs {
		t.Fatal("the fix changed nothing")
	}
	if err := os.WriteFile(vsFile, []byte(fixed), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := c.Kubectl(t, "apply", "-f", vsFile); err != nil || strings.Contains(out, "Warning:") {
		t.Fatalf("kubectl apply of the fixed object: %v: %s", err, out)
	}
	if err := os.Remove(filepath.Join(dir, "dr.yaml")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "warnings cleared", func() string {
		if errs := configErrors(); len(errs) > 0 {
			return fmt.Sprintf("still listed: %q", errs)
		}
		if g := gauge("VirtualService", vsField); g != "absent" {
			return "sourceSubnet gauge " + g
		}
		if g := gauge("DestinationRule", drField); g != "absent" {
			return "consecutiveErrors gauge " + g
		}
		return ""
	})
}

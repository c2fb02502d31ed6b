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

// TestUnsupportedFieldsEverywhere follows one unsupported field (a match's
// sourceLabels) and one unsupported DestinationRule field (tunnel) through
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
  http:
  - match:
    - sourceLabels: {app: client}
    route:
    - destination: {host: reviews}
`
	vsFile := filepath.Join(t.TempDir(), "vs.yaml")
	if err := os.WriteFile(vsFile, []byte(vs), 0o644); err != nil {
		t.Fatal(err)
	}
	// The API server starts calling the webhook a moment after it is
	// registered: apply until the warning shows.
	warning := "Warning: VirtualService shop/reviews: spec.http[0].match[0].sourceLabels: not supported by pilotfish: " +
		"source labels cannot be evaluated: a proxy class carries no workload labels; a match that sets it never applies"
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
    tunnel: {protocol: CONNECT, targetHost: egress.example.com, targetPort: 8080}
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
		case !has(errs, "warning: VirtualService shop/reviews: spec.http[0].match[0].sourceLabels: not supported by pilotfish"):
			return fmt.Sprintf("no sourceLabels warning in %q", errs)
		case !has(errs, "dr.yaml:7: warning: DestinationRule shop/ratings: spec.trafficPolicy.tunnel: not supported by pilotfish"):
			return fmt.Sprintf("no tunnel warning in %q", errs)
		case gauge("VirtualService", "spec.http[].match[].sourceLabels") != "1":
			return "sourceLabels gauge " + gauge("VirtualService", "spec.http[].match[].sourceLabels")
		case gauge("DestinationRule", "spec.trafficPolicy.tunnel") != "1":
			return "tunnel gauge " + gauge("DestinationRule", "spec.trafficPolicy.tunnel")
		}
		return ""
	})

	// Fixing the API server's object and removing the file clear both.
	if err := os.WriteFile(vsFile, []byte(strings.Replace(vs, "  - match:\n    - sourceLabels: {app: client}\n    route:", "  - route:", 1)), 0o644); err != nil {
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
		if g := gauge("VirtualService", "spec.http[].match[].sourceLabels"); g != "absent" {
			return "sourceLabels gauge " + g
		}
		if g := gauge("DestinationRule", "spec.trafficPolicy.tunnel"); g != "absent" {
			return "tunnel gauge " + g
		}
		return ""
	})
}

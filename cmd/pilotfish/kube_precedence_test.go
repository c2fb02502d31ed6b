package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pilotfish-mesh/pilotfish/internal/kubetest"
)

// The directory's echo VirtualService: every call to subset v1. The API
// server's (kubeMesh.route) sends them to v2.
const dirEchoVS = `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: echo
  namespace: shop
spec:
  hosts: [echo.shop.svc.cluster.local]
  http:
  - route:
    - destination: {host: echo.shop.svc.cluster.local, subset: v1}
`

const shadowedEcho = "conf/echo-vs.yaml:1: VirtualService shop/echo: also defined by the Kubernetes API server, whose definition is used"

// TestKubeAndConfigDirPrecedence runs serve with a config directory and a
// real API server that both define the echo VirtualService, and checks
// what a proxyless gRPC client is routed by: the API server's definition
// whichever source had it first, the directory's once the API server's is
// deleted, the API server's again once re-created, and still the API
// server's when the file is deleted. The loser is listed in
// /debug/config_errors. A restarted server serves exactly what the
// running one served (/debug/configz compared).
func TestKubeAndConfigDirPrecedence(t *testing.T) {
	c := kubetest.Start(t, kubetest.Options{IstioCRDs: true})
	m := newKubeMesh(t, c, true)
	dir := filepath.Join(t.TempDir(), "conf")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	vsFile := filepath.Join(dir, "echo-vs.yaml")
	writeVS := func() {
		if err := os.WriteFile(vsFile, []byte(dirEchoVS), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	withDir := func(o *serveOptions) { o.configDir = dir }
	reported := func(s *kubeServer, want bool) {
		t.Helper()
		eventually(t, "config_errors", func() string {
			if _, b := get(t, s.http+"/debug/config_errors"); bodyHas(b, shadowedEcho) != want {
				return "config_errors = " + string(b)
			}
			return ""
		})
	}
	deleteAPIVS := func() {
		t.Helper()
		m.check(c.Istio.NetworkingV1().VirtualServices(kubeNS).Delete(m.ctx(), "echo", metav1.DeleteOptions{}))
	}

	// The directory first: the API server's definition arrives later.
	writeVS()
	a := startKubeServe(t, c.Kubeconfig, withDir)
	h := grpcClient(t, a.grpc)
	eventually(t, "the directory's VirtualService, alone", func() string { return allBy(h, "v1", 5) })
	reported(a, false)
	m.route("v2")
	eventually(t, "the API server's VirtualService wins", func() string { return allBy(h, "v2", 5) })
	reported(a, true)

	deleteAPIVS()
	eventually(t, "the directory's VirtualService once the API server's is deleted", func() string { return allBy(h, "v1", 5) })
	reported(a, false)
	m.route("v2")
	eventually(t, "the API server's VirtualService re-created", func() string { return allBy(h, "v2", 5) })
	reported(a, true)

	// A restart on the same inputs serves the same, from its first answer.
	running := configz(t, a.http)
	a.stop()
	b := startKubeServe(t, c.Kubeconfig, withDir)
	if got := configz(t, b.http); got != running {
		t.Errorf("restarted server's configz:\n%s\nthe running one's:\n%s", got, running)
	}
	if got := allBy(grpcClient(t, b.grpc), "v2", 5); got != "" {
		t.Errorf("restarted server: %s", got)
	}
	reported(b, true)
	b.stop()

	// The API server first: the file appears while it is served.
	if err := os.Remove(vsFile); err != nil {
		t.Fatal(err)
	}
	d := startKubeServe(t, c.Kubeconfig, withDir)
	h = grpcClient(t, d.grpc)
	eventually(t, "the API server's VirtualService, alone", func() string { return allBy(h, "v2", 5) })
	writeVS()
	reported(d, true) // the file source has read the file
	if got := allBy(h, "v2", 10); got != "" {
		t.Errorf("the file added while the API server defines the VirtualService: %s", got)
	}
	if got := configz(t, d.http); got != running {
		t.Errorf("configz with the file added later:\n%s\nwith the file first:\n%s", got, running)
	}

	// The file deleted while it loses: the API server's rows stay.
	if err := os.Remove(vsFile); err != nil {
		t.Fatal(err)
	}
	reported(d, false) // the file source has seen it go
	if got := allBy(h, "v2", 10); got != "" {
		t.Errorf("the losing file deleted: %s", got)
	}
	if got := configz(t, d.http); got != running {
		t.Errorf("configz after the losing file is deleted:\n%s\nbefore:\n%s", got, running)
	}
}

// configz is /debug/configz in a canonical form (protojson output varies
// in whitespace by design).
func configz(t *testing.T, base string) string {
	t.Helper()
	code, b := get(t, base+"/debug/configz")
	var v any
	if err := json.Unmarshal(b, &v); code != 200 || err != nil {
		t.Fatalf("/debug/configz: %d %v: %s", code, err, b)
	}
	out, err := json.MarshalIndent(v, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), `"name": "echo"`) {
		t.Fatalf("/debug/configz has no echo config: %s", out)
	}
	return string(out)
}

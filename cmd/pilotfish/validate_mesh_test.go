package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestValidateMeshConfig: `pilotfish validate` checks ConfigMap istio in
// a config directory and a --mesh-config file as serve reads them: a
// field istiod's validation refuses is an error naming the file, the
// line in the file, the ConfigMap and the field (exit 1); unknown and
// unsupported fields are warnings, each with its line (exit 0, 1 with
// --strict); other ConfigMaps are not mesh configs.
func TestValidateMeshConfig(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const cm = `apiVersion: v1
kind: Service
metadata: {name: reviews, namespace: shop}
spec:
  ports: [{port: 9080, name: http}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: istio-sidecar-injector, namespace: istio-system}
data:
  mesh: |
    connectTimeout: not-a-duration
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: istio
  namespace: istio-system
data:
  mesh: |
    rootNamespace: mesh-root
    connectTimeout: CONNECT
    enableEnvoyAccessLogService: true
`
	good := write("good/mesh.yaml", strings.Replace(cm, "CONNECT", "3s", 1))
	bad := write("bad/mesh.yaml", strings.Replace(cm, "CONNECT", "3 parsecs", 1))
	file := write("mesh-file.yaml", "rootNamespace: r\nenableEnvoyAccessLogService: true\nbogus: x\n")
	badFile := write("mesh-bad.yaml", "rootNamespace: r\nconnectTimeout: -1s\n")
	otel := write("mesh-otel.yaml", `extensionProviders:
- name: dt
  opentelemetry:
    service: otel.observability.svc.cluster.local
    port: 4317
    dynatraceSampler: {tenant: t, clusterId: 1}
- name: plain
  opentelemetry: {service: otel.observability.svc.cluster.local, port: 4317}
`)

	cases := []struct {
		name       string
		args       []string
		code       int
		wantStderr []string
		wantStdout string
	}{
		{"unsupported field in a dir: warning", []string{filepath.Dir(good)}, 0,
			[]string{good + ":23: warning: MeshConfig istio-system/istio: mesh.enableEnvoyAccessLogService: not supported by pilotfish"},
			"2 objects, 0 errors, 1 warning"},
		{"unsupported field, strict", []string{"--strict", filepath.Dir(good)}, 1,
			[]string{"mesh.enableEnvoyAccessLogService", "--strict and 1 warning"}, "2 objects, 0 errors, 1 warning"},
		{"refused field in a named file: error with its line", []string{bad}, 1,
			[]string{bad + ":22: MeshConfig istio-system/istio: mesh.connectTimeout: ", "parsecs"}, "2 objects, 1 error"},
		{"--mesh-config: unsupported and unknown fields", []string{"--mesh-config", file}, 0,
			[]string{file + ":2: warning: MeshConfig: mesh.enableEnvoyAccessLogService: not supported by pilotfish",
				file + ":3: warning: MeshConfig: mesh.bogus: unknown field"}, "1 object, 0 errors, 2 warnings"},
		{"--mesh-config: refused", []string{"--mesh-config", badFile}, 1,
			[]string{badFile + ":2: MeshConfig: mesh.connectTimeout: "}, "1 object, 1 error"},
		{"--mesh-config: an OpenTelemetry provider a Telemetry would name to no effect", []string{"--mesh-config", otel}, 0,
			[]string{otel + ":3: warning: MeshConfig: mesh.extensionProviders[0].opentelemetry: not supported by pilotfish: " +
				"dynatraceSampler, OTEL_SEMANTIC_CONVENTIONS; a Telemetry naming this provider gets no tracing from it"},
			"1 object, 0 errors, 1 warning"},
		{"--mesh-config missing", []string{"--mesh-config", filepath.Join(dir, "none.yaml")}, 1,
			[]string{"none.yaml"}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			stdout, stderr, code := runValidate(t, c.args...)
			if code != c.code {
				t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", code, c.code, stdout, stderr)
			}
			for _, w := range c.wantStderr {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
			if strings.TrimSpace(stdout) != c.wantStdout {
				t.Errorf("stdout %q, want %q", stdout, c.wantStdout)
			}
			if strings.Contains(stderr, "not-a-duration") || strings.Contains(stderr, "istio-sidecar-injector") {
				t.Errorf("a ConfigMap other than istio was read as the mesh config:\n%s", stderr)
			}
		})
	}
}

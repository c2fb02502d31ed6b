package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runValidate runs `pilotfish validate args...` in-process. main prints
// the returned error after "Error: "; it is appended to stderr here.
func runValidate(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	root := newRootCommand()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(append([]string{"validate"}, args...))
	if err := root.Execute(); err != nil {
		code = exitCode(err)
		errOut.WriteString("Error: " + err.Error() + "\n")
	}
	return out.String(), errOut.String(), code
}

func TestValidateCommand(t *testing.T) {
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
	valid := write("good/reviews.yaml", `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: reviews
  namespace: bookinfo
spec:
  hosts: [reviews]
  http:
  - route:
    - destination: {host: reviews, subset: v1}
---
apiVersion: v1
kind: Service
metadata: {name: reviews, namespace: bookinfo}
spec:
  ports: [{port: 9080, name: http}]
`)
	invalid := write("bad/dr.yaml", `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata:
  name: reviews
  namespace: bookinfo
spec:
  host: reviews
  subsets:
  - name: v1
  - name: v1
  trafficPolicy:
    connectionPool:
      tcp: {maxConnections: -1}
`)
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr []string // lines, in order
	}{
		{"valid file", []string{valid}, 0, "2 objects, 0 errors\n", nil},
		{"valid directory", []string{filepath.Join(dir, "good")}, 0, "2 objects, 0 errors\n", nil},
		{"invalid file", []string{invalid}, 1, "1 object, 2 errors\n", []string{
			invalid + `:10: DestinationRule bookinfo/reviews: spec.subsets[1].name: duplicate subset name "v1" (also subsets[0])`,
			invalid + `:13: DestinationRule bookinfo/reviews: spec.trafficPolicy.connectionPool.tcp.maxConnections: must not be negative, not -1`,
			"Error: validation failed",
		}},
		{"mixed directory", []string{dir}, 1, "3 objects, 2 errors\n", []string{
			invalid + ":10: ", invalid + ":13: ", "Error: validation failed",
		}},
		{"missing path", []string{filepath.Join(dir, "nope")}, 1, "", []string{"Error: stat " + filepath.Join(dir, "nope") + ": no such file or directory"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stdout, stderr, code := runValidate(t, tt.args...)
			if code != tt.wantCode {
				t.Errorf("exit code %d, want %d (stderr %q)", code, tt.wantCode, stderr)
			}
			if stdout != tt.wantStdout {
				t.Errorf("stdout %q, want %q", stdout, tt.wantStdout)
			}
			lines := strings.Split(strings.TrimSpace(stderr), "\n")
			if len(lines) != len(tt.wantStderr) && !(len(tt.wantStderr) == 0 && stderr == "") {
				t.Errorf("stderr has %d lines, want %d:\n%s", len(lines), len(tt.wantStderr), stderr)
			}
			for i, want := range tt.wantStderr {
				if i >= len(lines) || !strings.Contains(lines[i], want) {
					t.Errorf("stderr line %d: want %q in:\n%s", i, want, stderr)
				}
			}
		})
	}
}

func TestValidateCommandHelp(t *testing.T) {
	root := newRootCommand()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs([]string{"validate", "--help"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"validate FILE|DIR...", "Examples:", "pilotfish validate ./mesh-config/", "exit status is 1",
		"--strict", "docs/compatibility.md"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("help lacks %q:\n%s", want, out.String())
		}
	}
	if _, _, code := runValidate(t); code != 1 {
		t.Errorf("validate without arguments: exit code %d, want 1", code)
	}
}

// TestValidateUnsupportedFields: a field pilotfish does not support is a
// warning at the field's line naming the object, the path, why and what
// happens instead; validate exits 0, and 1 with --strict.
func TestValidateUnsupportedFields(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vs.yaml")
	if err := os.WriteFile(path, []byte(`apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: reviews
  namespace: shop
spec:
  hosts: [reviews]
  tcp:
  - match:
    - port: 9080
      sourceSubnet: 10.0.0.0/8
    route:
    - destination: {host: reviews}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	warning := path + ":11: warning: VirtualService shop/reviews: spec.tcp[0].match[0].sourceSubnet: not supported by pilotfish: " +
		"matching on the client's subnet is not implemented; the field is ignored\n"

	stdout, stderr, code := runValidate(t, path)
	if code != 0 || stdout != "1 object, 0 errors, 1 warning\n" || stderr != warning {
		t.Errorf("validate: exit %d, stdout %q, stderr %q; want 0, one warning:\n%s", code, stdout, stderr, warning)
	}
	stdout, stderr, code = runValidate(t, "--strict", path)
	if code != 1 || stdout != "1 object, 0 errors, 1 warning\n" || stderr != warning+"Error: validation failed: --strict and 1 warning\n" {
		t.Errorf("validate --strict: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

//go:build unix

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// TestValidateAgreesWithServe: for each directory case that once made
// `validate` and `serve` disagree (or hang, or crash), `pilotfish validate
// config` prints exactly the problems `pilotfish serve --config-dir config`
// shows in /debug/config_errors, and each case's problem is there.
func TestValidateAgreesWithServe(t *testing.T) {
	const vs = "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: reviews, namespace: shop}\n" +
		"spec:\n  hosts: [reviews]\n  http:\n  - route:\n    - destination: {host: reviews}\n"
	svc := func(port string) string {
		return "apiVersion: v1\nkind: Service\nmetadata: {name: reviews, namespace: shop}\nspec:\n  ports: [{port: " + port + ", name: http}]\n"
	}
	type dir struct {
		t    *testing.T
		path string
	}
	write := func(d dir, name, content string) {
		d.t.Helper()
		p := filepath.Join(d.path, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			d.t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			d.t.Fatal(err)
		}
	}
	link := func(d dir, target, name string) {
		d.t.Helper()
		if err := os.Symlink(target, filepath.Join(d.path, name)); err != nil {
			d.t.Fatal(err)
		}
	}
	tests := []struct {
		name     string
		setup    func(d dir)
		after    func(d dir) // run once serve is up: a change to the running server
		wantCode int
		want     string // in both outputs ("" for no problem at all)
		summary  string // validate's stdout
	}{
		{"link to /dev/zero", func(d dir) { write(d, "vs.yaml", vs); link(d, "/dev/zero", "zero.yaml") }, nil,
			1, "config/zero.yaml: not a regular file (a character device); only regular files are read", "1 object, 1 error\n"},
		{"FIFO", func(d dir) {
			write(d, "vs.yaml", vs)
			if err := syscall.Mkfifo(filepath.Join(d.path, "pipe.yaml"), 0o644); err != nil {
				d.t.Fatal(err)
			}
		}, nil, 1, "config/pipe.yaml: not a regular file (a named pipe); only regular files are read", "1 object, 1 error\n"},
		{"symlink loops", func(d dir) { write(d, "vs.yaml", vs); link(d, "loop.yaml", "loop.yaml"); link(d, ".", "self") }, nil,
			1, "config/loop.yaml: symbolic link loop; not read", "1 object, 1 error, 1 warning\n"},
		{"dangling link", func(d dir) { link(d, "gone.yaml", "vs.yaml") }, nil,
			1, "config/vs.yaml: dangling symbolic link: its target gone.yaml does not exist", "0 objects, 1 error\n"},
		{"hidden entries", func(d dir) {
			write(d, ".vs.yaml", "kind: [broken")
			write(d, ".git/config.yaml", "kind: [broken")
			write(d, "vs.yaml", vs)
		}, nil, 0, "", "1 object, 0 errors\n"},
		{"oversized file", func(d dir) {
			write(d, "big.yaml", "")
			if err := os.Truncate(filepath.Join(d.path, "big.yaml"), 16<<20+1); err != nil {
				d.t.Fatal(err)
			}
		}, nil, 1, "config/big.yaml: file is 16777217 bytes, over the limit of 16777216 (16 MiB); not read", "0 objects, 1 error\n"},
		{"ConfigMap volume", func(d dir) {
			write(d, "..2026_01_02_03_04_05.000000001/vs.yaml", vs)
			link(d, "..2026_01_02_03_04_05.000000001", "..data")
			link(d, "..data/vs.yaml", "vs.yaml")
		}, nil, 0, "", "1 object, 0 errors\n"},
		{"duplicate, first file written first", func(d dir) { write(d, "a.yaml", svc("1001")); write(d, "b.yaml", svc("1002")) }, nil,
			1, "config/b.yaml:1: Service shop/reviews: also defined at config/a.yaml:1, which is used (the first definition in path order wins)", "2 objects, 1 error\n"},
		{"duplicate, first file written last", func(d dir) { write(d, "b.yaml", svc("1002")) }, func(d dir) { write(d, "a.yaml", svc("1001")) },
			1, "config/b.yaml:1: Service shop/reviews: also defined at config/a.yaml:1, which is used (the first definition in path order wins)", "2 objects, 1 error\n"},
		{"unknown kind", func(d dir) {
			write(d, "vs.yaml", strings.Replace(vs, "kind: VirtualService", "kind: VirtualServize", 1))
		}, nil,
			1, `config/vs.yaml:2: VirtualServize shop/reviews: kind: unknown kind "VirtualServize" in API group networking.istio.io (did you mean "VirtualService"?)`, "0 objects, 1 error\n"},
		{"unimplemented kind", func(d dir) {
			write(d, "pc.yaml", "apiVersion: networking.istio.io/v1beta1\nkind: ProxyConfig\nmetadata: {name: pc, namespace: shop}\nspec: {}\n")
		}, nil, 0, "config/pc.yaml:1: warning: ProxyConfig shop/pc: not implemented by pilotfish (networking.istio.io/v1beta1); the object is ignored", "0 objects, 0 errors, 1 warning\n"},
		{"EnvoyFilter patches applied", func(d dir) {
			write(d, "ef.yaml", "apiVersion: networking.istio.io/v1alpha3\nkind: EnvoyFilter\nmetadata: {name: ef, namespace: shop}\nspec:\n"+
				"  configPatches: [{applyTo: CLUSTER, match: {cluster: {service: reviews.shop.svc.cluster.local}}, patch: {operation: MERGE, value: {connect_timeout: 3s}}}]\n")
		}, nil, 0, "", "1 object, 0 errors\n"},
		{"EnvoyFilter EXTENSION_CONFIG served over ECDS", func(d dir) {
			write(d, "ef.yaml", "apiVersion: networking.istio.io/v1alpha3\nkind: EnvoyFilter\nmetadata: {name: ef, namespace: shop}\nspec:\n"+
				"  configPatches: [{applyTo: EXTENSION_CONFIG, patch: {operation: ADD, value: {name: ext.lua, typed_config: {'@type': type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua}}}}]\n")
		}, nil, 0, "", "1 object, 0 errors\n"},
		{"EnvoyFilter invalid", func(d dir) {
			write(d, "ef.yaml", "apiVersion: networking.istio.io/v1alpha3\nkind: EnvoyFilter\nmetadata: {name: ef, namespace: shop}\nspec:\n"+
				"  configPatches: [{applyTo: CLUSTER, patch: {operation: MERGE}}]\n")
		}, nil, 1, "config/ef.yaml:5: EnvoyFilter shop/ef: spec.configPatches[0].patch.value: required for operation MERGE (only REMOVE takes none)", "1 object, 1 error\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parent := t.TempDir()
			d := dir{t, filepath.Join(parent, "config")}
			if err := os.Mkdir(d.path, 0o755); err != nil {
				t.Fatal(err)
			}
			tt.setup(d)
			base := startServe(t, d.path)
			if tt.after != nil {
				tt.after(d)
			}
			t.Chdir(parent) // validate config → paths read "config/...", as serve shows them
			stdout, stderr, code := runValidate(t, "config")
			validated := problemLines(stderr)
			if code != tt.wantCode || stdout != tt.summary {
				t.Errorf("validate: exit %d, stdout %q; want %d, %q (stderr %q)", code, stdout, tt.wantCode, tt.summary, stderr)
			}
			var served []string
			eventually(t, "serve reports what validate does", func() string {
				_, b := get(t, base+"/debug/config_errors")
				served = nil
				if err := json.Unmarshal(b, &served); err != nil {
					return err.Error() + ": " + string(b)
				}
				slices.Sort(served)
				if !slices.Equal(served, validated) {
					return "serve:\n" + strings.Join(served, "\n") + "\nvalidate:\n" + strings.Join(validated, "\n")
				}
				return ""
			})
			if tt.want == "" && len(served) > 0 || tt.want != "" && !slices.Contains(served, tt.want) {
				t.Errorf("problems:\n%s\nwant: %q", strings.Join(served, "\n"), tt.want)
			}
			if strings.HasPrefix(tt.name, "duplicate") {
				if v := registry(t, base)["reviews.shop.svc.cluster.local"]; len(v.Ports) != 1 || v.Ports[0].Port != 1001 {
					t.Errorf("serve uses %+v, want a.yaml's port 1001", v.Ports)
				}
			}
		})
	}
}

// problemLines are validate's stderr lines but its closing "Error:" line,
// sorted.
func problemLines(stderr string) []string {
	var out []string
	for l := range strings.Lines(stderr) {
		if l = strings.TrimSuffix(l, "\n"); l != "" && !strings.HasPrefix(l, "Error: ") {
			out = append(out, l)
		}
	}
	slices.Sort(out)
	return out
}

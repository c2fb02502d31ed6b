package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestVersionFlag: `pilotfish --version` and `pilotfish version` print the
// same line, naming the version.
func TestVersionFlag(t *testing.T) {
	var outs []string
	for _, args := range [][]string{{"--version"}, {"version"}} {
		root := newRootCommand()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetArgs(args)
		if err := root.Execute(); err != nil {
			t.Fatalf("pilotfish %s: %v", args[0], err)
		}
		outs = append(outs, out.String())
	}
	if outs[0] != outs[1] || !strings.HasPrefix(outs[0], "pilotfish "+version+" (commit ") {
		t.Errorf("--version printed %q, version printed %q; want the same line naming %q", outs[0], outs[1], version)
	}
}

// TestMakeBuildStampsVersion: the binary `make build` links reports the
// version it was given, not "dev".
func TestMakeBuildStampsVersion(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "pilotfish")
	cmd := exec.Command("make", "--no-print-directory", "-C", root, "build", "BIN="+bin, "VERSION=v9.8.7-test")
	cmd.Env = append(os.Environ(), "MAKEFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		t.Fatalf("pilotfish --version: %v", err)
	}
	if !strings.HasPrefix(string(out), "pilotfish v9.8.7-test (commit ") {
		t.Errorf("pilotfish --version = %q, want the stamped v9.8.7-test", out)
	}
}

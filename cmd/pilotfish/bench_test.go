package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runBenchCmd runs `pilotfish bench args...` in-process.
func runBenchCmd(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	root := newRootCommand()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(append([]string{"bench"}, args...))
	err = root.Execute()
	return out.String(), errOut.String(), err
}

// TestBenchCommand runs one small scenario against pilotfish and the
// LinearCache baseline, with loadgen in the test process (the child client
// would be this test binary, which has no `bench client` entry point).
func TestBenchCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers")
	}
	js := filepath.Join(t.TempDir(), "bench.json")
	stdout, stderr, err := runBenchCmd(t, "--client", "inprocess", "--scenario", "connect,change", "--server", "pilotfish,linear",
		"--services", "5", "--proxies", "5", "--changes", "1", "--json", js)
	if err != nil {
		t.Fatalf("%v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
	}
	for _, want := range []string{"http, 5 services; 5 proxies", "loadgen in this process", "pf/linear", "convergence p50", "all proxies at full config"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	if !strings.Contains(stderr, "bench: pilotfish: 5 proxies connect") {
		t.Errorf("no progress on stderr:\n%s", stderr)
	}
	b, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Workload string `json:"workload"`
		Servers  []struct {
			Server string `json:"server"`
		} `json:"servers"`
		Ratios []struct {
			Scenario string  `json:"scenario"`
			Metric   string  `json:"metric"`
			Baseline string  `json:"baseline"`
			Value    float64 `json:"pilotfish_over_baseline"`
		} `json:"ratios"`
	}
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	if res.Workload != "http" || len(res.Servers) != 2 || len(res.Ratios) == 0 {
		t.Errorf("JSON: %+v", res)
	}
	for _, r := range res.Ratios {
		if r.Baseline != "linear" || r.Value <= 0 {
			t.Errorf("ratio %+v", r)
		}
	}
}

func TestBenchCommandErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--client", "remote"}, "--client"},
		{[]string{"--client", "inprocess", "--scenario", "nope"}, "unknown scenario"},
		{[]string{"--client", "inprocess", "--server", "istiod"}, "unknown server"},
		{[]string{"--client", "inprocess", "--workload", "no-such"}, "neither a directory nor an istio-bench workload"},
		{[]string{"extra"}, "unknown command"},
	} {
		_, _, err := runBenchCmd(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want %q", c.args, err, c.want)
		}
	}
}

// TestBenchWorkloadServes: `pilotfish bench workload http` prints the
// rendered workload, and serve reads it without an error: one service per
// ServiceEntry (plus the proxy's own).
func TestBenchWorkloadServes(t *testing.T) {
	root := newRootCommand()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs([]string{"bench", "workload", "http", "--services", "7"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "http.yaml"), out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	base := startServe(t, dir)
	if _, b := get(t, base+"/debug/config_errors"); strings.Contains(string(b), "http.yaml") {
		t.Fatalf("config errors: %s", b)
	}
	if got := len(registry(t, base)); got != 8 {
		t.Errorf("registry holds %d services, want 8 (7 + the proxy's own)", got)
	}
	root = newRootCommand()
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs([]string{"bench", "workload", "no-such-workload"})
	if err := root.Execute(); err == nil || !strings.Contains(err.Error(), "no-such-workload") {
		t.Errorf("unknown workload: %v, want an error naming it", err)
	}
}

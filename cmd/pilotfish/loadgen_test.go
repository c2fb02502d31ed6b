package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The loadgen tests serve the same one-service mesh as serve_test.go (svcYAML).

const loadgenRatings = `apiVersion: v1
kind: Service
metadata:
  name: ratings
  namespace: shop
spec:
  clusterIP: 10.96.0.11
  selector:
    app: ratings
  ports:
  - name: http
    port: 9080
`

// startPilotfish runs `pilotfish serve` in-process on dir and returns its
// xDS address.
func startPilotfish(t *testing.T, dir string) string {
	t.Helper()
	return startPilotfishAddrs(t, dir).grpcAddr.String()
}

// startPilotfishAddrs runs `pilotfish serve` in-process on dir and returns
// its addresses.
func startPilotfishAddrs(t *testing.T, dir string) started {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addrs := make(chan started, 1)
	done := make(chan error, 1)
	o := &serveOptions{configDir: dir, grpcAddr: "127.0.0.1:0", httpAddr: "127.0.0.1:0", domain: "cluster.local",
		logLevel: "error", debounceAfter: 10 * time.Millisecond, debounceMax: time.Second, enableEDSDebounce: true,
		pushThrottle: 100, resync: 200 * time.Millisecond, shutdownGrace: time.Second}
	go func() { done <- runServe(ctx, o, func(s started) { addrs <- s }) }()
	var s started
	select {
	case s = <-addrs:
	case err := <-done:
		t.Fatalf("serve exited: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not start")
	}
	t.Cleanup(func() {
		cancel()
		<-done
	})
	waitReady(t, "http://"+s.httpAddr.String()) // xDS streams are refused before
	return s
}

// loadgenJSON is the part of the JSON report the tests read.
type loadgenJSON struct {
	Complete         bool `json:"complete"`
	Proxies          int  `json:"proxies"`
	FullConfig       int  `json:"full_config"`
	TimeToFullConfig struct {
		Count int     `json:"count"`
		P99MS float64 `json:"p99_ms"`
	} `json:"time_to_full_config"`
	Types []struct {
		Type    string `json:"type"`
		Bytes   int64  `json:"bytes"`
		NACKs   int64  `json:"nacks"`
		Invalid int64  `json:"invalid"`
		HeldMin int    `json:"held_min"`
		HeldMax int    `json:"held_max"`
	} `json:"types"`
	Changes []struct {
		Converged    int    `json:"converged"`
		NotConverged int    `json:"not_converged"`
		Expect       string `json:"expect"`
	} `json:"changes"`
}

func runLoadgenCmd(t *testing.T, args ...string) (stdout string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	root := newRootCommand()
	root.SetArgs(append([]string{"loadgen", "--quiet"}, args...))
	root.SetOut(&out)
	root.SetErr(&errOut)
	err = root.Execute()
	if errOut.Len() > 0 {
		t.Logf("stderr: %s", errOut.String())
	}
	return out.String(), err
}

func readLoadgenJSON(t *testing.T, path string) loadgenJSON {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var r loadgenJSON
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestLoadgenAgainstPilotfish drives `pilotfish serve` with `pilotfish
// loadgen`: sidecars over SotW and Delta with full decoding (every resource
// validated) reach full config; adding a Service file converges on every
// proxy; proxyless gRPC clients follow their target listener.
func TestLoadgenAgainstPilotfish(t *testing.T) {
	for _, mode := range []string{"sotw", "delta"} {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "mesh.yaml"), []byte(svcYAML), 0o644); err != nil {
				t.Fatal(err)
			}
			ratings := filepath.Join(t.TempDir(), "ratings.yaml")
			if err := os.WriteFile(ratings, []byte(loadgenRatings), 0o644); err != nil {
				t.Fatal(err)
			}
			addr := startPilotfish(t, dir)
			out := t.TempDir()
			stdout, err := runLoadgenCmd(t, "--xds", addr, "--proxies", "30", "--mode", mode, "--decode", "full",
				"--namespaces", "3", "--apps", "4", "--timeout", "60s", "--change-interval", "100ms",
				"--change-cmd", "cp "+ratings+" "+dir+"/ratings.yaml",
				"--expect-resource", "cds/outbound|9080||ratings.shop.svc.cluster.local",
				"--json", filepath.Join(out, "r.json"), "--html", filepath.Join(out, "r.html"))
			if err != nil {
				t.Fatalf("loadgen: %v\n%s", err, stdout)
			}
			if !strings.Contains(stdout, "time to full config") || !strings.Contains(stdout, "converged on 30/30") {
				t.Errorf("table:\n%s", stdout)
			}
			r := readLoadgenJSON(t, filepath.Join(out, "r.json"))
			if !r.Complete || r.FullConfig != 30 || r.TimeToFullConfig.Count != 30 {
				t.Errorf("report: %+v", r)
			}
			if len(r.Changes) != 1 || r.Changes[0].Converged != 30 {
				t.Errorf("changes: %+v", r.Changes)
			}
			held := map[string][2]int{}
			for _, ts := range r.Types {
				held[ts.Type] = [2]int{ts.HeldMin, ts.HeldMax}
				if ts.Invalid != 0 || ts.NACKs != 0 {
					t.Errorf("%s: %d invalid resources, %d NACKs", ts.Type, ts.Invalid, ts.NACKs)
				}
			}
			// After the change every proxy holds the new outbound cluster
			// and its (empty) endpoints besides reviews'.
			if held["eds"] != [2]int{2, 2} || held["rds"][0] < 1 || held["lds"][0] < 1 || held["cds"][0] < 2 {
				t.Errorf("held per proxy: %v", held)
			}
			html, err := os.ReadFile(filepath.Join(out, "r.html"))
			if err != nil || !bytes.Contains(html, []byte("<svg")) {
				t.Errorf("HTML report: %v", err)
			}
		})
	}
	t.Run("grpc", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "mesh.yaml"), []byte(svcYAML), 0o644); err != nil {
			t.Fatal(err)
		}
		addr := startPilotfish(t, dir)
		jsonPath := filepath.Join(t.TempDir(), "r.json")
		stdout, err := runLoadgenCmd(t, "--xds", addr, "--proxies", "10", "--type", "grpc",
			"--grpc-targets", "reviews.shop.svc.cluster.local:9080", "--timeout", "30s", "--json", jsonPath)
		if err != nil {
			t.Fatalf("loadgen: %v\n%s", err, stdout)
		}
		r := readLoadgenJSON(t, jsonPath)
		for _, ts := range r.Types {
			if ts.Type != "other" && (ts.HeldMin != 1 || ts.HeldMax != 1) {
				t.Errorf("%s held %d..%d, want 1", ts.Type, ts.HeldMin, ts.HeldMax)
			}
		}
	})
}

// TestLoadgenIncomplete: a proxy that never gets full config (a gRPC target
// nobody serves) makes the command exit 1 after printing the report.
func TestLoadgenIncomplete(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "mesh.yaml"), []byte(svcYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := startPilotfish(t, dir)
	stdout, err := runLoadgenCmd(t, "--xds", addr, "--proxies", "2", "--type", "grpc",
		"--grpc-targets", "nobody.shop.svc.cluster.local:80", "--timeout", "500ms")
	if exitCode(err) != 1 || !strings.Contains(stdout, "INCOMPLETE") {
		t.Fatalf("err %v (exit %d), stdout:\n%s", err, exitCode(err), stdout)
	}
}

func TestLoadgenFlagErrors(t *testing.T) {
	for name, args := range map[string][]string{
		"no xds":         {"--proxies", "1"},
		"bad type":       {"--xds", "127.0.0.1:1", "--type", "mesh"},
		"bad mode":       {"--xds", "127.0.0.1:1", "--mode", "incremental"},
		"bad ip":         {"--xds", "127.0.0.1:1", "--ip-base", "ten"},
		"bad expect":     {"--xds", "127.0.0.1:1", "--expect-resource", "clusters/x"},
		"grpc no target": {"--xds", "127.0.0.1:1", "--type", "grpc"},
		"bad log level":  {"--xds", "127.0.0.1:1", "--log-level", "loud"},
		"metrics url":    {"--xds", "127.0.0.1:1", "--server-metrics", "127.0.0.1:15014/metrics"},
		"server pid":     {"--xds", "127.0.0.1:1", "--server-pid", "-1"},
		"no such pid":    {"--xds", "127.0.0.1:1", "--server-pid", "1073741824"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := runLoadgenCmd(t, args...)
			var ee *exitError
			if err == nil || errors.As(err, &ee) {
				t.Errorf("err = %v, want a usage error", err)
			}
		})
	}
}

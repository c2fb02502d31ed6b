package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLoadgenFaultyProxies: `pilotfish loadgen --stall-proxies
// --nack-proxies` against pilotfish. The healthy proxies reach full config
// and converge on a change whatever the stalled ones do; the NACKing ones
// are left out of the figures, and each gets exactly one response per
// change: pilotfish never resends what they rejected.
func TestLoadgenFaultyProxies(t *testing.T) {
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
			out := filepath.Join(t.TempDir(), "r.json")
			stdout, err := runLoadgenCmd(t, "--xds", addr, "--proxies", "20", "--mode", mode,
				"--stall-proxies", "3", "--nack-proxies", "2", "--timeout", "60s", "--change-interval", "300ms",
				"--change-cmd", "cp "+ratings+" "+dir+"/ratings.yaml",
				"--expect-resource", "cds/outbound|9080||ratings.shop.svc.cluster.local", "--json", out)
			if err != nil {
				t.Fatalf("loadgen: %v\n%s", err, stdout)
			}
			if !strings.Contains(stdout, "converged on 15/15") || !strings.Contains(stdout, "3 stalled after full config, 2 NACKing") {
				t.Errorf("table:\n%s", stdout)
			}
			b, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			var r struct {
				Complete   bool `json:"complete"`
				FullConfig int  `json:"full_config"`
				Changes    []struct {
					Converged       int   `json:"converged"`
					NotConverged    int   `json:"not_converged"`
					NackingReceived int64 `json:"nacking_received"`
				} `json:"changes"`
				Faults struct {
					Stalled, Nacking int
					NackingReceived  int64 `json:"nacking_received"`
				} `json:"faults"`
				Types []struct {
					Type  string `json:"type"`
					NACKs int64  `json:"nacks"`
				} `json:"types"`
				NACKs struct {
					Total            int64 `json:"total"`
					AtRate           int64 `json:"at_rate"`
					ByNackingProxies int64 `json:"by_nacking_proxies"`
				} `json:"nacks"`
				Timeline []struct {
					Stalled, Nacking int
				} `json:"timeline"`
			}
			if err := json.Unmarshal(b, &r); err != nil {
				t.Fatal(err)
			}
			// The stalled proxies reach full config; the NACKing ones cannot.
			if !r.Complete || r.FullConfig != 18 {
				t.Errorf("complete %v, full config %d (want 18: 15 healthy + 3 stalled)", r.Complete, r.FullConfig)
			}
			if len(r.Changes) != 1 || r.Changes[0].Converged != 15 || r.Changes[0].NotConverged != 0 {
				t.Fatalf("changes: %+v", r.Changes)
			}
			if r.Faults.Stalled != 3 || r.Faults.Nacking != 2 {
				t.Errorf("faults: %+v", r.Faults)
			}
			// Having accepted no CDS, a NACKing proxy subscribes to CDS
			// only (Envoy's order): one response at connect, then exactly
			// one per change, never a resend of what it rejected.
			if got := r.Changes[0].NackingReceived; got != 2 {
				t.Errorf("the 2 NACKing proxies received %d responses in the change, want exactly 1 each", got)
			}
			if r.Faults.NackingReceived != 4 {
				t.Errorf("the NACKing proxies received %d responses in all, want 4 (1 at connect and 1 for the change, each)", r.Faults.NackingReceived)
			}
			// Every response they received was NACKed; no other proxy NACKed.
			if n := r.NACKs; n.Total != 4 || n.ByNackingProxies != 4 || n.AtRate != 0 {
				t.Errorf("NACKs %+v, want the NACKing proxies' 4", n)
			}
			// At the end of the run the timeline shows the stalled proxies
			// not reading and the NACKing ones on a rejected response.
			if last := r.Timeline[len(r.Timeline)-1]; last.Stalled != 3 || last.Nacking != 2 {
				t.Errorf("last sample: %d stalled, %d NACKing; want 3 and 2", last.Stalled, last.Nacking)
			}
		})
	}
}

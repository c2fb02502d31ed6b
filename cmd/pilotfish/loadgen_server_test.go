package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestLoadgenNackRateAgainstPilotfish: `pilotfish loadgen --nack-rate 0.3`
// ends against pilotfish, which (rightly) does not resend a rejected
// response: a NACKed response counts as delivered, for full config and for
// the change. Given pilotfish's metrics URL and PID, the report carries the
// server's samples (JSON) and charts (HTML); pilotfish counted every NACK
// loadgen sent and sent every response loadgen received; the table, JSON
// and HTML show one NACK count.
func TestLoadgenNackRateAgainstPilotfish(t *testing.T) {
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
			srv := startPilotfishAddrs(t, dir)
			out := t.TempDir()
			jsonPath, htmlPath := filepath.Join(out, "r.json"), filepath.Join(out, "r.html")
			stdout, err := runLoadgenCmd(t, "--xds", srv.grpcAddr.String(), "--proxies", "30", "--mode", mode,
				"--nack-rate", "0.3", "--seed", "7", "--timeout", "60s", "--change-interval", "500ms",
				"--change-cmd", "cp "+ratings+" "+dir+"/ratings.yaml",
				"--expect-resource", "cds/outbound|9080||ratings.shop.svc.cluster.local",
				"--server-metrics", "http://"+srv.httpAddr.String()+"/metrics", "--server-pid", strconv.Itoa(os.Getpid()),
				"--server-sample-interval", "50ms", "--json", jsonPath, "--html", htmlPath)
			if err != nil {
				t.Fatalf("loadgen: %v\n%s", err, stdout)
			}
			b, err := os.ReadFile(jsonPath)
			if err != nil {
				t.Fatal(err)
			}
			var r struct {
				Complete   bool `json:"complete"`
				FullConfig int  `json:"full_config"`
				Types      []struct {
					Responses, NACKs int64
				} `json:"types"`
				Changes []struct {
					Converged int `json:"converged"`
				} `json:"changes"`
				NACKs struct {
					Total            int64 `json:"total"`
					AtRate           int64 `json:"at_rate"`
					ProxiesRejecting int   `json:"proxies_rejecting"`
				} `json:"nacks"`
				Server *struct {
					Measures []string `json:"measures"`
					Errors   int      `json:"errors"`
					Pushes   int64    `json:"pushes"`
					Rejects  int64    `json:"rejects"`
					Samples  []struct {
						RSSBytes   int64   `json:"rss_bytes"`
						CPUSeconds float64 `json:"cpu_seconds"`
					} `json:"samples"`
				} `json:"server"`
			}
			if err := json.Unmarshal(b, &r); err != nil {
				t.Fatal(err)
			}
			if !r.Complete || r.FullConfig != 30 || len(r.Changes) != 1 || r.Changes[0].Converged != 30 {
				t.Fatalf("complete %v, full config %d, changes %+v\n%s", r.Complete, r.FullConfig, r.Changes, stdout)
			}
			var responses int64
			for _, ty := range r.Types {
				responses += ty.Responses
			}
			// 30 proxies answer about 4 types and a change at rate 0.3.
			if n := r.NACKs; n.Total < 15 || n.AtRate != n.Total || n.ProxiesRejecting == 0 {
				t.Errorf("NACKs %+v", n)
			}
			s := r.Server
			if s == nil || s.Errors != 0 || len(s.Samples) < 3 {
				t.Fatalf("server stats %+v", s)
			}
			for _, m := range []string{"cpu_seconds", "rss_bytes", "pushes", "rejects"} {
				if !slices.Contains(s.Measures, m) {
					t.Errorf("server measures %v lack %s", s.Measures, m)
				}
			}
			if s.Rejects != r.NACKs.Total || s.Pushes != responses {
				t.Errorf("pilotfish counted %d rejects and %d pushes; loadgen sent %d NACKs and received %d responses",
					s.Rejects, s.Pushes, r.NACKs.Total, responses)
			}
			if last := s.Samples[len(s.Samples)-1]; last.RSSBytes <= 0 || last.CPUSeconds <= 0 {
				t.Errorf("last server sample %+v", last)
			}

			page, err := os.ReadFile(htmlPath)
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"<h2>Pushes: sent by the server, received by loadgen</h2>", "<h2>CPU: server and loadgen</h2>",
				"<h2>Memory: server and loadgen</h2>", "<h2>Stalled and NACKing proxies</h2>", `&#34;name&#34;:&#34;server sent&#34;`,
				`&#34;name&#34;:&#34;server RSS&#34;`} {
				if !strings.Contains(string(page), want) {
					t.Errorf("HTML report lacks %s", want)
				}
			}
			counts := map[string]string{
				"table total row":  submatch(`(?m)^\s*total\s+\d+\s+\d+\s+\S+ \S+\s+\d+\s+(\d+)`, stdout),
				"table NACKs line": submatch(`(?m)^NACKs: (\d+) \(`, stdout),
				"html card":        submatch(`<div class="label">NACKs</div><div class="value">(\d+)</div>`, string(page)),
				"html total row":   submatch(`<tr><td>total</td>(?:<td>[^<]*</td>){4}<td>(\d+)</td>`, string(page)),
				"html NACK table":  submatch(`<tr><td>NACKs sent</td><td>(\d+)</td>`, string(page)),
				"html server":      submatch(`<tr><td>rejects counted by the server</td><td>(\d+)</td>`, string(page)),
			}
			want := strconv.FormatInt(r.NACKs.Total, 10)
			for where, got := range counts {
				if got != want {
					t.Errorf("%s: %q NACKs, JSON %s", where, got, want)
				}
			}
		})
	}
}

func submatch(re, s string) string {
	if m := regexp.MustCompile(re).FindStringSubmatch(s); m != nil {
		return m[1]
	}
	return ""
}

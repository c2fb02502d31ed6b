package bench

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pilotfish-mesh/pilotfish/inject"
)

// TestRunInject drives a real injection webhook (inject's, over TLS) with
// the corpus: every request is answered and counted by its answer, the
// same as the webhook answers each review, and this process's CPU and
// RSS are read.
func TestRunInject(t *testing.T) {
	reviews, err := InjectCorpus(filepath.Join("..", "inject", "testdata", "corpus"))
	if err != nil {
		t.Fatal(err)
	}
	if len(reviews) < 40 {
		t.Fatalf("%d corpus reviews, want the corpus's 42", len(reviews))
	}
	chart := filepath.Join("..", "inject", "testdata", "chart", "default")
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(chart, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	cfg, err := inject.ParseConfig(read("config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	vals, err := inject.ParseValues(read("values.json"))
	if err != nil {
		t.Fatal(err)
	}
	mesh, err := inject.ParseMesh(read("mesh.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	in, err := inject.New(&inject.Settings{Config: cfg, Values: vals, Mesh: mesh}, nil)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(inject.Path, inject.NewWebhook(in, nil, nil))
	srv := httptest.NewTLSServer(mux)
	defer srv.Close()
	// What each review gets, asked one by one.
	var want InjectResult
	for _, r := range reviews {
		kind, err := postReview(context.Background(), srv.Client(), srv.URL+inject.Path, r)
		if err != nil {
			t.Fatal(err)
		}
		switch kind {
		case reviewPatched:
			want.Patched++
		case reviewAllowed:
			want.Allowed++
		default:
			want.Denied++
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := RunInject(ctx, InjectOptions{Reviews: reviews, Concurrency: 8, Requests: len(reviews), Rounds: 2, Warmup: 5,
		Targets: []InjectTarget{{Name: "inject", URL: srv.URL + inject.Path, PID: os.Getpid()}}})
	if err != nil {
		t.Fatal(err)
	}
	r := res[0]
	if r.Requests != 2*len(reviews) || r.Errors != 0 || r.Patched != 2*want.Patched || r.Allowed != 2*want.Allowed || r.Denied != 2*want.Denied {
		t.Errorf("result %+v, want %d requests, patched/allowed/denied %d/%d/%d twice", r, 2*len(reviews), want.Patched, want.Allowed, want.Denied)
	}
	if want.Patched == 0 || want.Allowed == 0 || want.Denied == 0 {
		t.Errorf("the corpus should hold injected, skipped and denied pods: %+v", want)
	}
	if r.CPUSeconds < 0 || r.RSSAfter <= 0 || r.P99 < r.P50 || r.P50 <= 0 {
		t.Errorf("figures %+v", r)
	}
	if _, err := RunInject(ctx, InjectOptions{Reviews: reviews, Requests: 1,
		Targets: []InjectTarget{{Name: "gone", URL: srv.URL, PID: 1 << 30}}}); err == nil {
		t.Error("a target whose process cannot be read was accepted")
	}
}

package ingest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pilotfish-mesh/pilotfish/index"
)

// writeMeshDir writes n files of a Service, its EndpointSlice and a
// VirtualService each, in n/100 folders.
func writeMeshDir(tb testing.TB, dir string, n int) {
	tb.Helper()
	for i := range n {
		name := fmt.Sprintf("svc-%d", i)
		doc := strings.ReplaceAll(testService+"---\n"+testSlice, "reviews", name) + "---\n" +
			"apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: " + name + ", namespace: shop}\n" +
			"spec:\n  hosts: [" + name + "]\n  http:\n  - route:\n    - destination: {host: " + name + "}\n"
		p := filepath.Join(dir, fmt.Sprintf("ns-%d", i/100), name+".yaml")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(doc), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
}

// BenchmarkFileSourceFirstSync: a server's start on a directory of 1,000
// files (3,000 objects); objects/s is the figure.
func BenchmarkFileSourceFirstSync(b *testing.B) {
	dir := b.TempDir()
	writeMeshDir(b, dir, 1000)
	b.ReportAllocs()
	for b.Loop() {
		src := NewFileSource(index.NewWriter(), FileSourceOptions{Dir: dir, Resync: -1})
		if _, err := src.Sync(); err != nil {
			b.Fatal(err)
		}
		if errs := src.Errors(); len(errs) > 0 {
			b.Fatal(errs[0])
		}
	}
	b.ReportMetric(float64(3000*b.N)/b.Elapsed().Seconds(), "objects/s")
}

// TestFileSourceFirstSyncSmall is the benchmark's setup at a small size,
// checked: every object applied, no error.
func TestFileSourceFirstSyncSmall(t *testing.T) {
	dir := t.TempDir()
	writeMeshDir(t, dir, 150)
	w := index.NewWriter()
	src := NewFileSource(w, FileSourceOptions{Dir: dir, Resync: -1})
	if _, err := src.Sync(); err != nil {
		t.Fatal(err)
	}
	if errs := src.Errors(); len(errs) > 0 {
		t.Fatal(errs)
	}
	if n := w.Snapshot().NumServices(); n != 150 {
		t.Fatalf("%d services, want 150", n)
	}
}

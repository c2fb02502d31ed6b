package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/engine"
	"github.com/pilotfish-mesh/pilotfish/index"
	"github.com/pilotfish-mesh/pilotfish/internal/istiobench"
	"github.com/pilotfish-mesh/pilotfish/meshconfig"
)

// extrasDir holds the ten EnvoyFilters and the mesh-wide Telemetry the
// issue's measurements add to istio-bench http (written for loadgen's
// namespace load-0, app=load-0).
var extrasDir = filepath.Join("..", "cmd", "pilotfish", "testdata", "config-vs-istiod")

// extrasFor returns the extras for the benchmark node: a sidecar in
// default labelled app=load-0 (node), so load-0's filters move to default.
func extrasFor(tb testing.TB) []byte {
	var out []byte
	for _, f := range []string{"envoyfilters.yaml", "telemetry.yaml"} {
		b, err := os.ReadFile(filepath.Join(extrasDir, f))
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, bytes.ReplaceAll(b, []byte("namespace: load-0"), []byte("namespace: default"))...)
		out = append(out, "\n---\n"...)
	}
	return out
}

// chartMesh is the mesh of istiod's chart (defaultProviders.metrics:
// prometheus), as TestFullConfigVersusIstiod gives both servers.
func chartMesh(tb testing.TB) *encode.Mesh {
	b, err := os.ReadFile(filepath.Join("..", "inject", "testdata", "chart", "default", "mesh.yaml"))
	if err != nil {
		tb.Fatal(err)
	}
	cfg, _, err := meshconfig.Parse(b)
	if err != nil {
		tb.Fatal(err)
	}
	m, err := engine.MeshSettings{Config: cfg}.Mesh()
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

// BenchmarkProxyConfigExtras: BenchmarkProxyConfigCold and Warm (and cold
// without EDS) on istio-bench http with the chart's mesh, plain and with
// the ten EnvoyFilters and the mesh-wide Telemetry of the issue's
// measurements (docs/benchmarks.md, "EnvoyFilter and Telemetry").
func BenchmarkProxyConfigExtras(b *testing.B) {
	for _, services := range []int{100, 1000} {
		for _, extras := range []bool{false, true} {
			name := fmt.Sprintf("http/services=%d/extras=%v", services, extras)
			w, eds, rds := setupExtras(b, services, extras)
			mesh := chartMesh(b)
			// cold-noeds is cold without EDS: the types istiod's own
			// generation benchmarks produce (CDS, LDS, RDS), for a
			// like-for-like ratio.
			for _, variant := range []struct {
				name string
				eds  []string
			}{{"cold", eds}, {"cold-noeds", nil}} {
				b.Run(variant.name+"/"+name, func(b *testing.B) {
					benchCold(b, w, mesh, variant.eds, rds)
				})
			}
			b.Run("warm/"+name, func(b *testing.B) {
				benchWarm(b, w, mesh, eds, rds)
			})
		}
	}
}

// setupExtras is setup for http at services, with the extras when asked.
func setupExtras(tb testing.TB, services int, extras bool) (*index.Writer, []string, []string) {
	y, err := istiobench.Render("http", istiobench.Params{Services: services})
	if err != nil {
		tb.Fatal(err)
	}
	if extras {
		y = append(append(y, "\n---\n"...), extrasFor(tb)...)
	}
	w := index.NewWriter()
	if err := Load(w, y); err != nil {
		tb.Fatal(err)
	}
	e := engine.New(w, engine.Options{Cache: encode.NewCache(), Mesh: chartMesh(tb)})
	c, err := e.Connect(context.Background(), node("10.0.0.1", "pod-0"), "")
	if err != nil {
		tb.Fatal(err)
	}
	eds, rds := subscriptions(tb, c)
	return w, eds, rds
}

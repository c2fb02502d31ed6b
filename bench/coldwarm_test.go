package bench

import (
	"context"
	"testing"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/engine"
	"github.com/pilotfish-mesh/pilotfish/index"
)

// The two measurements every proxy-config benchmark makes, on an index
// already loaded: cold, a first proxy's full config from empty caches
// (a new engine per iteration); warm, the full config of a second proxy
// of the class once the first filled them. mesh nil is the default mesh.
// Both report resources/proxy and bytes/proxy.

// configFetch fetches a proxy's config (fullConfig, or a part of it) and
// returns its resources and bytes.
type configFetch func(tb testing.TB, c *engine.Conn, eds, rds []string) (n, bytes int)

// benchCold measures a first proxy's full config (eds names the EDS
// subscriptions: nil leaves EDS out); it returns the last iteration's
// connection, for checks after the loop.
func benchCold(b *testing.B, w *index.Writer, mesh *encode.Mesh, eds, rds []string) *engine.Conn {
	return benchColdOf(b, w, mesh, fullConfig, eds, rds)
}

// benchWarm measures a second proxy's full config after a first one's.
func benchWarm(b *testing.B, w *index.Writer, mesh *encode.Mesh, eds, rds []string) {
	benchWarmOf(b, w, mesh, fullConfig, eds, rds)
}

// benchColdOf is benchCold fetching with fetch.
func benchColdOf(b *testing.B, w *index.Writer, mesh *encode.Mesh, fetch configFetch, eds, rds []string) *engine.Conn {
	b.ReportAllocs()
	var n, size int
	var c *engine.Conn
	for b.Loop() {
		c = connectProxy(b, newBenchEngine(w, mesh), "10.0.0.1", "pod-0")
		n, size = fetch(b, c, eds, rds)
	}
	reportConfig(b, n, size)
	return c
}

// benchWarmOf is benchWarm fetching with fetch.
func benchWarmOf(b *testing.B, w *index.Writer, mesh *encode.Mesh, fetch configFetch, eds, rds []string) {
	e := newBenchEngine(w, mesh)
	fetch(b, connectProxy(b, e, "10.0.0.1", "pod-0"), eds, rds)
	second := connectProxy(b, e, "10.0.0.2", "pod-1")
	b.ReportAllocs()
	var n, size int
	for b.Loop() {
		n, size = fetch(b, second, eds, rds)
	}
	reportConfig(b, n, size)
}

// newBenchEngine is an engine over w with an empty cache, verify mode off
// (it regenerates every hit).
func newBenchEngine(w *index.Writer, mesh *encode.Mesh) *engine.Engine {
	cache := encode.NewCache()
	cache.SetVerify(false)
	return engine.New(w, engine.Options{Cache: cache, Mesh: mesh})
}

// connectProxy connects the benchmark sidecar with this IP and pod name.
func connectProxy(tb testing.TB, e *engine.Engine, ip, pod string) *engine.Conn {
	c, err := e.Connect(context.Background(), node(ip, pod), "")
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

func reportConfig(b *testing.B, n, size int) {
	b.ReportMetric(float64(n), "resources/proxy")
	b.ReportMetric(float64(size), "bytes/proxy")
}

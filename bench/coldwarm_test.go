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

// benchCold measures a first proxy's full config (eds names the EDS
// subscriptions: nil leaves EDS out).
func benchCold(b *testing.B, w *index.Writer, mesh *encode.Mesh, eds, rds []string) {
	b.ReportAllocs()
	var n, size int
	for b.Loop() {
		c := connectProxy(b, newBenchEngine(w, mesh), "10.0.0.1", "pod-0")
		n, size = fullConfig(b, c, eds, rds)
	}
	reportConfig(b, n, size)
}

// benchWarm measures a second proxy's full config after a first one's.
func benchWarm(b *testing.B, w *index.Writer, mesh *encode.Mesh, eds, rds []string) {
	e := newBenchEngine(w, mesh)
	fullConfig(b, connectProxy(b, e, "10.0.0.1", "pod-0"), eds, rds)
	second := connectProxy(b, e, "10.0.0.2", "pod-1")
	b.ReportAllocs()
	var n, size int
	for b.Loop() {
		n, size = fullConfig(b, second, eds, rds)
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

package engine_test

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/pilotfish-mesh/pilotfish/engine"
	"github.com/pilotfish-mesh/pilotfish/inject"
	"github.com/pilotfish-mesh/pilotfish/internal/scenario"
	"github.com/pilotfish-mesh/pilotfish/serve"
)

const tracingPushTelemetry = `apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {name: mesh-default, namespace: istio-system}
spec:
  tracing:
  - providers: [{name: zipkin}]
    randomSamplingPercentage: 7
`

// TestTelemetryTracingPushes runs a real ADS client for a sidecar whose
// scope is its own namespace, in a mesh with a zipkin provider but no
// default tracing provider and enableTracing false: no tracing at first;
// a root Telemetry naming zipkin gives the tracer (with the Istio tags)
// when the service appears, though
// the sidecar's scope does not hold it; deleting the Telemetry takes
// tracing away.
func TestTelemetryTracingPushes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cfg, err := inject.ParseMesh([]byte("enableTracing: false\nextensionProviders:\n- {name: zipkin, zipkin: {service: zipkin.observability.svc.cluster.local, port: 9411}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	mesh, err := engine.MeshSettings{Config: cfg}.Mesh()
	if err != nil {
		t.Fatal(err)
	}
	sm := scenario.NewMesh()
	if err := sm.Apply("config.yaml", []byte(tracingPushConfig)); err != nil {
		t.Fatal(err)
	}
	eng := engine.New(sm.W, engine.Options{DebounceAfter: 5 * time.Millisecond, DebounceMax: 50 * time.Millisecond, Mesh: mesh})
	runCtx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); eng.Run(runCtx) }()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(serve.ServerOptions()...)
	serve.NewXDSServer(e2eBackend{eng}, serve.XDSOptions{}).Register(gs)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(func() { gs.Stop(); stop(); wg.Wait() })

	c := newMeshClient(t, ctx, lis.Addr().String(), "sidecar~10.1.0.40~reviews-1.shop~shop.svc.cluster.local", "shop")
	const tracer, cluster = "envoy.tracers.zipkin", "outbound|9411||zipkin.observability.svc.cluster.local"
	c.waitFor(t, ctx, "listeners", func() bool { return c.has(engine.TypeListener, "0.0.0.0_9080") })
	if c.has(engine.TypeListener, tracer) || c.has(engine.TypeListener, "istio.canonical_service") {
		t.Fatal("tracing before any Telemetry")
	}
	if err := sm.Apply("telemetry.yaml", []byte(tracingPushTelemetry)); err != nil {
		t.Fatal(err)
	}
	if err := sm.Apply("zipkin.yaml", []byte(tracingPushService)); err != nil {
		t.Fatal(err)
	}
	c.waitFor(t, ctx, "the Telemetry's zipkin tracer once its service exists", func() bool {
		return c.has(engine.TypeListener, tracer) && c.has(engine.TypeListener, cluster) && c.has(engine.TypeListener, "istio.canonical_service")
	})
	if c.has(engine.TypeCluster, "zipkin.observability") {
		t.Error("the sidecar's scope holds the provider's service: the test does not test what it means to")
	}
	if err := sm.Delete("zipkin.yaml"); err != nil {
		t.Fatal(err)
	}
	c.waitFor(t, ctx, "no tracing once the service is gone", func() bool { return !c.has(engine.TypeListener, tracer) })
	if err := sm.Apply("zipkin.yaml", []byte(tracingPushService)); err != nil {
		t.Fatal(err)
	}
	c.waitFor(t, ctx, "the tracer again", func() bool { return c.has(engine.TypeListener, tracer) })
	if err := sm.Delete("telemetry.yaml"); err != nil {
		t.Fatal(err)
	}
	c.waitFor(t, ctx, "no tracing once the Telemetry is gone", func() bool { return !c.has(engine.TypeListener, tracer) })
}

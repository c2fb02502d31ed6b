package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/pilotfish-mesh/pilotfish/engine"
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
	sm, addr := startConfigServer(t, "enableTracing: false\nextensionProviders:\n- {name: zipkin, zipkin: {service: zipkin.observability.svc.cluster.local, port: 9411}}\n", tracingPushConfig)

	c := newMeshClient(t, ctx, addr, reviewsSidecar, "shop")
	const tracer, cluster = "envoy.tracers.zipkin", "outbound|9411||zipkin.observability.svc.cluster.local"
	c.waitFor(t, ctx, "listeners", func() bool { return c.has(engine.TypeListener, "0.0.0.0_9080") })
	if c.has(engine.TypeListener, tracer) || c.has(engine.TypeListener, "istio.canonical_service") {
		t.Fatal("tracing before any Telemetry")
	}
	applyFile(t, sm, "telemetry.yaml", tracingPushTelemetry)
	applyFile(t, sm, "zipkin.yaml", tracingPushService)
	c.waitFor(t, ctx, "the Telemetry's zipkin tracer once its service exists", func() bool {
		return c.has(engine.TypeListener, tracer) && c.has(engine.TypeListener, cluster) && c.has(engine.TypeListener, "istio.canonical_service")
	})
	if c.has(engine.TypeCluster, "zipkin.observability") {
		t.Error("the sidecar's scope holds the provider's service: the test does not test what it means to")
	}
	deleteFile(t, sm, "zipkin.yaml")
	c.waitFor(t, ctx, "no tracing once the service is gone", func() bool { return !c.has(engine.TypeListener, tracer) })
	applyFile(t, sm, "zipkin.yaml", tracingPushService)
	c.waitFor(t, ctx, "the tracer again", func() bool { return c.has(engine.TypeListener, tracer) })
	deleteFile(t, sm, "telemetry.yaml")
	c.waitFor(t, ctx, "no tracing once the Telemetry is gone", func() bool { return !c.has(engine.TypeListener, tracer) })
}

package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/pilotfish-mesh/pilotfish/engine"
	"github.com/pilotfish-mesh/pilotfish/internal/scenario"
)

// scopedReviews is namespace shop, whose default Sidecar sees only shop,
// with its reviews Service; reviewsSidecar is a pod of reviews.
const scopedReviews = `apiVersion: v1
kind: Namespace
metadata: {name: shop}
---
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: default, namespace: shop}
spec:
  egress:
  - hosts: ["./*"]
---
apiVersion: v1
kind: Service
metadata: {name: reviews, namespace: shop}
spec:
  clusterIP: 10.96.0.40
  ports: [{name: http, port: 9080, targetPort: 9080, protocol: TCP}]
  selector: {app: reviews}
`

const reviewsSidecar = "sidecar~10.1.0.40~reviews-1.shop~shop.svc.cluster.local"

// tracingPushConfig adds the namespace of the tracing providers' services.
const tracingPushConfig = scopedReviews + `---
apiVersion: v1
kind: Namespace
metadata: {name: observability}
`

const tracingPushService = `apiVersion: v1
kind: Service
metadata: {name: zipkin, namespace: observability}
spec:
  clusterIP: 10.96.0.41
  ports: [{name: http, port: 9411, targetPort: 9411, protocol: TCP}]
`

// TestTracingProviderServicePushes runs a real ADS client for a sidecar
// whose Sidecar resource sees only its own namespace, with a zipkin
// default provider whose service, in another namespace, is missing at
// first: its HCMs have no tracing (istiod's lookup fails). When the
// service appears the sidecar is pushed the zipkin tracer, though its
// scope does not hold the service; when it goes, tracing goes.
func TestTracingProviderServicePushes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sm, addr := startConfigServer(t, "defaultProviders: {tracing: [zipkin]}\nextensionProviders:\n- {name: zipkin, zipkin: {service: zipkin.observability.svc.cluster.local, port: 9411}}\n", tracingPushConfig)

	c := newMeshClient(t, ctx, addr, reviewsSidecar, "shop")
	const tracer, cluster = "envoy.tracers.zipkin", "outbound|9411||zipkin.observability.svc.cluster.local"
	c.waitFor(t, ctx, "listeners while the provider's service is missing", func() bool { return c.has(engine.TypeListener, "0.0.0.0_9080") })
	if c.has(engine.TypeListener, tracer) || c.has(engine.TypeListener, "istio.canonical_service") {
		t.Fatal("tracing without the provider's service")
	}
	applyFile(t, sm, "zipkin.yaml", tracingPushService)
	c.waitFor(t, ctx, "the zipkin tracer once the service exists", func() bool {
		return c.has(engine.TypeListener, tracer) && c.has(engine.TypeListener, cluster)
	})
	if c.has(engine.TypeCluster, "zipkin.observability") {
		t.Error("the sidecar's scope holds the provider's service: the test does not test what it means to")
	}
	deleteFile(t, sm, "zipkin.yaml")
	c.waitFor(t, ctx, "no tracing once the service is gone", func() bool { return !c.has(engine.TypeListener, tracer) })
}

// TestTracingMeshToggleReclassifies: turning tracing on with SetMesh
// gives a connected sidecar's HCMs the Istio tags of its identity (the
// classes take it), and turning it off takes them away.
func TestTracingMeshToggleReclassifies(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	meshOff := meshOf(t, "enableTracing: false\n")
	meshOn := meshOf(t, "enableTracing: true\n")
	if meshOff.Tracing != nil || meshOn.Tracing == nil {
		t.Fatalf("enableTracing false gives %v, true gives %v", meshOff.Tracing, meshOn.Tracing)
	}
	sm := scenario.NewMesh()
	applyFile(t, sm, "config.yaml", tracingPushConfig)
	eng, addr := startMeshServer(t, sm.W, meshOff)

	c := newMeshClient(t, ctx, addr, reviewsSidecar, "shop")
	c.waitFor(t, ctx, "listeners", func() bool { return c.has(engine.TypeListener, "0.0.0.0_9080") })
	if c.has(engine.TypeListener, "istio.canonical_service") {
		t.Fatal("tracing tags with enableTracing false")
	}
	eng.SetMesh(meshOn)
	c.waitFor(t, ctx, "the Istio tags with tracing on", func() bool {
		return c.has(engine.TypeListener, "istio.canonical_service") && c.has(engine.TypeListener, "istio.mesh_id")
	})
	eng.SetMesh(meshOff)
	c.waitFor(t, ctx, "no tags with tracing off", func() bool { return !c.has(engine.TypeListener, "istio.canonical_service") })
}

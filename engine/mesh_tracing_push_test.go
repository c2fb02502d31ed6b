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

const tracingPushConfig = `apiVersion: v1
kind: Namespace
metadata: {name: shop}
---
apiVersion: v1
kind: Namespace
metadata: {name: observability}
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
	cfg, err := inject.ParseMesh([]byte("defaultProviders: {tracing: [zipkin]}\nextensionProviders:\n- {name: zipkin, zipkin: {service: zipkin.observability.svc.cluster.local, port: 9411}}\n"))
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
	c.waitFor(t, ctx, "listeners while the provider's service is missing", func() bool { return c.has(engine.TypeListener, "0.0.0.0_9080") })
	if c.has(engine.TypeListener, tracer) || c.has(engine.TypeListener, "istio.canonical_service") {
		t.Fatal("tracing without the provider's service")
	}
	if err := sm.Apply("zipkin.yaml", []byte(tracingPushService)); err != nil {
		t.Fatal(err)
	}
	c.waitFor(t, ctx, "the zipkin tracer once the service exists", func() bool {
		return c.has(engine.TypeListener, tracer) && c.has(engine.TypeListener, cluster)
	})
	if c.has(engine.TypeCluster, "zipkin.observability") {
		t.Error("the sidecar's scope holds the provider's service: the test does not test what it means to")
	}
	if err := sm.Delete("zipkin.yaml"); err != nil {
		t.Fatal(err)
	}
	c.waitFor(t, ctx, "no tracing once the service is gone", func() bool { return !c.has(engine.TypeListener, tracer) })
}

// TestTracingMeshToggleReclassifies: turning tracing on with SetMesh
// gives a connected sidecar's HCMs the Istio tags of its identity (the
// classes take it), and turning it off takes them away.
func TestTracingMeshToggleReclassifies(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	off, err := inject.ParseMesh([]byte("enableTracing: false\n"))
	if err != nil {
		t.Fatal(err)
	}
	on, err := inject.ParseMesh([]byte("enableTracing: true\n"))
	if err != nil {
		t.Fatal(err)
	}
	meshOff, err := engine.MeshSettings{Config: off}.Mesh()
	if err != nil {
		t.Fatal(err)
	}
	meshOn, err := engine.MeshSettings{Config: on}.Mesh()
	if err != nil {
		t.Fatal(err)
	}
	if meshOff.Tracing != nil || meshOn.Tracing == nil {
		t.Fatalf("enableTracing false gives %v, true gives %v", meshOff.Tracing, meshOn.Tracing)
	}
	sm := scenario.NewMesh()
	if err := sm.Apply("config.yaml", []byte(tracingPushConfig)); err != nil {
		t.Fatal(err)
	}
	eng := engine.New(sm.W, engine.Options{DebounceAfter: 5 * time.Millisecond, DebounceMax: 50 * time.Millisecond, Mesh: meshOff})
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

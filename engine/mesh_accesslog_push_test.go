package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/pilotfish-mesh/pilotfish/engine"
)

const telemetryPushConfig = `apiVersion: v1
kind: Namespace
metadata: {name: tela}
---
apiVersion: v1
kind: Namespace
metadata: {name: telb}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: tela}
spec:
  clusterIP: 10.96.7.1
  ports: [{name: http, port: 8080, targetPort: 8080, protocol: TCP}]
---
apiVersion: v1
kind: Service
metadata: {name: api, namespace: telb}
spec:
  clusterIP: 10.96.7.2
  ports: [{name: http, port: 8081, targetPort: 8081, protocol: TCP}]
`

const telemetryPushNamespace = `apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {name: logs, namespace: tela}
spec:
  accessLogging: [{providers: [{name: envoy}]}]
`

const telemetryPushMarker = `apiVersion: v1
kind: Service
metadata: {name: marker, namespace: telb}
spec:
  clusterIP: 10.96.7.9
  ports: [{name: tcp-m, port: 7777, targetPort: 7777, protocol: TCP}]
`

// TestTelemetryNamespacePushes runs real ADS clients for sidecars of two
// namespaces: a Telemetry in namespace tela gives tela's sidecar access
// logs and pushes nothing to telb's (its LDS count moves only with a
// marker service both see afterwards, and it has no access log).
func TestTelemetryNamespacePushes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sm, addr := startConfigServer(t, "defaultProviders: {metrics: [prometheus]}\n", telemetryPushConfig)

	const fileLog = "envoy.access_loggers.file"
	a := newMeshClient(t, ctx, addr, "sidecar~10.1.7.1~web-1.tela~tela.svc.cluster.local", "tela")
	b := newMeshClient(t, ctx, addr, "sidecar~10.1.7.2~api-1.telb~telb.svc.cluster.local", "telb")
	a.waitFor(t, ctx, "tela's first LDS", func() bool { return a.has(engine.TypeListener, "0.0.0.0_8081") })
	b.waitFor(t, ctx, "telb's first LDS", func() bool { return b.has(engine.TypeListener, "0.0.0.0_8080") })
	if a.has(engine.TypeListener, fileLog) || b.has(engine.TypeListener, fileLog) {
		t.Fatal("an access log before any Telemetry")
	}
	bLDS := b.count(engine.TypeListener)

	applyFile(t, sm, "telemetry.yaml", telemetryPushNamespace)
	a.waitFor(t, ctx, "tela's access log", func() bool { return a.has(engine.TypeListener, fileLog) })
	applyFile(t, sm, "marker.yaml", telemetryPushMarker)
	b.waitFor(t, ctx, "telb's marker listener", func() bool { return b.has(engine.TypeListener, "10.96.7.9_7777") })
	if n := b.count(engine.TypeListener); n != bLDS+1 {
		t.Errorf("telb got %d LDS pushes after tela's Telemetry and the marker; want 1 (the marker's)", n-bLDS)
	}
	if b.has(engine.TypeListener, fileLog) {
		t.Error("telb's sidecar got tela's access log")
	}
}

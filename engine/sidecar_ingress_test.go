package engine

import (
	"context"
	"testing"
	"time"
)

// ingressMesh: ratings (namespace a, port 9080) on two pods, whose Sidecar
// declares three ingress listeners: HTTP 9080 to 127.0.0.1:8080 with a pool
// of its own, TCP 9443 bound to a real port (captureMode NONE) forwarding
// to a unix socket, gRPC 5000 with no defaultEndpoint (original
// destination); the Sidecar's inboundConnectionPool covers the others.
// Namespace b's db has a Sidecar with only an inboundConnectionPool and a
// DestinationRule whose pool it overrides.
const ingressMesh = `
apiVersion: v1
kind: Service
metadata: {name: ratings, namespace: a}
spec:
  clusterIP: 10.96.1.1
  selector: {app: ratings}
  ports: [{name: http, port: 9080}]
---
apiVersion: v1
kind: Pod
metadata: {name: ratings-1, namespace: a, labels: {app: ratings}}
spec: {containers: [{name: app, image: app}]}
status: {podIP: 10.244.1.5}
---
apiVersion: v1
kind: Pod
metadata: {name: ratings-2, namespace: a, labels: {app: ratings}}
spec: {containers: [{name: app, image: app}]}
status: {podIP: 10.244.1.6}
---
apiVersion: v1
kind: Pod
metadata: {name: other-1, namespace: a, labels: {app: other}}
spec: {containers: [{name: app, image: app}]}
status: {podIP: 10.244.1.7}
---
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: ratings, namespace: a}
spec:
  workloadSelector: {labels: {app: ratings}}
  ingress:
  - port: {number: 9080, protocol: HTTP, name: http}
    defaultEndpoint: 127.0.0.1:8080
    connectionPool: {tcp: {maxConnections: 7}}
  - port: {number: 9443, protocol: TCP, name: tcp}
    bind: 0.0.0.0
    captureMode: NONE
    defaultEndpoint: unix:///var/run/app.sock
  - port: {number: 5000, protocol: GRPC, name: grpc}
  inboundConnectionPool: {http: {http1MaxPendingRequests: 11}}
---
apiVersion: v1
kind: Service
metadata: {name: db, namespace: b}
spec:
  clusterIP: 10.96.2.1
  selector: {app: db}
  ports: [{name: tcp, port: 5432}]
---
apiVersion: v1
kind: Pod
metadata: {name: db-1, namespace: b, labels: {app: db}}
spec: {containers: [{name: db, image: db}]}
status: {podIP: 10.244.2.5}
---
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: default, namespace: b}
spec:
  inboundConnectionPool: {tcp: {maxConnections: 3}}
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: db, namespace: b}
spec:
  host: db.b.svc.cluster.local
  trafficPolicy:
    connectionPool: {tcp: {maxConnections: 100}}
    loadBalancer: {simple: RANDOM}
`

// TestSidecarIngressChangePushesOnlySelected: editing a Sidecar's ingress
// pushes to the proxies it selects and to no other proxy (counted).
func TestSidecarIngressChangePushesOnlySelected(t *testing.T) {
	sw := newScopedWriter(t, ingressMesh)
	e := New(sw.w, Options{DebounceAfter: 5 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go e.Run(ctx)
	sel, err := e.Connect(ctx, sidecarNode(t, "10.244.1.5", "ratings-1", "a"), "")
	if err != nil {
		t.Fatal(err)
	}
	other, err := e.Connect(ctx, sidecarNode(t, "10.244.1.7", "other-1", "a"), "")
	if err != nil {
		t.Fatal(err)
	}
	far, err := e.Connect(ctx, sidecarNode(t, "10.244.2.5", "db-1", "b"), "")
	if err != nil {
		t.Fatal(err)
	}
	conns := []*Conn{sel, other, far}
	if sel.class.key.class.Sidecar != "a/ratings" || other.class.key.class.Sidecar != "" || far.class.key.class.Sidecar != "b/default" {
		t.Fatalf("Sidecars %q %q %q", sel.class.key.class.Sidecar, other.class.key.class.Sidecar, far.class.key.class.Sidecar)
	}
	// Prime: a change everyone sees.
	sw.apply(`
apiVersion: v1
kind: Service
metadata: {name: prime, namespace: a}
spec: {clusterIP: 10.96.0.9, ports: [{name: http, port: 80}]}`)
	for _, c := range conns {
		if _, ok := waitPush(t, c, 2*time.Second); !ok {
			t.Fatalf("%s: no push after priming", c.ID())
		}
	}
	counts := map[*Conn]int{}
	for _, c := range conns {
		for {
			if _, ok := waitPush(t, c, 300*time.Millisecond); !ok {
				break
			}
		}
	}
	sw.apply(`
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: ratings, namespace: a}
spec:
  workloadSelector: {labels: {app: ratings}}
  ingress:
  - port: {number: 9080, protocol: HTTP, name: http}
    defaultEndpoint: 127.0.0.1:8081
`)
	for _, c := range conns {
		for {
			if _, ok := waitPush(t, c, 300*time.Millisecond); !ok {
				break
			}
			counts[c]++
		}
	}
	if counts[sel] == 0 || counts[other] != 0 || counts[far] != 0 {
		t.Fatalf("pushes after editing a/ratings: selected %d (want >0), other in a %d, in b %d (want 0)", counts[sel], counts[other], counts[far])
	}
	// A new Sidecar selecting the other proxy moves it to a new class,
	// which is pushed; the rest are not.
	clear(counts)
	sw.apply(`
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: other, namespace: a}
spec:
  workloadSelector: {labels: {app: other}}
  ingress:
  - port: {number: 7000, protocol: TCP, name: tcp}
    bind: 0.0.0.0
`)
	for _, c := range conns {
		for {
			if _, ok := waitPush(t, c, 300*time.Millisecond); !ok {
				break
			}
			counts[c]++
		}
	}
	if counts[other] == 0 || counts[sel] != 0 || counts[far] != 0 {
		t.Fatalf("pushes after adding a/other: other %d (want >0), ratings %d, in b %d (want 0)", counts[other], counts[sel], counts[far])
	}
}

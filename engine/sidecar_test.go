package engine

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/index"
	"github.com/pilotfish-mesh/pilotfish/ingest"
	"github.com/pilotfish-mesh/pilotfish/rules"
)

// scopedMesh: services in namespaces a and b; a's default Sidecar imports
// only its own namespace, and a VirtualService in a routes to b's "three",
// which the scope then imports too.
const scopedMesh = `
apiVersion: v1
kind: Service
metadata: {name: one, namespace: a}
spec:
  clusterIP: 10.96.0.1
  ports: [{name: http, port: 80}]
---
apiVersion: v1
kind: Service
metadata: {name: two, namespace: b}
spec:
  clusterIP: 10.96.0.2
  ports: [{name: http, port: 80}]
---
apiVersion: v1
kind: Service
metadata: {name: three, namespace: b}
spec:
  clusterIP: 10.96.0.3
  ports: [{name: http, port: 8080}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: one, namespace: a}
spec:
  hosts: [one]
  http:
  - match: [{uri: {prefix: /three}}]
    route: [{destination: {host: three.b.svc.cluster.local}}]
  - route: [{destination: {host: one}}]
---
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: default, namespace: a}
spec:
  egress:
  - hosts: ["./*"]
`

// scopedWriter loads manifests into a writer through ingest, as the file
// source does; apply adds more.
type scopedWriter struct {
	t    testing.TB
	w    *index.Writer
	conv *ingest.Converter
}

func newScopedWriter(t testing.TB, manifests ...string) *scopedWriter {
	w := index.NewWriter()
	s := &scopedWriter{t: t, w: w, conv: ingest.NewConverter(w, "cluster.local")}
	s.apply(manifests...)
	return s
}

func (s *scopedWriter) apply(manifests ...string) {
	s.t.Helper()
	var b index.Batch
	for i, m := range manifests {
		objs, errs := ingest.Decode("m"+string(rune('0'+i))+".yaml", []byte(m))
		if len(errs) > 0 {
			s.t.Fatal(errs)
		}
		for j := range objs {
			s.conv.Put(&b, &objs[j])
		}
	}
	s.w.Apply(&b)
}

func clusterNames(t testing.TB, rs []Resource) []string {
	var out []string
	for _, c := range decodeResources(t, rs, newCluster) {
		out = append(out, c.GetName())
	}
	return out
}

func proxyScope(e *Engine, snap *index.Snapshot, ns string, labels map[string]string) *rules.Scope {
	node := &Node{ID: "p." + ns, Type: encode.ProxySidecar, Namespace: ns, Labels: labels}
	class := e.classOf(snap, node)
	return rules.NewScope(snap, &class)
}

// TestChangeOutsideSidecarScopePushesNothing counts pushes: a change in
// namespace b reaches the proxy in b and not the proxy in a, whose Sidecar
// imports only a; a change in a reaches both.
func TestChangeOutsideSidecarScopePushesNothing(t *testing.T) {
	sw := newScopedWriter(t, scopedMesh)
	e := New(sw.w, Options{DebounceAfter: 5 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go e.Run(ctx)
	inA, err := e.Connect(ctx, sidecarNode(t, "10.1.0.1", "p1", "a"), "")
	if err != nil {
		t.Fatal(err)
	}
	inB, err := e.Connect(ctx, sidecarNode(t, "10.1.0.2", "p2", "b"), "")
	if err != nil {
		t.Fatal(err)
	}
	if inA.class.key.class.Sidecar != "a/default" || inB.class.key.class.Sidecar != "" {
		t.Fatalf("classes %+v / %+v", inA.class.key.class, inB.class.key.class)
	}
	// Prime: the first full push after connecting reaches everyone.
	sw.apply(`
apiVersion: v1
kind: Service
metadata: {name: prime, namespace: a}
spec: {clusterIP: 10.96.0.9, ports: [{name: http, port: 80}]}`)
	for _, c := range []*Conn{inA, inB} {
		if _, ok := waitPush(t, c, 2*time.Second); !ok {
			t.Fatalf("%s: no push after priming", c.ID())
		}
	}

	counts := map[*Conn]int{}
	drain := func(d time.Duration) {
		for _, c := range []*Conn{inA, inB} {
			for {
				if _, ok := waitPush(t, c, d); !ok {
					break
				}
				counts[c]++
			}
		}
	}
	// Outside a's scope: a new service, a changed one, a DestinationRule
	// and a VirtualService in b.
	sw.apply(`
apiVersion: v1
kind: Service
metadata: {name: four, namespace: b}
spec: {clusterIP: 10.96.0.4, ports: [{name: http, port: 80}]}`)
	drain(300 * time.Millisecond)
	sw.apply(`
apiVersion: v1
kind: Service
metadata: {name: two, namespace: b}
spec: {clusterIP: 10.96.0.2, ports: [{name: http, port: 80}, {name: grpc, port: 9090}]}
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: two, namespace: b}
spec: {host: two, trafficPolicy: {loadBalancer: {simple: LEAST_REQUEST}}}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: two, namespace: b}
spec:
  hosts: [two]
  http: [{route: [{destination: {host: two}}], timeout: 3s}]`)
	drain(300 * time.Millisecond)
	if counts[inA] != 0 || counts[inB] == 0 {
		t.Fatalf("changes in b: %d pushes to the proxy in a (want 0), %d to the proxy in b (want >0)", counts[inA], counts[inB])
	}
	// Inside a's scope: three (a VirtualService destination), then a's own.
	for _, m := range []string{`
apiVersion: v1
kind: Service
metadata: {name: three, namespace: b}
spec: {clusterIP: 10.96.0.3, ports: [{name: http, port: 8080}, {name: tcp, port: 9000}]}`, `
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: one, namespace: a}
spec: {host: one, trafficPolicy: {loadBalancer: {simple: RANDOM}}}`} {
		clear(counts)
		sw.apply(m)
		drain(300 * time.Millisecond)
		if counts[inA] == 0 || counts[inB] == 0 {
			t.Fatalf("change in scope of both: pushes a=%d b=%d, want both >0\n%s", counts[inA], counts[inB], m)
		}
	}
}

func TestSidecarLabelsReclassify(t *testing.T) {
	sw := newScopedWriter(t, scopedMesh)
	e := New(sw.w, Options{DebounceAfter: 5 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go e.Run(ctx)
	n := sidecarNode(t, "10.1.0.1", "p1", "a")
	n.Metadata.Fields["LABELS"] = structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{"app": structpb.NewStringValue("ratings")}})
	c, err := e.Connect(ctx, n, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := c.class.key.class.Sidecar; got != "a/default" {
		t.Fatalf("Sidecar %q, want a/default", got)
	}
	sw.apply(`
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: ratings, namespace: a}
spec:
  workloadSelector: {labels: {app: ratings}}
  egress: [{hosts: ["*/*"]}]`)
	if _, ok := waitPush(t, c, 2*time.Second); !ok {
		t.Fatal("no push after a Sidecar selecting the proxy was added")
	}
	e.mu.Lock()
	got := c.class.key.class.Sidecar
	e.mu.Unlock()
	if got != "a/ratings" {
		t.Fatalf("after the new Sidecar: class Sidecar %q, want a/ratings", got)
	}
}

// TestSelectionByWorkloadLabels: a proxy without LABELS metadata is
// selected by its Pod's labels: a Sidecar with a workloadSelector, and a
// router's Gateways.
func TestSelectionByWorkloadLabels(t *testing.T) {
	sw := newScopedWriter(t, scopedMesh, `
apiVersion: v1
kind: Pod
metadata: {name: ratings-0, namespace: a, labels: {app: ratings}}
spec: {containers: [{name: app, image: app}]}
status: {podIP: 10.244.0.40}
---
apiVersion: v1
kind: Pod
metadata: {name: ingress-0, namespace: istio-system, labels: {istio: ingressgateway}}
spec: {containers: [{name: proxy, image: proxy}]}
status: {podIP: 10.244.0.50}
---
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: ratings, namespace: a}
spec:
  workloadSelector: {labels: {app: ratings}}
  egress: [{hosts: ["*/*"]}]
---
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: public, namespace: istio-system}
spec:
  selector: {istio: ingressgateway}
  servers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: ["*"]}]
`)
	e := New(sw.w, Options{})
	snap := sw.w.Snapshot()
	side, err := ParseNode(sidecarNode(t, "10.244.0.40", "ratings-0", "a"))
	if err != nil {
		t.Fatal(err)
	}
	if got := e.classOf(snap, side).Sidecar; got != "a/ratings" {
		t.Errorf("sidecar without LABELS: Sidecar %q, want a/ratings (its Pod's labels)", got)
	}
	rn := sidecarNode(t, "10.244.0.50", "ingress-0", "istio-system")
	rn.Id = "router" + rn.Id[len("sidecar"):]
	router, err := ParseNode(rn)
	if err != nil {
		t.Fatal(err)
	}
	if got := e.classOf(snap, router).Gateways; got != "istio-system/public" {
		t.Errorf("router without LABELS: Gateways %q, want istio-system/public", got)
	}
}

package engine

import (
	"context"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/index"
	"github.com/pilotfish-mesh/pilotfish/rules"
)

// routerScope is the scope of a router with labels in ns, its Gateways
// selected as Engine.classOf selects them.
func routerScope(snap *index.Snapshot, ns string, labels map[string]string) *rules.Scope {
	class := &encode.ProxyClass{Type: encode.ProxyRouter, Namespace: ns, ClusterID: "Kubernetes"}
	class.Gateways = rules.SelectGateways(snap, labels)
	return rules.NewScope(snap, class)
}

// TestRouterPushes: a router is pushed when a VirtualService bound to its
// Gateway changes, and a new Gateway selecting it re-classifies it, so its
// next listeners carry the new port.
func TestRouterPushes(t *testing.T) {
	sw := newScopedWriter(t, `
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: public, namespace: istio-system}
spec:
  selector: {istio: ingressgateway}
  servers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: ["*"]}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: site, namespace: web}
spec:
  hosts: [site.example.com]
  gateways: [istio-system/public]
  http: [{route: [{destination: {host: site.web.svc.cluster.local}}]}]
`)
	e := New(sw.w, Options{DebounceAfter: 5 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go e.Run(ctx)
	n := sidecarNode(t, "10.244.0.50", "ingress-0", "istio-system")
	n.Id = "router" + n.Id[len("sidecar"):]
	n.Metadata.Fields["LABELS"] = structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{"istio": structpb.NewStringValue("ingressgateway")}})
	c, err := e.Connect(ctx, n, "")
	if err != nil {
		t.Fatal(err)
	}
	listenerNames := func() []string {
		rs, err := c.Generate(TypeListener, nil, true, nil)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range rs {
			out = append(out, r.Name)
		}
		return out
	}
	if got := listenerNames(); !slices.Equal(got, []string{"0.0.0.0_80"}) {
		t.Fatalf("listeners %v", got)
	}
	sw.apply(`
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: site, namespace: web}
spec:
  hosts: [site.example.com]
  gateways: [istio-system/public]
  http: [{route: [{destination: {host: site.web.svc.cluster.local}}], timeout: 5s}]`)
	if p, ok := waitPush(t, c, 2*time.Second); !ok || !p.Full {
		t.Fatalf("VirtualService change: push %+v ok=%v, want a full push", p, ok)
	}
	sw.apply(`
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: admin, namespace: istio-system}
spec:
  selector: {istio: ingressgateway}
  servers: [{port: {number: 8443, name: https, protocol: HTTPS}, hosts: ["*"], tls: {mode: SIMPLE, credentialName: admin-cert}}]`)
	if _, ok := waitPush(t, c, 2*time.Second); !ok {
		t.Fatal("no push after a Gateway selecting the router was added")
	}
	if got := listenerNames(); !slices.Equal(got, []string{"0.0.0.0_80", "0.0.0.0_8443"}) {
		t.Fatalf("after the new Gateway: listeners %v", got)
	}
}

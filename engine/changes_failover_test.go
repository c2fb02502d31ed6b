package engine

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"
)

// TestFailoverPriorityReclassifies: a DestinationRule whose failoverPriority
// lists a label the class dropped moves connected proxies to a class that
// keeps it (EDS orders their endpoints by it), and a rule that stops listing
// it moves them back, so proxies differing only in that label share a class
// again.
func TestFailoverPriorityReclassifies(t *testing.T) {
	sw := newScopedWriter(t, `apiVersion: v1
kind: Service
metadata: {name: db, namespace: a}
spec: {clusterIP: 10.96.0.50, ports: [{name: tcp, port: 5432}]}`)
	e := New(sw.w, Options{DebounceAfter: 5 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	go e.Run(ctx)
	n := sidecarNode(t, "10.1.0.9", "client-0", "a")
	n.Metadata.Fields["LABELS"] = structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{
		"app": structpb.NewStringValue("client"), "version": structpb.NewStringValue("v1"),
	}})
	c, err := e.Connect(ctx, n, "")
	if err != nil {
		t.Fatal(err)
	}
	labels := func() string {
		e.mu.Lock()
		defer e.mu.Unlock()
		return c.class.key.class.Labels
	}
	if got := labels(); got != "-" {
		t.Fatalf("class labels %q before any rule, want -", got)
	}
	rule := func(priority string) string {
		return `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: db, namespace: a}
spec:
  host: db.a.svc.cluster.local
  trafficPolicy:
    outlierDetection: {consecutive5xxErrors: 3}
    loadBalancer: {localityLbSetting: {failoverPriority: [` + priority + `]}}`
	}
	for _, step := range []struct{ priority, want string }{
		{"version", "version=v1"},
		{"topology.istio.io/network, app=server", "app=client"},
		{"topology.istio.io/network", "-"},
	} {
		sw.apply(rule(step.priority))
		if _, ok := waitPush(t, c, 10*time.Second); !ok {
			t.Fatalf("failoverPriority [%s]: no push", step.priority)
		}
		if got := labels(); got != step.want {
			t.Fatalf("failoverPriority [%s]: class labels %q, want %q", step.priority, got, step.want)
		}
	}
}

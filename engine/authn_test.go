package engine

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"
)

// TestSecurityPolicyReclassifies: a new policy whose selector looks at a
// label the class dropped moves the proxy to a class that keeps it, so the
// policy applies to a proxy connected before it.
func TestSecurityPolicyReclassifies(t *testing.T) {
	sw := newScopedWriter(t, `apiVersion: v1
kind: Service
metadata: {name: db, namespace: a}
spec: {clusterIP: 10.96.0.50, ports: [{name: tcp, port: 5432}]}`)
	e := New(sw.w, Options{DebounceAfter: 5 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go e.Run(ctx)
	n := sidecarNode(t, "10.1.0.9", "db-0", "a")
	n.Metadata.Fields["LABELS"] = structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{
		"app": structpb.NewStringValue("db"), "pod-template-hash": structpb.NewStringValue("x1"),
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
		t.Fatalf("class labels %q before any policy, want -", got)
	}
	sw.apply(`apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: db, namespace: a}
spec:
  selector: {matchLabels: {app: db}}
  mtls: {mode: STRICT}`)
	if _, ok := waitPush(t, c, 2*time.Second); !ok {
		t.Fatal("no push after the policy")
	}
	if got := labels(); got != "app=db" {
		t.Fatalf("class labels %q after a policy selecting app, want app=db", got)
	}
}

package engine

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/internal/xdstest"
)

// nameTableHosts decodes a NameTable resource into host → IPs.
func nameTableHosts(t *testing.T, r Resource) map[string][]string {
	return xdstest.NameTableHosts(t, r.Any, encode.NameTableDescriptor())
}

// TestNameTableFollowsSidecarScope: the DNS table of a proxy under a
// namespace-only Sidecar lists only what the Sidecar imports; a headless
// service resolves to its endpoints' addresses.
func TestNameTableFollowsSidecarScope(t *testing.T) {
	sw := newScopedWriter(t, scopedMesh, `
apiVersion: v1
kind: Service
metadata: {name: db, namespace: a}
spec:
  clusterIP: None
  selector: {app: db}
  ports: [{name: tcp, port: 5432}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: db-1, namespace: a, labels: {kubernetes.io/service-name: db}}
addressType: IPv4
ports: [{name: tcp, port: 5432}]
endpoints:
- addresses: [10.244.0.9]
  conditions: {ready: true}
- addresses: [10.244.0.10]
  conditions: {ready: true}
`)
	e := New(sw.w, Options{})
	ctx := context.Background()
	for _, tc := range []struct {
		ns          string
		want, never []string
	}{
		{ns: "a", want: []string{"one.a.svc.cluster.local", "three.b.svc.cluster.local", "db.a.svc.cluster.local"}, never: []string{"two.b.svc.cluster.local"}},
		{ns: "b", want: []string{"one.a.svc.cluster.local", "two.b.svc.cluster.local", "three.b.svc.cluster.local"}},
	} {
		c, err := e.Connect(ctx, sidecarNode(t, "10.1.0.1", "p", tc.ns), "")
		if err != nil {
			t.Fatal(err)
		}
		rs, err := c.Generate(TypeNameTable, nil, true, nil)
		if err != nil || len(rs) != 1 {
			t.Fatalf("%s: %d name tables, err %v", tc.ns, len(rs), err)
		}
		table := nameTableHosts(t, rs[0])
		for _, h := range tc.want {
			if _, ok := table[h]; !ok {
				t.Errorf("proxy in %s: table %v lacks %s", tc.ns, table, h)
			}
		}
		for _, h := range tc.never {
			if _, ok := table[h]; ok {
				t.Errorf("proxy in %s: table holds %s, which its Sidecar hides", tc.ns, h)
			}
		}
		if tc.ns == "a" {
			if got := table["db.a.svc.cluster.local"]; !slices.Equal(got, []string{"10.244.0.9", "10.244.0.10"}) {
				t.Errorf("headless db resolves to %v", got)
			}
			if got := table["one.a.svc.cluster.local"]; !slices.Equal(got, []string{"10.96.0.1"}) {
				t.Errorf("one resolves to %v, want its cluster IP", got)
			}
		}
		c.Close()
	}
}

// TestHeadlessEndpointChangePushesNameTable: an endpoint-only change of a
// headless service takes the fast path with the name table along.
func TestHeadlessEndpointChangePushesNameTable(t *testing.T) {
	headless := `
apiVersion: v1
kind: Service
metadata: {name: db, namespace: a}
spec: {clusterIP: None, selector: {app: db}, ports: [{name: tcp, port: 5432}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: db-1, namespace: a, labels: {kubernetes.io/service-name: db}}
addressType: IPv4
ports: [{name: tcp, port: 5432}]
endpoints: [{addresses: [%s], conditions: {ready: true}}]
`
	sw := newScopedWriter(t, scopedMesh, fmt.Sprintf(headless, "10.244.0.9"))
	e := New(sw.w, Options{DebounceAfter: 5 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go e.Run(ctx)
	c, err := e.Connect(ctx, sidecarNode(t, "10.1.0.1", "p1", "a"), "")
	if err != nil {
		t.Fatal(err)
	}
	sw.apply(fmt.Sprintf(headless, "10.244.0.11"))
	p, ok := waitPush(t, c, 2*time.Second)
	if !ok || p.Full || !slices.Contains(p.Types, TypeNameTable) || !slices.Contains(p.Types, TypeEndpoint) {
		t.Fatalf("push %+v (ok=%v), want an endpoint push with the name table", p, ok)
	}
	rs, err := c.Generate(TypeNameTable, nil, true, nil)
	if err != nil || len(rs) != 1 {
		t.Fatal(err)
	}
	if got := nameTableHosts(t, rs[0])["db.a.svc.cluster.local"]; !slices.Equal(got, []string{"10.244.0.11"}) {
		t.Errorf("db resolves to %v after the change", got)
	}
}

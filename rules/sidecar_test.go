package rules

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/index"
	"github.com/pilotfish-mesh/pilotfish/ingest"
)

func TestSidecarSelection(t *testing.T) {
	sw := newScopedWriter(t, scopedMesh, `
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: ratings, namespace: a}
spec:
  workloadSelector: {labels: {app: ratings}}
  egress:
  - hosts: ["b/two.b.svc.cluster.local"]
  outboundTrafficPolicy: {mode: REGISTRY_ONLY}
---
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: default, namespace: istio-system}
spec:
  egress:
  - hosts: ["*/*"]
  outboundTrafficPolicy: {mode: REGISTRY_ONLY}
`)
	e := newTestEngine(sw.w, testOptions{})
	snap := sw.w.Snapshot()
	for _, tc := range []struct {
		ns       string
		labels   map[string]string
		want     string
		allowAny bool
	}{
		{ns: "a", labels: map[string]string{"app": "ratings"}, want: "a/ratings"},
		{ns: "a", labels: map[string]string{"app": "other"}, want: "a/default", allowAny: true},
		{ns: "b", want: "istio-system/default"},
	} {
		sc := proxyScope(e, snap, tc.ns, tc.labels)
		if sc.Class.Sidecar != tc.want {
			t.Errorf("%s %v: Sidecar %q, want %q", tc.ns, tc.labels, sc.Class.Sidecar, tc.want)
		}
		if got := e.meshFor(sc).OutboundAllowAny; got != tc.allowAny {
			t.Errorf("%s %v: OutboundAllowAny %v, want %v", tc.ns, tc.labels, got, tc.allowAny)
		}
	}
	// REGISTRY_ONLY: the virtual outbound listener drops unknown
	// destinations instead of passing them through.
	sc := proxyScope(e, snap, "a", map[string]string{"app": "ratings"})
	if len(sc.Services) != 1 || snap.String(snap.ServiceByID(sc.Services[0]).Key.Host) != "two.b.svc.cluster.local" {
		t.Fatalf("ratings scope %v, want only two.b", sc.Services)
	}
	rs, err := buildListeners(sc, e.meshFor(sc), verifyCache(), []string{encode.VirtualOutboundListenerName}, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	ls := decodeListeners(t, rs)
	if len(ls) != 1 {
		t.Fatalf("%d listeners, want virtualOutbound", len(ls))
	}
	validate(t, ls[0])
	js := protojson.Format(ls[0])
	if !strings.Contains(js, "BlackHoleCluster") || strings.Contains(js, "PassthroughCluster") {
		t.Errorf("REGISTRY_ONLY virtualOutbound does not route to BlackHoleCluster:\n%s", js)
	}
}

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

func proxyScope(e *testEngine, snap *index.Snapshot, ns string, labels map[string]string) *Scope {
	node := &Node{ID: "p." + ns, Type: encode.ProxySidecar, Namespace: ns, Labels: labels}
	class := e.classOf(snap, node)
	return NewScope(snap, &class)
}

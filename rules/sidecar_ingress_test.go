package rules

import (
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"google.golang.org/protobuf/proto"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/index"
)

// ingressScope is the scope of a sidecar at ip in ns, classed as the
// engine classes it.
func ingressScope(t testing.TB, e *testEngine, snap *index.Snapshot, ns, ip string) *Scope {
	t.Helper()
	node := &Node{ID: "p-" + ip, Type: encode.ProxySidecar, Namespace: ns, IPs: []netip.Addr{netip.MustParseAddr(ip)}}
	class := e.classOf(snap, node)
	sc := NewScope(snap, &class)
	sc.Instances = ComputeInstances(snap, node)
	return sc
}

// inboundOf builds a scope's listeners and clusters and keeps the inbound
// ones (every resource passes ValidateAll on the way).
func inboundOf(t *testing.T, sc *Scope) ([]*listener.Listener, []*clusterv3.Cluster) {
	t.Helper()
	mesh := encode.DefaultMesh()
	lrs, err := buildListeners(sc, mesh, verifyingCache(), nil, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	var ls []*listener.Listener
	for _, l := range decodeResources(t, lrs, func() *listener.Listener { return &listener.Listener{} }) {
		if l.GetTrafficDirection().String() == "INBOUND" {
			ls = append(ls, l)
		}
	}
	crs, err := buildClusters(sc, mesh, verifyingCache(), nil, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	var cs []*clusterv3.Cluster
	for _, c := range decodeResources(t, crs, newCluster) {
		if strings.HasPrefix(c.GetName(), "inbound|") {
			cs = append(cs, c)
		}
	}
	return ls, cs
}

func chainNames(l *listener.Listener) []string {
	var out []string
	for _, fc := range l.GetFilterChains() {
		if !slices.Contains(out, fc.GetName()) {
			out = append(out, fc.GetName())
		}
	}
	return out
}

func clusterByName(cs []*clusterv3.Cluster, name string) *clusterv3.Cluster {
	for _, c := range cs {
		if c.GetName() == name {
			return c
		}
	}
	return nil
}

// TestSidecarIngressGolden: the inbound listeners and clusters of a proxy
// under a Sidecar with ingress listeners, and of one under a Sidecar with
// only an inboundConnectionPool, against golden files, with the fields
// istiod's buildInboundChainConfigs and buildInboundClustersFromSidecar
// decide checked explicitly.
func TestSidecarIngressGolden(t *testing.T) {
	sw := newScopedWriter(t, ingressMesh)
	e := newTestEngine(sw.w, testOptions{})
	snap := sw.w.Snapshot()
	t.Run("ingress", func(t *testing.T) {
		ls, cs := inboundOf(t, ingressScope(t, e, snap, "a", "10.244.1.5"))
		var msgs []proto.Message
		for _, l := range ls {
			msgs = append(msgs, l)
		}
		for _, c := range cs {
			msgs = append(msgs, c)
		}
		checkGolden(t, filepath.Join(ldsGoldenDir, "sidecar-ingress.ratings.json"), goldenResources(t, msgs))

		if len(ls) != 2 || ls[0].GetName() != encode.VirtualInboundListenerName || ls[1].GetName() != "0.0.0.0_9443" {
			t.Fatalf("inbound listeners %v, want virtualInbound and 0.0.0.0_9443", listenerNames(ls))
		}
		// Chains by the pod's IP (istiod's getSidecarInboundBindIPs), the
		// service port's own chains gone, 9443 on its own listener.
		names := chainNames(ls[0])
		for _, w := range []string{"10.244.1.5_5000", "10.244.1.5_9080"} {
			if !slices.Contains(names, w) {
				t.Errorf("virtualInbound chains %v lack %s", names, w)
			}
		}
		for _, n := range []string{"0.0.0.0_9080", "10.244.1.5_9443", "0.0.0.0_9443"} {
			if slices.Contains(names, n) {
				t.Errorf("virtualInbound chains %v hold %s", names, n)
			}
		}
		for _, fc := range ls[0].GetFilterChains() {
			if strings.HasPrefix(fc.GetName(), "10.244.1.5_") {
				if got := fc.GetMetadata().GetFilterMetadata()["istio"].GetFields()["config"].GetStringValue(); got != "/apis/networking.istio.io/v1/namespaces/a/sidecar/ratings" {
					t.Errorf("chain %s config metadata %q", fc.GetName(), got)
				}
			}
		}
		own := ls[1]
		if a := own.GetAddress().GetSocketAddress(); a.GetAddress() != "0.0.0.0" || a.GetPortValue() != 9443 {
			t.Errorf("0.0.0.0_9443 address %v", a)
		}
		for _, f := range own.GetListenerFilters() {
			if f.GetName() == "envoy.filters.listener.original_dst" {
				t.Error("a listener bound to its port must not use original_dst")
			}
		}

		if got := clusterNamesOf(cs); !slices.Equal(got, []string{"inbound|9080||", "inbound|9443||", "inbound|5000||"}) {
			t.Fatalf("inbound clusters %v, want the ingress ports in the Sidecar's order", got)
		}
		http := clusterByName(cs, "inbound|9080||")
		if http.GetType() != clusterv3.Cluster_STATIC || http.GetUpstreamBindConfig() != nil {
			t.Errorf("9080: type %v bind %v, want STATIC to loopback without a source address", http.GetType(), http.GetUpstreamBindConfig())
		}
		if a := http.GetLoadAssignment().GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress(); a.GetAddress() != "127.0.0.1" || a.GetPortValue() != 8080 {
			t.Errorf("9080 endpoint %v, want 127.0.0.1:8080", a)
		}
		if got := http.GetCircuitBreakers().GetThresholds()[0].GetMaxConnections().GetValue(); got != 7 {
			t.Errorf("9080 max connections %d, want the ingress pool's 7", got)
		}
		if got := http.GetMetadata().GetFilterMetadata()["istio"].GetFields()["services"].GetListValue().GetValues(); len(got) != 1 {
			t.Errorf("9080 services metadata %v, want ratings", got)
		}
		sock := clusterByName(cs, "inbound|9443||")
		if p := sock.GetLoadAssignment().GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetPipe().GetPath(); p != "/var/run/app.sock" {
			t.Errorf("9443 pipe %q", p)
		}
		if got := sock.GetCircuitBreakers().GetThresholds()[0].GetMaxPendingRequests().GetValue(); got != 11 {
			t.Errorf("9443 max pending %d, want inboundConnectionPool's 11", got)
		}
		if sock.GetUpstreamBindConfig().GetSourceAddress().GetAddress() != "127.0.0.6" || sock.GetMetadata() != nil {
			t.Errorf("9443: bind %v metadata %v, want 127.0.0.6 and no service", sock.GetUpstreamBindConfig(), sock.GetMetadata())
		}
		grpc := clusterByName(cs, "inbound|5000||")
		if grpc.GetType() != clusterv3.Cluster_ORIGINAL_DST || grpc.GetLbPolicy() != clusterv3.Cluster_CLUSTER_PROVIDED {
			t.Errorf("5000: %v %v, want ORIGINAL_DST, CLUSTER_PROVIDED", grpc.GetType(), grpc.GetLbPolicy())
		}
	})
	t.Run("pool", func(t *testing.T) {
		ls, cs := inboundOf(t, ingressScope(t, e, snap, "b", "10.244.2.5"))
		var msgs []proto.Message
		for _, c := range cs {
			msgs = append(msgs, c)
		}
		checkGolden(t, filepath.Join(cdsGoldenDir, "sidecar-ingress.pool.json"), goldenResources(t, msgs))
		if names := chainNames(ls[0]); !slices.Contains(names, "0.0.0.0_5432") {
			t.Errorf("without ingress the service port keeps its chains: %v", names)
		}
		db := clusterByName(cs, "inbound|5432||")
		if db == nil || db.GetType() != clusterv3.Cluster_ORIGINAL_DST {
			t.Fatalf("inbound|5432|| %v", db)
		}
		if got := db.GetCircuitBreakers().GetThresholds()[0].GetMaxConnections().GetValue(); got != 3 {
			t.Errorf("max connections %d, want the Sidecar's 3 over the DestinationRule's 100", got)
		}
	})
	t.Run("no Sidecar ingress", func(t *testing.T) {
		ls, cs := inboundOf(t, ingressScope(t, e, snap, "a", "10.244.1.7"))
		if len(ls) != 1 || len(cs) != 0 {
			t.Errorf("a pod no service selects: %d listeners %d clusters, want virtualInbound only", len(ls), len(cs))
		}
	})
}

func listenerNames(ls []*listener.Listener) []string {
	var out []string
	for _, l := range ls {
		out = append(out, l.GetName())
	}
	return out
}

func clusterNamesOf(cs []*clusterv3.Cluster) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.GetName())
	}
	return out
}

// TestSidecarIngressClasses: proxies under one Sidecar whose ingress names
// every bind share a class; ingress without bind is named by each pod's
// address (as istiod names it), so each such proxy has its own; a proxy
// under another Sidecar has another class.
func TestSidecarIngressClasses(t *testing.T) {
	sw := newScopedWriter(t, ingressMesh, `
apiVersion: v1
kind: Pod
metadata: {name: web-1, namespace: c, labels: {app: web}}
spec: {containers: [{name: app, image: app}]}
status: {podIP: 10.244.3.5}
---
apiVersion: v1
kind: Pod
metadata: {name: web-2, namespace: c, labels: {app: web}}
spec: {containers: [{name: app, image: app}]}
status: {podIP: 10.244.3.6}
---
apiVersion: v1
kind: Pod
metadata: {name: api-1, namespace: c, labels: {app: api}}
spec: {containers: [{name: app, image: app}]}
status: {podIP: 10.244.3.7}
---
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: web, namespace: c}
spec:
  workloadSelector: {labels: {app: web}}
  ingress:
  - port: {number: 8080, protocol: HTTP, name: http}
    bind: 0.0.0.0
    defaultEndpoint: 127.0.0.1:8081
---
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: api, namespace: c}
spec:
  workloadSelector: {labels: {app: api}}
  ingress:
  - port: {number: 8080, protocol: TCP, name: tcp}
    bind: 0.0.0.0
    defaultEndpoint: 127.0.0.1:8081
`)
	e := newTestEngine(sw.w, testOptions{})
	snap := sw.w.Snapshot()
	class := func(ns, ip string) encode.ProxyClass {
		return e.classOf(snap, &Node{ID: "p-" + ip, Type: encode.ProxySidecar, Namespace: ns, IPs: []netip.Addr{netip.MustParseAddr(ip)}})
	}
	web1, web2, api := class("c", "10.244.3.5"), class("c", "10.244.3.6"), class("c", "10.244.3.7")
	if web1 != web2 || web1.ProxyIPs != "" {
		t.Errorf("web pods under one Sidecar with explicit binds: classes differ\n%+v\n%+v", web1, web2)
	}
	if api == web1 {
		t.Error("api under another Sidecar shares web's class")
	}
	r1, r2 := class("a", "10.244.1.5"), class("a", "10.244.1.6")
	if r1 == r2 || r1.ProxyIPs != "10.244.1.5" || r1.Sidecar != "a/ratings" {
		t.Errorf("ratings pods (ingress without bind): classes %+v / %+v, want one per pod address", r1, r2)
	}
	// The two web proxies' inbound resources are one cached set.
	cache := verifyingCache()
	var first []Resource
	for _, ip := range []string{"10.244.3.5", "10.244.3.6"} {
		cl := class("c", ip)
		sc := NewScope(snap, &cl)
		rs, err := buildListeners(sc, encode.DefaultMesh(), cache, []string{encode.VirtualInboundListenerName}, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		if first == nil {
			first = rs
		} else if len(rs) != 1 || string(rs[0].Any) != string(first[0].Any) {
			t.Error("the web proxies' virtualInbound listeners differ")
		}
	}
}

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

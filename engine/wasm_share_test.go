package engine

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/internal/scenario"
)

const wasmShareServices = `apiVersion: v1
kind: Namespace
metadata: {name: shop}
---
apiVersion: v1
kind: Service
metadata: {name: reviews, namespace: shop}
spec:
  clusterIP: 10.96.0.60
  ports: [{name: http, port: 9080, targetPort: 9080, protocol: TCP}]
  selector: {app: reviews}
---
apiVersion: v1
kind: Service
metadata: {name: db, namespace: shop}
spec:
  clusterIP: 10.96.0.61
  ports: [{name: tcp, port: 5432, targetPort: 5432, protocol: TCP}]
`

// wasmSharePlugin selects reviews, on its outbound port 9080 only.
const wasmSharePlugin = `apiVersion: extensions.istio.io/v1alpha1
kind: WasmPlugin
metadata: {name: client, namespace: shop}
spec:
  selector: {matchLabels: {app: reviews}}
  url: oci://ghcr.io/example/client:v1
  match: [{mode: CLIENT, ports: [{number: 9080}]}]
`

// wasmListeners returns a proxy's listeners by name.
func wasmListeners(t *testing.T, e *Engine, ip, pod, app string) map[string]Resource {
	t.Helper()
	md := map[string]any{"NAMESPACE": "shop", "ISTIO_VERSION": "1.31.0", "INSTANCE_IPS": ip, "LABELS": map[string]any{"app": app}}
	conn := connectNode(t, e, refNode(t, "sidecar~"+ip+"~"+pod+".shop~shop.svc.cluster.local", md))
	defer conn.Close()
	rs, err := conn.Generate(encode.ListenerType, nil, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]Resource{}
	for _, r := range rs {
		out[r.Name] = r
	}
	return out
}

// TestWasmPluginListenersShared: a WasmPlugin is a value in the keys of
// exactly the listeners it changes. Two proxies of the class it selects
// get the same cached bytes for every listener; the one listener it
// applies to (port 9080, outbound) differs from a mesh without it, every
// other listener of the selected class and every listener of a class it
// does not select are byte for byte those of a mesh without WasmPlugins.
func TestWasmPluginListenersShared(t *testing.T) {
	plain := scenario.NewMesh()
	if err := plain.Apply("svc.yaml", []byte(wasmShareServices)); err != nil {
		t.Fatal(err)
	}
	withPlugin := scenario.NewMesh()
	if err := withPlugin.Apply("svc.yaml", []byte(wasmShareServices)); err != nil {
		t.Fatal(err)
	}
	if err := withPlugin.Apply("wasm.yaml", []byte(wasmSharePlugin)); err != nil {
		t.Fatal(err)
	}
	ep, ew := New(plain.W, Options{}), New(withPlugin.W, Options{})
	name := encode.WasmResourceName("shop", "client")

	r1 := wasmListeners(t, ew, "10.1.0.60", "reviews-1", "reviews")
	r2 := wasmListeners(t, ew, "10.1.0.61", "reviews-2", "reviews")
	for n, a := range r1 {
		if b := r2[n]; b.Version != a.Version || !bytes.Equal(a.Any, b.Any) || &a.Any[0] != &b.Any[0] {
			t.Errorf("%s: two proxies of one class do not share the cached listener", n)
		}
	}
	base := wasmListeners(t, ep, "10.1.0.60", "reviews-1", "reviews")
	changed := 0
	for n, a := range r1 {
		hasRef := strings.Contains(string(a.Any), name)
		same := bytes.Equal(a.Any, base[n].Any)
		switch {
		case n == "0.0.0.0_9080":
			changed++
			if !hasRef || same {
				t.Errorf("%s: the plugin's listener lacks its reference", n)
			}
		case hasRef || !same:
			t.Errorf("%s: a listener the plugin does not apply to changed", n)
		}
	}
	if changed != 1 || len(r1) != len(base) {
		t.Errorf("%d listeners with the plugin (%d without), %d changed, want 1", len(r1), len(base), changed)
	}
	other := wasmListeners(t, ew, "10.1.0.62", "ratings-1", "ratings")
	otherBase := wasmListeners(t, ep, "10.1.0.62", "ratings-1", "ratings")
	for n, a := range other {
		if !bytes.Equal(a.Any, otherBase[n].Any) {
			t.Errorf("%s: a class the plugin does not select changed", n)
		}
	}
}

const wasmTargetConfig = `apiVersion: v1
kind: Namespace
metadata: {name: shop}
---
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: public, namespace: shop}
spec:
  selector: {istio: ingressgateway}
  servers:
  - port: {number: 8080, name: http, protocol: HTTP}
    hosts: ["*"]
---
apiVersion: extensions.istio.io/v1alpha1
kind: WasmPlugin
metadata: {name: mine, namespace: shop}
spec:
  url: oci://ghcr.io/example/mine:v1
  targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: gw}]
---
apiVersion: extensions.istio.io/v1alpha1
kind: WasmPlugin
metadata: {name: theirs, namespace: shop}
spec:
  url: oci://ghcr.io/example/theirs:v1
  targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: other}]
`

// TestWasmPluginTargetRefs: a plugin with targetRefs attaches, as istiod's
// ShouldAttachPolicy does, only to the Gateway API gateway it names (the
// proxy labelled gateway.networking.k8s.io/gateway-name with that name):
// not to a gateway of another name, nor to a sidecar of its namespace.
func TestWasmPluginTargetRefs(t *testing.T) {
	sm := scenario.NewMesh()
	if err := sm.Apply("config.yaml", []byte(wasmTargetConfig)); err != nil {
		t.Fatal(err)
	}
	e := New(sm.W, Options{})
	listeners := func(id string, labels map[string]any) string {
		md, _ := structpb.NewStruct(map[string]any{"NAMESPACE": "shop", "ISTIO_VERSION": "1.31.0", "INSTANCE_IPS": strings.Split(id, "~")[1], "LABELS": labels})
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		conn, err := e.Connect(ctx, &corev3.Node{Id: id, Metadata: md}, "")
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		rs, err := conn.Generate(encode.ListenerType, nil, true, nil)
		if err != nil || len(rs) == 0 {
			t.Fatalf("%s: %d listeners, %v", id, len(rs), err)
		}
		var all []byte
		for _, r := range rs {
			all = append(all, r.Any...)
		}
		return string(all)
	}
	mine, theirs := encode.WasmResourceName("shop", "mine"), encode.WasmResourceName("shop", "theirs")
	gw := listeners("router~10.1.0.70~gw-1.shop~shop.svc.cluster.local", map[string]any{"istio": "ingressgateway", "gateway.networking.k8s.io/gateway-name": "gw"})
	if !strings.Contains(gw, mine) || strings.Contains(gw, theirs) {
		t.Errorf("gateway gw: has mine %v (want true), theirs %v (want false)", strings.Contains(gw, mine), strings.Contains(gw, theirs))
	}
	plain := listeners("router~10.1.0.71~ingress-1.shop~shop.svc.cluster.local", map[string]any{"istio": "ingressgateway"})
	if strings.Contains(plain, mine) || strings.Contains(plain, theirs) {
		t.Error("an Istio gateway (no gateway-name label) got a targetRefs plugin")
	}
	sidecar := listeners("sidecar~10.1.0.72~app-1.shop~shop.svc.cluster.local", map[string]any{"app": "x"})
	if strings.Contains(sidecar, mine) || strings.Contains(sidecar, theirs) {
		t.Error("a sidecar got a targetRefs plugin")
	}
}

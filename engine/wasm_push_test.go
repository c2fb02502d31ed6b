package engine_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/engine"
	"github.com/pilotfish-mesh/pilotfish/internal/scenario"
)

const wasmPushConfig = `apiVersion: v1
kind: Namespace
metadata: {name: shop}
---
apiVersion: v1
kind: Service
metadata: {name: reviews, namespace: shop}
spec:
  clusterIP: 10.96.0.50
  ports: [{name: http, port: 9080, targetPort: 9080, protocol: TCP}]
  selector: {app: reviews}
`

// shopMarker is a TCP service of shop on a port of its own: a change
// pushed to every sidecar of shop after the one a test counts.
const shopMarker = "apiVersion: v1\nkind: Service\nmetadata: {name: marker, namespace: shop}\nspec:\n  clusterIP: 10.96.0.59\n  ports: [{name: tcp, port: 7000, protocol: TCP}]\n"

func wasmPushPlugin(url string) string {
	return `apiVersion: extensions.istio.io/v1alpha1
kind: WasmPlugin
metadata: {name: authn, namespace: shop}
spec:
  selector: {matchLabels: {app: reviews}}
  url: ` + url + `
  phase: AUTHN
`
}

// newWasmClient is a client (SotW or Delta) for a sidecar of shop
// labelled app.
func newWasmClient(t *testing.T, ctx context.Context, addr, id, app string, delta bool) *meshClient {
	t.Helper()
	md, _ := structpb.NewStruct(map[string]any{"NAMESPACE": "shop", "ISTIO_VERSION": "1.31.0",
		"INSTANCE_IPS": strings.Split(id, "~")[1], "LABELS": map[string]any{"app": app}})
	return newADSClient(t, ctx, addr, &corev3.Node{Id: id, Metadata: md}, delta)
}

// TestWasmPluginPushes runs real ADS clients, SotW and Delta, for a
// sidecar the plugin selects and one it does not: the selected ones get
// the filter reference in LDS and, subscribing to its name, the extension
// config over ECDS; a change of the plugin's url pushes the new config over
// ECDS and no LDS (the references did not change) to the selected ones,
// and nothing to the other (a marker service, pushed to both afterwards,
// bounds what the change sent); deleting the plugin removes the reference
// from LDS.
func TestWasmPluginPushes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sm := scenario.NewMesh()
	applyFile(t, sm, "config.yaml", wasmPushConfig)
	applyFile(t, sm, "plugin.yaml", wasmPushPlugin("oci://ghcr.io/example/authn:v1"))
	_, addr := startMeshServer(t, sm.W, nil)
	name := encode.WasmResourceName("shop", "authn")
	sotw := newWasmClient(t, ctx, addr, "sidecar~10.1.0.50~reviews-1.shop~shop.svc.cluster.local", "reviews", false)
	delta := newWasmClient(t, ctx, addr, "sidecar~10.1.0.51~reviews-2.shop~shop.svc.cluster.local", "reviews", true)
	other := newWasmClient(t, ctx, addr, "sidecar~10.1.0.52~ratings-1.shop~shop.svc.cluster.local", "ratings", false)
	for _, c := range []*meshClient{sotw, delta} {
		c.waitFor(t, ctx, "the filter reference in LDS", func() bool { return c.has(engine.TypeListener, name) })
		c.subscribe(t, engine.TypeExtensionConfig, name)
		c.waitFor(t, ctx, "the extension config over ECDS", func() bool { return c.has(engine.TypeExtensionConfig, "ghcr.io/example/authn:v1") })
	}
	other.waitFor(t, ctx, "LDS", func() bool { return other.count(engine.TypeListener) > 0 })
	if other.has(engine.TypeListener, name) {
		t.Fatal("a sidecar the plugin does not select has its filter")
	}
	ldsBefore := []int{sotw.count(engine.TypeListener), delta.count(engine.TypeListener), other.count(engine.TypeListener)}
	otherCDS := other.count(engine.TypeCluster)

	applyFile(t, sm, "plugin.yaml", wasmPushPlugin("oci://ghcr.io/example/authn:v2"))
	for _, c := range []*meshClient{sotw, delta} {
		c.waitFor(t, ctx, "the new config over ECDS", func() bool { return c.has(engine.TypeExtensionConfig, "ghcr.io/example/authn:v2") })
	}
	applyFile(t, sm, "marker.yaml", shopMarker)
	for _, c := range []*meshClient{sotw, delta, other} {
		c.waitFor(t, ctx, "the marker's CDS and LDS", func() bool {
			return c.has(engine.TypeCluster, "marker.shop") && c.has(engine.TypeListener, "10.96.0.59_7000")
		})
	}
	if got := other.count(engine.TypeCluster); got != otherCDS+1 {
		t.Errorf("the unselected sidecar got %d CDS responses, want the marker's only", got-otherCDS)
	}
	if other.count(engine.TypeExtensionConfig) != 0 {
		t.Error("the unselected sidecar was sent ECDS")
	}
	// The marker adds a listener (7000) to each: one LDS each, none for the plugin.
	for i, c := range []*meshClient{sotw, delta, other} {
		if got := c.count(engine.TypeListener); got != ldsBefore[i]+1 {
			t.Errorf("client %d: %d LDS responses after the url change and the marker, want 1 (the marker's)", i, got-ldsBefore[i])
		}
	}

	deleteFile(t, sm, "plugin.yaml")
	for _, c := range []*meshClient{sotw, delta} {
		c.waitFor(t, ctx, "LDS without the reference", func() bool { return !c.has(engine.TypeListener, name) })
	}
}

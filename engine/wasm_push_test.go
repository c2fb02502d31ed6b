package engine_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
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

// wasmClient is a real ADS client (SotW or Delta) for one sidecar: it
// subscribes to LDS, and to ECDS for the names it is given, ACKs
// everything and keeps each type's response count and last resources.
type wasmClient struct {
	mu      sync.Mutex
	counts  map[string]int    // guarded by mu
	last    map[string][]byte // guarded by mu: the last response's resources, concatenated
	changed chan struct{}
	sotw    discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesClient
	delta   discoveryv3.AggregatedDiscoveryService_DeltaAggregatedResourcesClient
	node    *corev3.Node
	// subscribed are the names asked for, by type (SotW ACKs repeat them);
	// guarded by mu.
	subscribed map[string][]string
}

func newWasmClient(t *testing.T, ctx context.Context, addr, id, app string, delta bool) *wasmClient {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	md, _ := structpb.NewStruct(map[string]any{"NAMESPACE": "shop", "ISTIO_VERSION": "1.31.0",
		"INSTANCE_IPS": strings.Split(id, "~")[1], "LABELS": map[string]any{"app": app}})
	c := &wasmClient{counts: map[string]int{}, last: map[string][]byte{}, changed: make(chan struct{}, 1), node: &corev3.Node{Id: id, Metadata: md}}
	ads := discoveryv3.NewAggregatedDiscoveryServiceClient(cc)
	record := func(typ string, res [][]byte) {
		c.mu.Lock()
		c.counts[typ]++
		var all []byte
		for _, r := range res {
			all = append(all, r...)
		}
		c.last[typ] = all
		c.mu.Unlock()
		select {
		case c.changed <- struct{}{}:
		default:
		}
	}
	if delta {
		if c.delta, err = ads.DeltaAggregatedResources(ctx); err != nil {
			t.Fatal(err)
		}
		go func() {
			for {
				r, err := c.delta.Recv()
				if err != nil {
					return
				}
				var res [][]byte
				for _, x := range r.Resources {
					res = append(res, x.GetResource().GetValue())
				}
				record(r.TypeUrl, res)
				_ = c.delta.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: r.TypeUrl, ResponseNonce: r.Nonce})
			}
		}()
	} else {
		if c.sotw, err = ads.StreamAggregatedResources(ctx); err != nil {
			t.Fatal(err)
		}
		go func() {
			for {
				r, err := c.sotw.Recv()
				if err != nil {
					return
				}
				var res [][]byte
				for _, x := range r.Resources {
					res = append(res, x.Value)
				}
				record(r.TypeUrl, res)
				c.mu.Lock()
				names := c.subscribed[r.TypeUrl]
				c.mu.Unlock()
				_ = c.sotw.Send(&discoveryv3.DiscoveryRequest{TypeUrl: r.TypeUrl, VersionInfo: r.VersionInfo, ResponseNonce: r.Nonce, ResourceNames: names})
			}
		}()
	}
	c.subscribe(t, engine.TypeCluster)
	c.subscribe(t, engine.TypeListener)
	return c
}

// subscribe asks for typ (names: none is wildcard).
func (c *wasmClient) subscribe(t *testing.T, typ string, names ...string) {
	t.Helper()
	c.mu.Lock()
	if c.subscribed == nil {
		c.subscribed = map[string][]string{}
	}
	c.subscribed[typ] = names
	first := len(c.subscribed) == 1
	c.mu.Unlock()
	var err error
	if c.delta != nil {
		req := &discoveryv3.DeltaDiscoveryRequest{TypeUrl: typ, ResourceNamesSubscribe: names}
		if first {
			req.Node = c.node
		}
		err = c.delta.Send(req)
	} else {
		req := &discoveryv3.DiscoveryRequest{TypeUrl: typ, ResourceNames: names}
		if first {
			req.Node = c.node
		}
		err = c.sotw.Send(req)
	}
	if err != nil {
		t.Fatal(err)
	}
}

func (c *wasmClient) count(typ string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[typ]
}

func (c *wasmClient) has(typ, s string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.Contains(string(c.last[typ]), s)
}

func (c *wasmClient) waitFor(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-c.changed:
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			t.Fatalf("%s: %v", what, ctx.Err())
		}
	}
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
	if err := sm.Apply("config.yaml", []byte(wasmPushConfig)); err != nil {
		t.Fatal(err)
	}
	if err := sm.Apply("plugin.yaml", []byte(wasmPushPlugin("oci://ghcr.io/example/authn:v1"))); err != nil {
		t.Fatal(err)
	}
	_, addr := startMeshServer(t, sm.W)
	name := encode.WasmResourceName("shop", "authn")
	sotw := newWasmClient(t, ctx, addr, "sidecar~10.1.0.50~reviews-1.shop~shop.svc.cluster.local", "reviews", false)
	delta := newWasmClient(t, ctx, addr, "sidecar~10.1.0.51~reviews-2.shop~shop.svc.cluster.local", "reviews", true)
	other := newWasmClient(t, ctx, addr, "sidecar~10.1.0.52~ratings-1.shop~shop.svc.cluster.local", "ratings", false)
	for _, c := range []*wasmClient{sotw, delta} {
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

	if err := sm.Apply("plugin.yaml", []byte(wasmPushPlugin("oci://ghcr.io/example/authn:v2"))); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*wasmClient{sotw, delta} {
		c.waitFor(t, ctx, "the new config over ECDS", func() bool { return c.has(engine.TypeExtensionConfig, "ghcr.io/example/authn:v2") })
	}
	if err := sm.Apply("marker.yaml", []byte("apiVersion: v1\nkind: Service\nmetadata: {name: marker, namespace: shop}\nspec:\n  clusterIP: 10.96.0.59\n  ports: [{name: tcp, port: 7000, protocol: TCP}]\n")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*wasmClient{sotw, delta, other} {
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
	for i, c := range []*wasmClient{sotw, delta, other} {
		if got := c.count(engine.TypeListener); got != ldsBefore[i]+1 {
			t.Errorf("client %d: %d LDS responses after the url change and the marker, want 1 (the marker's)", i, got-ldsBefore[i])
		}
	}

	if err := sm.Delete("plugin.yaml"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*wasmClient{sotw, delta} {
		c.waitFor(t, ctx, "LDS without the reference", func() bool { return !c.has(engine.TypeListener, name) })
	}
}

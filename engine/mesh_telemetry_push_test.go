package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/engine"
	"github.com/pilotfish-mesh/pilotfish/index"
)

// TestSetMeshStatsPushed: a real ADS client's listeners gain istio.stats
// when the mesh's default metrics provider turns stats on at run time, and
// lose it when it is turned off again.
func TestSetMeshStatsPushed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	w := index.NewWriter()
	putService(w, "reviews", "http", 80, index.ProtocolHTTP, nil)
	eng, addr := startMeshServer(t, w, nil)

	c := newMeshClient(t, ctx, addr, "sidecar~10.1.0.1~a-1.shop~shop.svc.cluster.local", "shop")
	c.waitFor(t, ctx, "first LDS", func() bool { return c.has(engine.TypeListener, "0.0.0.0_80") })
	if c.has(engine.TypeListener, "istio.stats") {
		t.Fatal("the default mesh's listeners carry istio.stats")
	}
	on := encode.DefaultMesh()
	on.Stats = true
	if !eng.SetMesh(on) {
		t.Fatal("stats on is not a change")
	}
	c.waitFor(t, ctx, "LDS with stats", func() bool {
		return c.has(engine.TypeListener, "istio.stats") && c.has(engine.TypeListener, "type.googleapis.com/stats.PluginConfig")
	})
	if !eng.SetMesh(encode.DefaultMesh()) {
		t.Fatal("stats off is not a change")
	}
	c.waitFor(t, ctx, "LDS without stats", func() bool { return !c.has(engine.TypeListener, "istio.stats") })
}

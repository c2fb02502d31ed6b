package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/engine"
	"github.com/pilotfish-mesh/pilotfish/index"
)

// TestSetMeshPushesAffected runs real ADS clients (two sidecars, one
// gateway) against the engine and serve: a mesh equal to the current one
// pushes nothing; REGISTRY_ONLY sends the sidecars one new LDS (their
// outbound listener's passthrough route changes) and the gateway nothing.
// Every client then gets a marker service's CDS: pushes to one stream are
// sent in order, so what a client received before the marker is all the
// mesh change sent it.
func TestSetMeshPushesAffected(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	w := index.NewWriter()
	addService := func(name string, port uint32, proto index.Protocol) { putService(w, name, "p", port, proto, nil) }
	addService("reviews", 80, index.ProtocolHTTP)
	eng, addr := startMeshServer(t, w, nil)

	sidecars := []*meshClient{
		newMeshClient(t, ctx, addr, "sidecar~10.1.0.1~a-1.shop~shop.svc.cluster.local", "shop"),
		newMeshClient(t, ctx, addr, "sidecar~10.1.0.2~b-1.other~other.svc.cluster.local", "other"),
	}
	router := newMeshClient(t, ctx, addr, "router~10.1.0.3~gw-1.istio-system~istio-system.svc.cluster.local", "istio-system")
	all := append(sidecars[:2:2], router)
	marker := 0
	// settle adds a marker TCP service on a port of its own and waits for
	// every client's CDS to hold it, and the sidecars' LDS (its outbound
	// listener: LDS is sent after CDS); it returns each client's LDS
	// count then.
	settle := func() []int {
		marker++
		name := "marker" + string(rune('a'+marker))
		port := uint32(9000 + marker)
		addService(name, port, index.ProtocolTCP)
		out := make([]int, len(all))
		for i, c := range all {
			c.waitFor(t, ctx, "marker CDS", func() bool { return c.has(engine.TypeCluster, name+".shop") })
			if c != router {
				c.waitFor(t, ctx, "marker LDS", func() bool { return c.has(engine.TypeListener, "_"+itoa(port)) })
			}
			out[i] = c.count(engine.TypeListener)
		}
		return out
	}
	before := settle()

	if eng.SetMesh(encode.DefaultMesh()) {
		t.Error("an equal mesh is a change")
	}
	after := settle()
	for i := range all {
		want := 1 // the marker's listener
		if all[i] == router {
			want = 0
		}
		if d := after[i] - before[i]; d != want {
			t.Errorf("client %d: %d LDS responses after an equal mesh and a marker, want %d", i, d, want)
		}
	}

	m := encode.DefaultMesh()
	m.OutboundAllowAny = false
	if !eng.SetMesh(m) {
		t.Fatal("REGISTRY_ONLY is not a change")
	}
	for i, c := range sidecars {
		c.waitFor(t, ctx, "REGISTRY_ONLY LDS", func() bool { return c.count(engine.TypeListener) > after[i] })
	}
	final := settle()
	for i := range sidecars {
		// The mesh's LDS, then the marker's.
		if d := final[i] - after[i]; d != 2 {
			t.Errorf("sidecar %d: %d LDS responses after REGISTRY_ONLY and a marker, want 2", i, d)
		}
	}
	if d := final[2] - after[2]; d != 0 {
		t.Errorf("gateway: %d LDS responses after REGISTRY_ONLY, want 0", d)
	}
	if eng.Mesh() != m {
		t.Error("Mesh() is not the mesh set")
	}
}

func itoa(n uint32) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}

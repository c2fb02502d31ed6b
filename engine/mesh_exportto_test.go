package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/engine"
	"github.com/pilotfish-mesh/pilotfish/index"
)

// TestSetMeshExportToDefaults: a mesh change of defaultServiceExportTo
// reaches running proxies without any config change: the class scopes made
// with the old mesh are dropped, so a Service without exportTo becomes
// private to its namespace for the sidecar of another one, and visible
// again when the default goes back.
func TestSetMeshExportToDefaults(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	w := index.NewWriter()
	putService(w, "reviews", "http", 80, index.ProtocolHTTP, func(s *index.Service) { s.ExportTo = index.ExportTo{Unset: true} })
	eng, addr := startMeshServer(t, w, nil)

	home := newMeshClient(t, ctx, addr, "sidecar~10.1.0.1~a-1.shop~shop.svc.cluster.local", "shop")
	other := newMeshClient(t, ctx, addr, "sidecar~10.1.0.2~b-1.other~other.svc.cluster.local", "other")
	const cluster = "outbound|80||reviews.shop.svc.cluster.local"
	for _, c := range []*meshClient{home, other} {
		c.waitFor(t, ctx, "reviews visible under istiod's default", func() bool { return c.has(engine.TypeCluster, cluster) })
	}

	private := encode.DefaultMesh()
	private.DefaultServiceExportTo = []string{"."}
	if !eng.SetMesh(private) {
		t.Fatal("defaultServiceExportTo [.] is not a change")
	}
	other.waitFor(t, ctx, "reviews hidden from other namespaces", func() bool { return !other.has(engine.TypeCluster, cluster) })
	if !home.has(engine.TypeCluster, cluster) {
		t.Error("reviews hidden from its own namespace")
	}

	if !eng.SetMesh(encode.DefaultMesh()) {
		t.Fatal("back to the default is not a change")
	}
	other.waitFor(t, ctx, "reviews visible again", func() bool { return other.has(engine.TypeCluster, cluster) })
}

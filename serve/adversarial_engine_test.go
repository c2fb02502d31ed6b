package serve_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/pilotfish-mesh/pilotfish/engine"
	"github.com/pilotfish-mesh/pilotfish/internal/scenario"
	"github.com/pilotfish-mesh/pilotfish/serve"
)

// engineBackend serves the real engine.
type engineBackend struct{ e *engine.Engine }

func (b engineBackend) Connect(ctx context.Context, n *corev3.Node, peer string) (serve.Session, error) {
	c, err := b.e.Connect(ctx, n, peer)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// TestAdversarialConfigChurnEngine is issue 21's attack 5 as reported, at
// a smaller scale, end to end: ServiceEntries in the index, the real
// engine, sidecars on SotW streams (CDS, EDS, LDS). Each edit moves one
// ServiceEntry's address (a new listener set for every sidecar) and its
// endpoint; heap after GC must not grow with the number of edits.
func TestAdversarialConfigChurnEngine(t *testing.T) {
	const services, proxies, edits = 1000, 10, 15
	// ses renders the ServiceEntries, the one numbered edit at generation
	// gen (a new address and endpoint), all but the first n dropped.
	ses := func(n, edit, gen int) []byte {
		var y bytes.Buffer
		for i := range n {
			g := 0
			if i == edit {
				g = gen
			}
			fmt.Fprintf(&y, `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: svc-%04d, namespace: shop}
spec:
  hosts: [svc-%04d.shop.svc.cluster.local]
  addresses: [10.%d.%d.%d]
  ports: [{number: 9000, name: tcp, protocol: TCP}]
  resolution: STATIC
  endpoints: [{address: 10.%d.%d.%d}]
---
`, i, i, 100+g%100, i/250, i%250+1, 200+g%50, i/250, i%250+1)
		}
		return y.Bytes()
	}
	m := scenario.NewMesh()
	if err := m.Apply("ses.yaml", ses(services, -1, 0)); err != nil {
		t.Fatal(err)
	}

	eng := engine.New(m.W, engine.Options{DebounceAfter: 5 * time.Millisecond, DebounceMax: 100 * time.Millisecond})
	// Verify mode (PILOTFISH_VERIFY_CACHE) regenerates every cache hit,
	// which makes this test fifteen times slower; what it checks is what
	// serve keeps, not the cache's bytes.
	eng.Cache().SetVerify(false)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); eng.Run(ctx) }()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(serve.ServerOptions()...)
	srv := serve.NewXDSServer(engineBackend{eng}, serve.XDSOptions{})
	srv.Register(gs)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(func() { gs.Stop(); cancel(); wg.Wait() })
	before := heapAfterGC()

	a := &advServer{addr: lis.Addr().String(), srv: srv}
	for i := range proxies {
		startSidecar(t, a, fmt.Sprintf("sidecar~10.1.0.%d~app-%d.shop~shop.svc.cluster.local", i+1, i))
	}
	// synced waits until every sidecar ACKed an LDS response newer than
	// last[id] and its last EDS response, and returns the LDS versions.
	synced := func(what string, last map[string]string) map[string]string {
		t.Helper()
		now := map[string]string{}
		waitFor(t, what, func() bool {
			conns := srv.Connections()
			if len(conns) != proxies {
				return false
			}
			for _, ci := range conns {
				var lds, eds *serve.TypeStatus
				for i := range ci.Types {
					switch ci.Types[i].TypeURL {
					case engine.TypeListener:
						lds = &ci.Types[i]
					case engine.TypeEndpoint:
						eds = &ci.Types[i]
					}
				}
				if lds == nil || eds == nil || lds.SentVersion == last[ci.ID] || lds.AckedNonce != lds.SentNonce || eds.AckedNonce != eds.SentNonce {
					return false
				}
				now[ci.ID] = lds.SentVersion
			}
			return true
		})
		return now
	}
	versions := synced("initial config", nil)
	loaded := heapAfterGC()
	for e := 1; e <= edits; e++ {
		if err := m.Apply("ses.yaml", ses(services, e%services, e)); err != nil {
			t.Fatal(err)
		}
		versions = synced(fmt.Sprintf("edit %d", e), versions)
	}
	during := heapAfterGC()
	t.Logf("%d ServiceEntries, %d sidecars, real engine: heap after GC %s before, %s synced, %s after %d edits (%+.2f MiB per edit)",
		services, proxies, mib(before), mib(loaded), mib(during), edits, (float64(during)-float64(loaded))/(1<<20)/edits)
	if during > loaded+heapMargin {
		t.Errorf("heap after GC grew from %s to %s over %d edits", mib(loaded), mib(during), edits)
	}

	// Delete all but one: with the sidecars still connected, heap after GC
	// goes back to where it was before they connected, when the index held
	// all of them.
	if err := m.Apply("ses.yaml", ses(1, -1, 0)); err != nil {
		t.Fatal(err)
	}
	synced("deletion", versions)
	deleted := heapAfterGC()
	a.leave(t)
	t.Logf("after deleting %d of them, sidecars connected: %s; after the sidecars left: %s", services-1, mib(deleted), mib(heapAfterGC()))
	if deleted > before+heapMargin {
		t.Errorf("heap after GC %s once the config was deleted, %s before the sidecars connected", mib(deleted), mib(before))
	}
}

// startSidecar is a SotW sidecar: CDS and LDS wildcard, EDS for every EDS
// cluster it is sent, every response ACKed.
func startSidecar(t *testing.T, a *advServer, id string) {
	t.Helper()
	st := openSotW(t, a)
	node := &corev3.Node{Id: id}
	for _, typeURL := range []string{engine.TypeCluster, engine.TypeListener} {
		if err := st.Send(&discoveryv3.DiscoveryRequest{Node: node, TypeUrl: typeURL}); err != nil {
			t.Fatal(err)
		}
		node = nil
	}
	go func() {
		var eds []string
		for {
			r, err := st.Recv()
			if err != nil {
				return
			}
			ack := &discoveryv3.DiscoveryRequest{TypeUrl: r.TypeUrl, VersionInfo: r.VersionInfo, ResponseNonce: r.Nonce}
			switch r.TypeUrl {
			case engine.TypeCluster:
				var names []string
				for _, res := range r.Resources {
					var c clusterv3.Cluster
					if proto.Unmarshal(res.Value, &c) == nil && c.GetType() == clusterv3.Cluster_EDS {
						names = append(names, c.GetName())
					}
				}
				if err := st.Send(ack); err != nil {
					return
				}
				if eds == nil || len(names) != len(eds) {
					eds = names
					ack = &discoveryv3.DiscoveryRequest{TypeUrl: engine.TypeEndpoint, ResourceNames: eds}
				} else {
					continue
				}
			case engine.TypeEndpoint:
				ack.ResourceNames = eds
			}
			if err := st.Send(ack); err != nil {
				return
			}
		}
	}()
}

package serve_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"

	"github.com/pilotfish-mesh/pilotfish/engine"
	"github.com/pilotfish-mesh/pilotfish/serve"
)

// TestAdversarialConfigChurn (issue 21, attack 5): repeated edits of one
// service in a large config, with SotW and Delta proxies connected, must
// not leave the bodies, held sets and transitions of superseded versions
// behind; once the large config is deleted, heap after GC is back near
// where it was before it existed, with the proxies still connected.
func TestAdversarialConfigChurn(t *testing.T) {
	a := startAdv(t, serve.XDSOptions{Limits: serve.Limits{MaxSubscribedNames: 100000}})
	c := startCanary(t, a)
	before := heapAfterGC()

	const services, edits, proxies = 2000, 15, 6 // proxies per protocol
	name := func(i int) string {
		return fmt.Sprintf("outbound|8080||service-%05d.%s.svc.cluster.local", i, strings.Repeat("namespace", 10))
	}
	names := make([]string, services)
	for i := range names {
		names[i] = name(i)
	}
	set := func(i, gen int) []proto.Message {
		return []proto.Message{cluster(name(i), gen), cla(name(i), fmt.Sprintf("10.%d.%d.%d", gen%250, i/250, i%250+1), 8080)}
	}
	var all []proto.Message
	for i := range services {
		all = append(all, set(i, 0)...)
	}
	a.b.set(t, all...)

	// Every proxy subscribes to all clusters and their endpoints and ACKs
	// everything: two ACKs per edit (CDS and EDS).
	var ps []*autoProxy
	for i := range proxies {
		ps = append(ps, startAutoProxy(t, a, fmt.Sprintf("sotw-%d", i), false, names),
			startAutoProxy(t, a, fmt.Sprintf("delta-%d", i), true, names))
	}
	want := 2
	synced := func(what string) {
		t.Helper()
		for _, p := range ps {
			waitFor(t, fmt.Sprintf("%s: %s to ACK %d responses", what, p.id, want), func() bool {
				acks, _ := p.sess.counts()
				return acks >= want
			})
		}
	}
	synced("initial config")
	loaded := heapAfterGC()

	for e := 1; e <= edits; e++ {
		a.b.set(t, set(e%services, e)...)
		a.b.push(engine.Push{Full: true})
		want += 2
		synced(fmt.Sprintf("edit %d", e))
		if e == edits/2 {
			c.change() // a CDS response for every proxy too
			want++
			synced("canary change")
		}
	}
	during := heapAfterGC()
	t.Logf("%d services, %d SotW + %d Delta proxies: heap after GC %s synced, %s after %d edits",
		services, proxies, proxies, mib(loaded), mib(during), edits)
	if during > loaded+heapMargin {
		t.Errorf("heap after GC grew from %s to %s over %d edits: superseded versions are kept", mib(loaded), mib(during), edits)
	}

	// Delete the large config: the proxies get the removals and stay.
	a.b.remove(engine.TypeCluster, names...)
	a.b.remove(engine.TypeEndpoint, names...)
	a.b.push(engine.Push{Full: true})
	want += 2
	synced("deletion")
	deleted := heapAfterGC()
	t.Logf("after the deletion, with the proxies connected: heap after GC %s", mib(deleted))
	if deleted > before+heapMargin {
		t.Errorf("heap after GC %s once the large config was deleted, %s before it existed", mib(deleted), mib(before))
	}
	a.leave(t)
	report(t, "config churn", before, during, heapAfterGC(), c)
}

// autoProxy subscribes to every cluster and to names' endpoints, and ACKs
// every response, as Envoy does.
type autoProxy struct {
	id   string
	sess *testSession
}

func startAutoProxy(t *testing.T, a *advServer, id string, delta bool, names []string) *autoProxy {
	t.Helper()
	node := &corev3.Node{Id: id}
	var once sync.Once
	if delta {
		d := openDelta(t, a)
		if err := d.Send(&discoveryv3.DeltaDiscoveryRequest{Node: node, TypeUrl: engine.TypeCluster}); err != nil {
			t.Fatal(err)
		}
		go func() {
			for {
				r, err := d.Recv()
				if err != nil {
					return
				}
				ack := &discoveryv3.DeltaDiscoveryRequest{TypeUrl: r.TypeUrl, ResponseNonce: r.Nonce}
				if err := d.Send(ack); err != nil {
					return
				}
				once.Do(func() {
					err = d.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: engine.TypeEndpoint, ResourceNamesSubscribe: names})
				})
				if err != nil {
					return
				}
			}
		}()
	} else {
		st := openSotW(t, a)
		if err := st.Send(&discoveryv3.DiscoveryRequest{Node: node, TypeUrl: engine.TypeCluster}); err != nil {
			t.Fatal(err)
		}
		go func() {
			for {
				r, err := st.Recv()
				if err != nil {
					return
				}
				ack := &discoveryv3.DiscoveryRequest{TypeUrl: r.TypeUrl, VersionInfo: r.VersionInfo, ResponseNonce: r.Nonce}
				if r.TypeUrl == engine.TypeEndpoint {
					ack.ResourceNames = names
				}
				if err := st.Send(ack); err != nil {
					return
				}
				once.Do(func() {
					err = st.Send(&discoveryv3.DiscoveryRequest{TypeUrl: engine.TypeEndpoint, ResourceNames: names})
				})
				if err != nil {
					return
				}
			}
		}()
	}
	return &autoProxy{id: id, sess: a.b.session(t, id)}
}

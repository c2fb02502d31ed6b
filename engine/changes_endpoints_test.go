package engine

import (
	"context"
	"net/netip"
	"testing"
	"time"

	networking "istio.io/api/networking/v1alpha3"

	"github.com/pilotfish-mesh/pilotfish/index"
)

// TestServiceEntryEndpointChangeTakesFastPath: moving a ServiceEntry's
// inline endpoint rewrites its config row and its endpoint shard, but not its
// service: the push is EDS only, for that service's cluster. A change to
// another config kind in the same batch still makes a full push.
func TestServiceEntryEndpointChangeTakesFastPath(t *testing.T) {
	m := newTestMesh(t)
	e := New(m.w, Options{DebounceAfter: 10 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go e.Run(ctx)
	c, err := e.Connect(ctx, sidecarNode(t, "10.1.0.1", "p1", "a"), "")
	if err != nil {
		t.Fatal(err)
	}
	sy := m.w.Symbols()
	seKey := index.ConfigKey{Namespace: m.nsA, Name: sy.Intern("se")}
	moveEndpoint := func(last byte, extra *index.Config) {
		var b index.Batch
		b.PutConfig(index.Config{Kind: index.ConfigServiceEntry, Key: seKey, Spec: &networking.ServiceEntry{}, Hash: uint64(last)})
		if extra != nil {
			b.PutConfig(*extra)
		}
		b.PutEndpoints(m.svcA, index.EndpointGroup{Source: m.slice, Endpoints: []index.Endpoint{{Addr: netip.AddrFrom4([4]byte{10, 0, 0, last})}}})
		m.w.Apply(&b)
	}

	moveEndpoint(1, nil)
	p, ok := waitPush(t, c, 2*time.Second)
	if !ok || p.Full || len(p.Types) != 1 || p.Types[0] != TypeEndpoint {
		t.Fatalf("push %+v (ok=%v), want an EDS-only push", p, ok)
	}
	if want := "outbound|80||one.a.svc.cluster.local"; len(p.Endpoints) != 1 || p.Endpoints[0] != want {
		t.Fatalf("push names %v, want [%s]", p.Endpoints, want)
	}

	vs := index.Config{Kind: index.ConfigVirtualService, Key: index.ConfigKey{Namespace: m.nsA, Name: sy.Intern("vs")}, Spec: &networking.VirtualService{}, Hash: 7}
	moveEndpoint(2, &vs)
	if p, ok := waitPush(t, c, 2*time.Second); !ok || !p.Full {
		t.Fatalf("push %+v (ok=%v), want a full push when a VirtualService changed too", p, ok)
	}
}

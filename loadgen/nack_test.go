package loadgen

import (
	"fmt"
	"sync/atomic"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"
)

// lastRequest decodes the rig's last request: its type, whether it is a
// NACK, and (SotW) the names it asks for.
func lastRequest(t *testing.T, rig *handleRig, mode Mode) (typeURL string, nack bool, names int) {
	t.Helper()
	if mode == Delta {
		var req discoveryv3.DeltaDiscoveryRequest
		if err := proto.Unmarshal(rig.sink.last, &req); err != nil {
			t.Fatal(err)
		}
		return req.GetTypeUrl(), req.GetErrorDetail() != nil, len(req.GetResourceNamesSubscribe())
	}
	var req discoveryv3.DiscoveryRequest
	if err := proto.Unmarshal(rig.sink.last, &req); err != nil {
		t.Fatal(err)
	}
	return req.GetTypeUrl(), req.GetErrorDetail() != nil, len(req.GetResourceNames())
}

// TestNackedIsDelivered: with NackRate 1 a proxy NACKs the first response
// of each type and ACKs the next. A NACKed response answers its type (and
// the names it carries), so the proxy reaches full config holding nothing
// it rejected, and subscribes only to what it ACKed, as Envoy initializes
// past a rejected response.
func TestNackedIsDelivered(t *testing.T) {
	const services = 5
	for _, mode := range []Mode{SotW, Delta} {
		t.Run(string(mode), func(t *testing.T) {
			rig := newHandleRigOf(t, Config{XDS: "sink", Proxies: 1, Mode: mode, NackRate: 1})
			p, r := rig.p, rig.p.run
			mesh := benchMesh(t, mode, services)
			steps := []struct {
				name    string
				msg     []byte
				nack    bool
				next    string // type of the last request sent
				full    bool
				held    [numTypes]int
				nacking int64
			}{
				{"CDS rejected: LDS next", mesh[typeCDS], true, ListenerType, false, [numTypes]int{}, 1},
				{"LDS rejected: full config", mesh[typeLDS], true, ListenerType, true, [numTypes]int{}, 1},
				{"CDS accepted: EDS next", mesh[typeCDS], false, EndpointType, false, [numTypes]int{services, 0, 0, 0}, 1},
				{"EDS rejected", mesh[typeEDS], true, EndpointType, true, [numTypes]int{services, 0, 0, 0}, 1},
				{"LDS accepted: RDS next", mesh[typeLDS], false, RouteType, false, [numTypes]int{services, 0, 2, 0}, 1},
				{"RDS rejected", mesh[typeRDS], true, RouteType, true, [numTypes]int{services, 0, 2, 0}, 1},
				{"EDS accepted", mesh[typeEDS], false, EndpointType, true, [numTypes]int{services, services, 2, 0}, 1},
				{"RDS accepted", mesh[typeRDS], false, RouteType, true, [numTypes]int{services, services, 2, 2}, 0},
			}
			for _, s := range steps {
				if err := rig.feed(s.msg); err != nil {
					t.Fatalf("%s: %v", s.name, err)
				}
				typ, _, _ := lastRequest(t, rig, mode)
				if typ != s.next {
					t.Errorf("%s: last request of %s, want %s", s.name, typ, s.next)
				}
				if p.full != s.full {
					t.Errorf("%s: full %v, want %v", s.name, p.full, s.full)
				}
				for ty := range numTypes {
					if got := p.held(ty); got != s.held[ty] {
						t.Errorf("%s: holds %d %s, want %d", s.name, got, ty, s.held[ty])
					}
				}
				if got := r.nackingNow.Load(); got != s.nacking {
					t.Errorf("%s: %d NACKing proxies, want %d", s.name, got, s.nacking)
				}
			}
			if got := r.fullCount.Load(); got != 1 {
				t.Errorf("full config recorded %d times", got)
			}
			var nacks, acks int64
			for ty := range numTypes {
				nacks += r.types[ty].nacks.Load()
				acks += r.types[ty].acks.Load()
			}
			if nacks != 4 || acks != 4 {
				t.Errorf("%d NACKs, %d ACKs; want 4 of each", nacks, acks)
			}
		})
	}
}

// TestNackedChangeConverges: a change delivered in a NACKed response has
// converged on the proxy (nack.go); a NACKed response without it has not.
// The rejected content is not applied: nothing new is held or subscribed.
func TestNackedChangeConverges(t *testing.T) {
	const services = 5
	cluster := func(i int) string { return istioLikeCluster(t, i).GetName() }
	clusters := func(mode Mode, extra, without int) []byte {
		var msgs []proto.Message
		for i := range services + extra {
			if i != without {
				msgs = append(msgs, istioLikeCluster(t, i))
			}
		}
		return encodeResponse(t, mode, ClusterType, "v2", "n-2", msgs)
	}
	removal := func(name string) []byte {
		b, err := proto.Marshal(&discoveryv3.DeltaDiscoveryResponse{TypeUrl: ClusterType, Nonce: "gone", RemovedResources: []string{name}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	type tc struct {
		name   string
		mode   Mode
		expect string // "": a version bump
		msg    []byte
		want   bool
	}
	var cases []tc
	for _, mode := range []Mode{SotW, Delta} {
		cases = append(cases,
			tc{"added", mode, "cds/" + cluster(services), clusters(mode, 1, -1), true},
			tc{"not in it", mode, "cds/new.example.com", clusters(mode, 1, -1), false},
			tc{"version bump", mode, "", clusters(mode, 0, -1), true},
		)
	}
	cases = append(cases,
		tc{"removed", SotW, "!cds/" + cluster(3), clusters(SotW, 0, 3), true},
		tc{"still there", SotW, "!cds/" + cluster(3), clusters(SotW, 0, -1), false},
		tc{"removed", Delta, "!cds/" + cluster(3), removal(cluster(3)), true},
		tc{"other removed", Delta, "!cds/" + cluster(3), removal(cluster(2)), false},
	)
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s/%s", c.mode, c.name), func(t *testing.T) {
			rig := fullRig(t, c.mode, services)
			p, r := rig.p, rig.p.run
			r.cfg.NackRate = 1
			ch := &changeState{index: 1, conv: make([]atomic.Int64, 1), n: 1, done: make(chan struct{}), base: []uint32{p.bumps.Load()}}
			if c.expect != "" {
				e, err := parseExpect(c.expect, 1)
				if err != nil {
					t.Fatal(err)
				}
				ch.expect, ch.expectID, ch.base = &e, r.syms.idString(e.name), nil
			}
			r.change.Store(ch)
			sent := rig.sink.sent
			heldCDS, heldEDS := p.held(typeCDS), p.held(typeEDS)
			if err := rig.feed(c.msg); err != nil {
				t.Fatal(err)
			}
			if got := ch.count.Load() == 1; got != c.want {
				t.Errorf("converged %v, want %v", got, c.want)
			}
			if _, nack, _ := lastRequest(t, rig, c.mode); !nack || rig.sink.sent-sent != 1 {
				t.Errorf("%d requests sent, last a NACK: %v; want the NACK only", rig.sink.sent-sent, nack)
			}
			if p.held(typeCDS) != heldCDS || p.held(typeEDS) != heldEDS || !p.full {
				t.Errorf("after the NACK: holds %d CDS, %d EDS (had %d, %d), full %v", p.held(typeCDS), p.held(typeEDS),
					heldCDS, heldEDS, p.full)
			}
		})
	}
}

// TestAnsweredAll checks answeredAll against a map model.
func TestAnsweredAll(t *testing.T) {
	have := []ref{{name: 1}, {name: 1, ref: 9}, {name: 4}, {name: 7}}
	for _, c := range []struct {
		rejected, names []uint32
		want            bool
	}{
		{nil, nil, true},
		{nil, []uint32{1, 4, 7}, true},
		{nil, []uint32{1, 2}, false},
		{[]uint32{2}, []uint32{1, 2}, true},
		{[]uint32{2, 3}, []uint32{1, 2, 3, 4, 5}, false},
		{[]uint32{2, 3, 5}, []uint32{1, 2, 3, 4, 5, 7}, true},
		{[]uint32{0, 8}, []uint32{0, 8}, true},
	} {
		if got := answeredAll(have, c.rejected, c.names); got != c.want {
			t.Errorf("answeredAll(%v, %v) = %v, want %v", c.rejected, c.names, got, c.want)
		}
	}
	if got := keepIDs([]uint32{1, 2, 3, 4}, []uint32{2, 4, 5}); fmt.Sprint(got) != "[2 4]" {
		t.Errorf("keepIDs = %v", got)
	}
	if got := dropIDs([]uint32{1, 2, 3, 4}, []uint32{2, 4, 5}); fmt.Sprint(got) != "[1 3]" {
		t.Errorf("dropIDs = %v", got)
	}
}

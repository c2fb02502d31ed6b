package loadgen

import (
	"math/rand/v2"
	"slices"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
)

// The per-response bookkeeping, driven through handleRig (see
// handle_bench_test.go): a sidecar at full config of benchMesh.

// ackOf decodes the rig's last request, a delta ACK.
func ackOf(t *testing.T, rig *handleRig) *discoveryv3.DeltaDiscoveryRequest {
	t.Helper()
	var req discoveryv3.DeltaDiscoveryRequest
	if err := proto.Unmarshal(rig.sink.last, &req); err != nil {
		t.Fatal(err)
	}
	return &req
}

// TestDeltaFullConfigFollowsRemovals: full config is cached per type, so
// it must be lost when a subscribed resource is removed and regained when
// it comes back; an unsubscribed resource is not held.
func TestDeltaFullConfigFollowsRemovals(t *testing.T) {
	const services = 20
	rig := fullRig(t, Delta, services)
	name := istioLikeCluster(t, 3).GetName()
	removal, err := proto.Marshal(&discoveryv3.DeltaDiscoveryResponse{TypeUrl: EndpointType, Nonce: "gone",
		RemovedResources: []string{name}})
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name  string
		msg   []byte
		full  bool
		eds   int
		nonce string
	}{
		{"removed", removal, false, services - 1, "gone"},
		{"unsubscribed CLA", encodeResponse(t, Delta, EndpointType, "", "stranger",
			[]proto.Message{cla("not-subscribed", 0, 0)}), false, services - 1, "stranger"},
		{"back", encodeResponse(t, Delta, EndpointType, "", "back",
			[]proto.Message{cla(name, 3, 1)}), true, services, "back"},
		{"update", edsPushes(t, services, 1)[0], true, services, "nonce-1000"},
	}
	for _, s := range steps {
		if err := rig.feed(s.msg); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if rig.p.full != s.full || rig.p.held(typeEDS) != s.eds {
			t.Errorf("%s: full %v holding %d EDS, want %v and %d", s.name, rig.p.full, rig.p.held(typeEDS), s.full, s.eds)
		}
		if ack := ackOf(t, rig); ack.GetResponseNonce() != s.nonce || ack.GetTypeUrl() != EndpointType || ack.GetErrorDetail() != nil {
			t.Errorf("%s: ACK %v, want nonce %q", s.name, ack, s.nonce)
		}
	}
}

// TestSotWRepeatedCDSSendsOnlyTheACK: a CDS push repeating the clusters
// held is ACKed (with its version) and changes no subscription; one with a
// new EDS cluster also subscribes to its service.
func TestSotWRepeatedCDSSendsOnlyTheACK(t *testing.T) {
	const services = 20
	rig := fullRig(t, SotW, services)
	var msgs []proto.Message
	for i := range services {
		msgs = append(msgs, istioLikeCluster(t, i))
	}
	sent := rig.sink.sent
	if err := rig.feed(encodeResponse(t, SotW, ClusterType, "v2", "n-2", msgs)); err != nil {
		t.Fatal(err)
	}
	if got := rig.sink.sent - sent; got != 1 {
		t.Errorf("repeated CDS: %d requests sent, want 1 (the ACK)", got)
	}
	var ack discoveryv3.DiscoveryRequest
	if err := proto.Unmarshal(rig.sink.last, &ack); err != nil {
		t.Fatal(err)
	}
	if ack.GetVersionInfo() != "v2" || ack.GetResponseNonce() != "n-2" || len(ack.GetResourceNames()) != 0 {
		t.Errorf("CDS ACK %v", &ack)
	}

	added := istioLikeCluster(t, services)
	sent = rig.sink.sent
	if err := rig.feed(encodeResponse(t, SotW, ClusterType, "v3", "n-3", append(msgs, added))); err != nil {
		t.Fatal(err)
	}
	if got := rig.sink.sent - sent; got != 2 {
		t.Fatalf("new cluster: %d requests sent, want 2 (the ACK, then EDS)", got)
	}
	if err := proto.Unmarshal(rig.sink.last, &ack); err != nil {
		t.Fatal(err)
	}
	if ack.GetTypeUrl() != EndpointType || len(ack.GetResourceNames()) != services+1 ||
		!slices.Contains(ack.GetResourceNames(), added.GetName()) {
		t.Errorf("EDS request %v", &ack)
	}
	if rig.p.full {
		t.Error("full config before the new cluster's endpoints arrived")
	}
}

// TestHandleAllocs: handling a delta EDS push, ACK included, allocates only
// the slice header gRPC gets from the codec (its buffer is pooled).
func TestHandleAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocations are not measurable under the race detector")
	}
	const services = 50
	rig := fullRig(t, Delta, services)
	pushes := edsPushes(t, services, 16)
	data := make([]mem.BufferSlice, len(pushes))
	for i, b := range pushes {
		data[i] = mem.BufferSlice{mem.SliceBuffer(b)}
	}
	i := 0
	allocs := testing.AllocsPerRun(200, func() {
		if err := (rawCodec{}).Unmarshal(data[i%len(data)], &rig.in); err != nil {
			t.Fatal(err)
		}
		i++
		if err := rig.p.handle(rig.in.resp); err != nil {
			t.Fatal(err)
		}
		putResponse(rig.in.resp)
	})
	if allocs > 1 {
		t.Errorf("%v allocations per delta EDS push, want at most 1", allocs)
	}
	if !rig.p.full || rig.p.held(typeEDS) != services {
		t.Errorf("full %v, holding %d EDS", rig.p.full, rig.p.held(typeEDS))
	}
}

// TestKeepSubscribedFew checks keepSubscribed's binary-search path (a few
// refs against many names) against its merge path.
func TestKeepSubscribedFew(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 500 {
		var names []uint32
		for range 40 + rng.IntN(200) {
			names = append(names, uint32(1+rng.IntN(400)))
		}
		slices.Sort(names)
		names = slices.Compact(names)
		var have []ref
		for range rng.IntN(3) {
			have = append(have, ref{name: uint32(1 + rng.IntN(400)), ref: uint32(rng.IntN(2))})
		}
		if len(names) > 0 && rng.IntN(2) == 0 {
			have = append(have, ref{name: names[rng.IntN(len(names))]})
		}
		slices.SortFunc(have, cmpRef)
		have = slices.Compact(have)
		var want []ref
		for _, r := range have {
			if _, ok := slices.BinarySearch(names, r.name); ok {
				want = append(want, r)
			}
		}
		if got := keepSubscribed(slices.Clone(have), names); !slices.Equal(got, want) {
			t.Fatalf("keepSubscribed(%v, %d names) = %v, want %v", have, len(names), got, want)
		}
	}
}

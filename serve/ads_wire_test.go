package serve_test

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/pilotfish-mesh/pilotfish/engine"
	"github.com/pilotfish-mesh/pilotfish/serve"
)

// clusters returns k cached cluster resources.
func clusters(t testing.TB, k int) []engine.Resource {
	res := make([]engine.Resource, k)
	for i := range res {
		res[i] = toResource(t, cluster(fmt.Sprintf("outbound|80||svc-%d.ns.svc.cluster.local", i), i))
	}
	return res
}

// anyOf decodes a cached encoded Any back into the generated type.
func anyOf(t testing.TB, r engine.Resource) *anypb.Any {
	t.Helper()
	a := &anypb.Any{}
	if err := proto.Unmarshal(r.Any, a); err != nil {
		t.Fatal(err)
	}
	return a
}

// checkWire unmarshals got into a fresh message of want's type and requires
// it to equal want, and got to equal proto.Marshal(want) byte for byte.
func checkWire(t *testing.T, got []byte, want proto.Message) {
	t.Helper()
	dec := want.ProtoReflect().New().Interface()
	if err := proto.Unmarshal(got, dec); err != nil {
		t.Fatalf("assembled bytes do not unmarshal: %v", err)
	}
	if !proto.Equal(dec, want) {
		t.Fatalf("assembled message differs:\n got %v\nwant %v", dec, want)
	}
	ref, err := proto.MarshalOptions{Deterministic: true}.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, ref) {
		t.Fatalf("assembled bytes differ from proto.Marshal (%d vs %d bytes)", len(got), len(ref))
	}
}

func TestAppendDiscoveryResponseMatchesProto(t *testing.T) {
	for _, tc := range []struct {
		name  string
		k     int
		nonce uint64
		cp    string
	}{
		{"empty", 0, 1, ""},
		{"one", 1, 9, ""},
		{"many with control plane", 300, 1234567, "pilotfish-0"},
		{"max nonce", 2, math.MaxUint64, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := clusters(t, tc.k)
			digest := serve.SetDigest(res)
			want := &discoveryv3.DiscoveryResponse{
				VersionInfo: fmt.Sprintf("%016x", digest),
				TypeUrl:     engine.TypeCluster,
				Nonce:       strconv.FormatUint(tc.nonce, 10),
			}
			for _, r := range res {
				want.Resources = append(want.Resources, anyOf(t, r))
			}
			if tc.cp != "" {
				want.ControlPlane = &corev3.ControlPlane{Identifier: tc.cp}
			}
			prefix := []byte("prefix")
			got := serve.AppendSotW(prefix, digest, tc.nonce, engine.TypeCluster, serve.EncodeControlPlane(tc.cp), res)
			if !bytes.HasPrefix(got, prefix) {
				t.Fatal("dst prefix lost")
			}
			checkWire(t, got[len(prefix):], want)
		})
	}
}

func TestAppendDeltaDiscoveryResponseMatchesProto(t *testing.T) {
	res := clusters(t, 50)
	res[3].Version = "" // proto3 omits an empty version
	removed := []string{"gone-a", "gone-b"}
	want := &discoveryv3.DeltaDiscoveryResponse{
		SystemVersionInfo: "00000000000000ff",
		TypeUrl:           engine.TypeCluster,
		Nonce:             "77",
		RemovedResources:  removed,
		ControlPlane:      &corev3.ControlPlane{Identifier: "pilotfish-0"},
	}
	for _, r := range res {
		want.Resources = append(want.Resources, &discoveryv3.Resource{Name: r.Name, Version: r.Version, Resource: anyOf(t, r)})
	}
	checkWire(t, serve.AppendDelta(nil, 0xff, 77, engine.TypeCluster, serve.EncodeControlPlane("pilotfish-0"), res, removed), want)

	t.Run("removals only", func(t *testing.T) {
		want := &discoveryv3.DeltaDiscoveryResponse{SystemVersionInfo: "0000000000000001", TypeUrl: engine.TypeEndpoint,
			Nonce: "2", RemovedResources: []string{"c1"}}
		checkWire(t, serve.AppendDelta(nil, 1, 2, engine.TypeEndpoint, nil, nil, []string{"c1"}), want)
	})
}

func TestSetDigest(t *testing.T) {
	res := clusters(t, 3)
	rev := []engine.Resource{res[2], res[0], res[1]}
	if serve.SetDigest(res) != serve.SetDigest(rev) {
		t.Error("digest depends on order")
	}
	if serve.SetDigest(res) == serve.SetDigest(res[:2]) || serve.SetDigest(nil) == serve.SetDigest(res[:1]) {
		t.Error("digest ignores a resource")
	}
	changed := append([]engine.Resource(nil), res...)
	changed[1].Version += "x"
	if serve.SetDigest(res) == serve.SetDigest(changed) {
		t.Error("digest ignores a version")
	}
}

func TestNonceIs(t *testing.T) {
	for _, tc := range []struct {
		s    string
		n    uint64
		want bool
	}{
		{"1", 1, true}, {"10", 10, true}, {"18446744073709551615", math.MaxUint64, true},
		{"", 0, false}, {"01", 1, false}, {"2", 1, false}, {"11", 1, false}, {"abc", 1, false},
	} {
		if got := serve.NonceIs(tc.s, tc.n); got != tc.want {
			t.Errorf("NonceIs(%q, %d) = %v", tc.s, tc.n, got)
		}
	}
}

// sendAllocBudget is the hard budget for encoding a cached response: the
// one-element mem.BufferSlice the codec returns to gRPC. The pooled buffer
// and gRPC's buffer header come from pools.
const sendAllocBudget = 1

// TestEncodeCachedResponseAllocs checks that assembling and encoding a cached
// response costs a small constant number of allocations, whatever the
// number of resources K.
func TestEncodeCachedResponseAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under the race detector")
	}
	cp := serve.EncodeControlPlane("pilotfish-0")
	removed := []string{"gone"}
	for _, k := range []int{1, 10, 100, 1000} {
		res := clusters(t, k)
		var e serve.Encoder
		sotw := testing.AllocsPerRun(200, func() { e.EncodeSotW(42, engine.TypeCluster, cp, res) })
		delta := testing.AllocsPerRun(200, func() { e.EncodeDelta(42, engine.TypeCluster, cp, res, removed) })
		t.Logf("K=%4d: SotW %.1f allocs, Delta %.1f allocs per response", k, sotw, delta)
		if sotw > sendAllocBudget || delta > sendAllocBudget {
			t.Errorf("K=%d: SotW %.1f, Delta %.1f allocs per response; budget %d", k, sotw, delta, sendAllocBudget)
		}
	}
}

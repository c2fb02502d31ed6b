package bench

import (
	"context"
	"slices"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/pilotfish-mesh/pilotfish/engine"
	"github.com/pilotfish-mesh/pilotfish/loadgen"
)

// TestFloorScenarios runs the floor through the connect, change, churn and
// reconnect scenarios in both modes: Run fails unless every proxy reached
// full config with the plan's resource counts and every change converged
// everywhere.
func TestFloorScenarios(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers and a client process")
	}
	for _, mode := range []loadgen.Mode{loadgen.SotW, loadgen.Delta} {
		t.Run(string(mode), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			o := smallOptions(t, "http", 100, ScenarioConnect, ScenarioChange, ScenarioChurn, ScenarioReconnect)
			o.Mode, o.Servers = mode, []string{Floor}
			res, err := Run(ctx, o)
			logResult(t, res)
			if err != nil {
				t.Fatal(err)
			}
			s := res.Server(Floor)
			if s == nil || s.Connect == nil || s.Change == nil || s.Churn == nil || s.Reconnect == nil {
				t.Fatalf("floor: a scenario is missing: %+v", s)
			}
			if s.Change.Convergence.Count != o.Changes*o.Proxies || s.Churn.Convergence.Count != 6*o.Proxies {
				t.Errorf("floor: change %+v, churn %+v", s.Change, s.Churn)
			}
			if s.Reconnect.BytesPerProxy < float64(res.FullConfig.Bytes) {
				t.Errorf("floor: reconnect received %.0f bytes per proxy, full config is %d", s.Reconnect.BytesPerProxy, res.FullConfig.Bytes)
			}
		})
	}
}

func TestFloorNotByDefault(t *testing.T) {
	if slices.Contains(Servers, Floor) || !slices.Contains(KnownServers, Floor) {
		t.Errorf("Servers %v, KnownServers %v: floor must be known and not a default", Servers, KnownServers)
	}
	o, err := Options{Servers: []string{Pilotfish, Floor}}.withDefaults()
	if err != nil || len(o.Servers) != 2 {
		t.Errorf("withDefaults: %v, %v", o.Servers, err)
	}
	if _, err := (Options{Servers: []string{"nope"}}).withDefaults(); err == nil {
		t.Error("an unknown server was accepted")
	}
}

// floorPlan is a small hand-made plan: clusters c1, c2 (EDS), their
// assignments, listener l1 and route r1.
func floorPlan() *plan {
	return &plan{initial: map[string]map[string]types.Resource{
		engine.TypeCluster:  {"c1": edsCluster("c1"), "c2": edsCluster("c2")},
		engine.TypeEndpoint: {"c1": cla("c1", 1), "c2": cla("c2", 1)},
		engine.TypeListener: {"l1": &listenerv3.Listener{Name: "l1"}},
		engine.TypeRoute:    {"r1": &routev3.RouteConfiguration{Name: "r1"}},
	}}
}

func edsCluster(name string) *clusterv3.Cluster {
	return &clusterv3.Cluster{Name: name, ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS}}
}

// cla is an assignment whose content differs with weight.
func cla(name string, weight uint32) *endpointv3.ClusterLoadAssignment {
	return &endpointv3.ClusterLoadAssignment{ClusterName: name, Endpoints: []*endpointv3.LocalityLbEndpoints{{LoadBalancingWeight: wrapperspb.UInt32(weight)}}}
}

func startTestFloor(t *testing.T) (*floorServer, discoveryv3.AggregatedDiscoveryServiceClient) {
	t.Helper()
	s, err := startFloor(floorPlan())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.stop)
	conn, err := grpc.NewClient(s.addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return s, discoveryv3.NewAggregatedDiscoveryServiceClient(conn)
}

func applyFloor(t *testing.T, s *floorServer, ups ...typeUpdate) {
	t.Helper()
	if err := s.apply(context.Background(), &change{updates: ups}); err != nil {
		t.Fatal(err)
	}
}

// sotwNames returns a response's resource names, in order.
func sotwNames(t *testing.T, r *discoveryv3.DiscoveryResponse) []string {
	t.Helper()
	var out []string
	for _, a := range r.Resources {
		m, err := a.UnmarshalNew()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, resourceName(m))
	}
	return out
}

// resourceName is a Cluster's, Listener's or RouteConfiguration's name, or
// a ClusterLoadAssignment's cluster name.
func resourceName(m proto.Message) string {
	if c, ok := m.(*endpointv3.ClusterLoadAssignment); ok {
		return c.ClusterName
	}
	return m.(interface{ GetName() string }).GetName()
}

// claOf reads a ClusterLoadAssignment's name and weight.
func claOf(t *testing.T, a *anypb.Any) (string, uint32) {
	t.Helper()
	var c endpointv3.ClusterLoadAssignment
	if err := a.UnmarshalTo(&c); err != nil {
		t.Fatal(err)
	}
	return c.ClusterName, c.Endpoints[0].GetLoadBalancingWeight().GetValue()
}

// TestFloorSotW drives a SotW stream with a real gRPC client: first
// requests get the state, a grown EDS subscription gets what it adds, ACKs
// and NACKs get nothing, and a change pushes CDS whole and only the
// subscribed changed assignments, EDS first.
func TestFloorSotW(t *testing.T) {
	s, c := startTestFloor(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ads, err := c.StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	send := func(r *discoveryv3.DiscoveryRequest) {
		t.Helper()
		if err := ads.Send(r); err != nil {
			t.Fatal(err)
		}
	}
	recv := func(typeURL, version string, names ...string) *discoveryv3.DiscoveryResponse {
		t.Helper()
		r, err := ads.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if got := sotwNames(t, r); r.TypeUrl != typeURL || r.VersionInfo != version || r.Nonce == "" || !slices.Equal(got, names) {
			t.Fatalf("got %s version %q nonce %q %v, want %s version %q %v", typeShort(r.TypeUrl), r.VersionInfo, r.Nonce, got, typeShort(typeURL), version, names)
		}
		return r
	}
	send(&discoveryv3.DiscoveryRequest{TypeUrl: engine.TypeCluster})
	cds := recv(engine.TypeCluster, "1", "c1", "c2")
	send(&discoveryv3.DiscoveryRequest{TypeUrl: engine.TypeCluster, VersionInfo: "1", ResponseNonce: cds.Nonce})
	send(&discoveryv3.DiscoveryRequest{TypeUrl: engine.TypeEndpoint, ResourceNames: []string{"c1"}})
	eds := recv(engine.TypeEndpoint, "1", "c1")
	// An ACK and a NACK: nothing; the LDS request after them is answered
	// next (requests are handled in order).
	send(&discoveryv3.DiscoveryRequest{TypeUrl: engine.TypeEndpoint, VersionInfo: "1", ResourceNames: []string{"c1"}, ResponseNonce: eds.Nonce})
	send(&discoveryv3.DiscoveryRequest{TypeUrl: engine.TypeEndpoint, VersionInfo: "1", ResourceNames: []string{"c1"}, ResponseNonce: eds.Nonce, ErrorDetail: &status.Status{Message: "no"}})
	send(&discoveryv3.DiscoveryRequest{TypeUrl: engine.TypeListener})
	recv(engine.TypeListener, "1", "l1")

	applyFloor(t, s,
		typeUpdate{typeURL: engine.TypeEndpoint, put: map[string]types.Resource{"c1": cla("c1", 2), "c2": cla("c2", 2), "c3": cla("c3", 2)}},
		typeUpdate{typeURL: engine.TypeCluster, put: map[string]types.Resource{"c3": edsCluster("c3")}, removed: []string{"c2"}},
	)
	eds = recv(engine.TypeEndpoint, "2", "c1") // c2 and c3 are not subscribed
	if n, w := claOf(t, eds.Resources[0]); n != "c1" || w != 2 {
		t.Errorf("pushed %s weight %d, want c1's new weight 2", n, w)
	}
	recv(engine.TypeCluster, "2", "c1", "c3")
	// The subscription grows: only what it adds comes back.
	send(&discoveryv3.DiscoveryRequest{TypeUrl: engine.TypeEndpoint, VersionInfo: "2", ResourceNames: []string{"c3", "c1"}, ResponseNonce: eds.Nonce})
	recv(engine.TypeEndpoint, "2", "c3")
	// A change of a type nobody subscribed to sends nothing: the next
	// message is the LDS push after it.
	applyFloor(t, s, typeUpdate{typeURL: engine.TypeRoute, put: map[string]types.Resource{"r2": &routev3.RouteConfiguration{Name: "r2"}}})
	applyFloor(t, s, typeUpdate{typeURL: engine.TypeListener, put: map[string]types.Resource{"l2": &listenerv3.Listener{Name: "l2"}}})
	recv(engine.TypeListener, "4", "l1", "l2")
}

// TestFloorDelta drives a Delta stream: wildcard CDS gets everything, EDS
// what it subscribes to, and a change pushes only changed and removed
// resources (only subscribed ones for EDS), with new versions.
func TestFloorDelta(t *testing.T) {
	s, c := startTestFloor(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ads, err := c.DeltaAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	send := func(r *discoveryv3.DeltaDiscoveryRequest) {
		t.Helper()
		if err := ads.Send(r); err != nil {
			t.Fatal(err)
		}
	}
	type res struct{ name, version string }
	recv := func(typeURL string, removed []string, want ...res) *discoveryv3.DeltaDiscoveryResponse {
		t.Helper()
		r, err := ads.Recv()
		if err != nil {
			t.Fatal(err)
		}
		var got []res
		for _, x := range r.Resources {
			got = append(got, res{x.Name, x.Version})
			if m, err := x.Resource.UnmarshalNew(); err != nil || resourceName(m) != x.Name {
				t.Errorf("resource %s: %v %v", x.Name, m, err)
			}
		}
		if r.TypeUrl != typeURL || r.Nonce == "" || !slices.Equal(got, want) || !slices.Equal(r.RemovedResources, removed) {
			t.Fatalf("got %s nonce %q %v removed %v, want %s %v removed %v", typeShort(r.TypeUrl), r.Nonce, got, r.RemovedResources, typeShort(typeURL), want, removed)
		}
		return r
	}
	send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: engine.TypeCluster})
	cds := recv(engine.TypeCluster, nil, res{"c1", "1"}, res{"c2", "1"})
	send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: engine.TypeCluster, ResponseNonce: cds.Nonce})
	send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: engine.TypeEndpoint, ResourceNamesSubscribe: []string{"c1", "c9"}})
	eds := recv(engine.TypeEndpoint, nil, res{"c1", "1"}) // c9 does not exist
	send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: engine.TypeEndpoint, ResponseNonce: eds.Nonce, ErrorDetail: &status.Status{Message: "no"}})

	applyFloor(t, s,
		typeUpdate{typeURL: engine.TypeEndpoint, put: map[string]types.Resource{"c2": cla("c2", 2)}, removed: []string{"c1"}},
		typeUpdate{typeURL: engine.TypeCluster, put: map[string]types.Resource{"c2": edsCluster("c2")}, removed: []string{"c1"}},
	)
	recv(engine.TypeEndpoint, []string{"c1"}) // c2 is not subscribed
	recv(engine.TypeCluster, []string{"c1"}, res{"c2", "2"})
	send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: engine.TypeEndpoint, ResourceNamesSubscribe: []string{"c2"}, ResourceNamesUnsubscribe: []string{"c1"}})
	recv(engine.TypeEndpoint, nil, res{"c2", "2"})
	applyFloor(t, s, typeUpdate{typeURL: engine.TypeEndpoint, put: map[string]types.Resource{"c2": cla("c2", 3), "c1": cla("c1", 3)}})
	recv(engine.TypeEndpoint, nil, res{"c2", "3"}) // c1 was unsubscribed
}

// TestFloorSkippedEpochs: a stream that wakes after several changes sends
// their union once, of the latest content.
func TestFloorSkippedEpochs(t *testing.T) {
	s, err := startFloor(floorPlan())
	if err != nil {
		t.Fatal(err)
	}
	defer s.stop()
	from := s.latest.Load()
	applyFloor(t, s, typeUpdate{typeURL: engine.TypeEndpoint, put: map[string]types.Resource{"c1": cla("c1", 2)}})
	applyFloor(t, s, typeUpdate{typeURL: engine.TypeEndpoint, removed: []string{"c2"}})
	applyFloor(t, s, typeUpdate{typeURL: engine.TypeEndpoint, put: map[string]types.Resource{"c1": cla("c1", 4), "c3": cla("c3", 4)}})
	to := s.latest.Load()
	if got := changedNames(from, to, 0); !slices.Equal(got, []string{"c1", "c2", "c3"}) {
		t.Errorf("changed %v", got)
	}
	set := &nameSet{names: []string{"c1", "c2"}}
	var d discoveryv3.DeltaDiscoveryResponse
	b := s.body(floorBodyKey{kind: deltaChanged, typ: to.types[0], from: from, to: to, set: set})
	if err := proto.Unmarshal(b.bs.Materialize(), &d); err != nil {
		t.Fatal(err)
	}
	if len(d.Resources) != 1 || d.Resources[0].Version != "4" || !slices.Equal(d.RemovedResources, []string{"c2"}) {
		t.Errorf("union push %v", &d)
	}
	if s.body(floorBodyKey{kind: deltaChanged, typ: to.types[0], from: from, to: to, set: set}) != b {
		t.Error("the same push was assembled twice")
	}
}

func TestFloorTransitions(t *testing.T) {
	f := newFloorSets()
	bs := func(ns ...string) [][]byte {
		var out [][]byte
		for _, n := range ns {
			out = append(out, []byte(n))
		}
		return out
	}
	a := f.transition(nil, bs("b", "a", "b"), nil)
	if !slices.Equal(a.to.names, []string{"a", "b"}) || !slices.Equal(a.sub, []string{"a", "b"}) {
		t.Fatalf("first %+v", a)
	}
	if f.transition(nil, bs("b", "a", "b"), nil) != a {
		t.Error("the same transition was computed twice")
	}
	b := f.transition(a.to, bs("c"), bs("a"))
	if !slices.Equal(b.to.names, []string{"b", "c"}) || !slices.Equal(b.sub, []string{"c"}) {
		t.Errorf("second %+v", b)
	}
	if c := f.transition(a.to, bs("a"), bs("c")); c == b || !slices.Equal(c.to.names, []string{"a", "b"}) {
		t.Errorf("a different change shared a transition: %+v", c)
	}
}

// TestFloorWireAllocs: sending a shared body allocates nothing in the
// codec, and an ACK repeating the stream's SotW subscription (in one
// buffer or several) is decoded without allocating or parsing the names.
func TestFloorWireAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful with -race")
	}
	srv := &floorServer{sets: newFloorSets()}
	st := &floorStream{srv: srv}
	names := make([]string, 500)
	for i := range names {
		names[i] = "outbound|80||svc-" + string(rune('a'+i%26)) + "-" + time.Duration(i).String()
	}
	b, err := proto.Marshal(&discoveryv3.DiscoveryRequest{TypeUrl: engine.TypeEndpoint, ResourceNames: names, ResponseNonce: "7", VersionInfo: "3"})
	if err != nil {
		t.Fatal(err)
	}
	req := &floorRequest{st: st}
	codec := floorCodec{}
	if err := codec.Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, req); err != nil {
		t.Fatal(err)
	}
	want := slices.Sorted(slices.Values(names))
	if req.t != 0 || !req.nonce || req.nack || req.set == nil || !slices.Equal(req.set.names, slices.Compact(want)) {
		t.Fatalf("decoded type %d nonce %v nack %v set %v", req.t, req.nonce, req.nack, req.set)
	}
	st.types[0].names = req.set
	split := mem.BufferSlice{mem.SliceBuffer(b[:100]), mem.SliceBuffer(b[100:])}
	for name, data := range map[string]mem.BufferSlice{"one buffer": {mem.SliceBuffer(b)}, "two buffers": split} {
		if err := codec.Unmarshal(data, req); err != nil || req.set != st.types[0].names {
			t.Fatalf("%s: %v, set %p, want the stream's %p", name, err, req.set, st.types[0].names)
		}
		if n := testing.AllocsPerRun(100, func() { _ = codec.Unmarshal(data, req) }); n != 0 {
			t.Errorf("%s: decoding an ACK allocates %.0f times", name, n)
		}
	}
	body := newWireBody(appendResponse(nil, false, engine.TypeEndpoint, 1, 1, nil, nil))
	if n := testing.AllocsPerRun(100, func() { _, _ = codec.Marshal(body) }); n != 0 {
		t.Errorf("encoding a shared body allocates %.0f times", n)
	}
}

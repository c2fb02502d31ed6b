package engine

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/index"
)

// diffMesh is the state the differential test evolves: per service, the
// endpoints of its one EndpointSlice.
type diffMesh struct {
	services  int
	endpoints map[int][]netip.Addr
	weights   map[netip.Addr]uint16
	// versions are the endpoints' version labels (relabelled pods).
	versions map[netip.Addr]string
	// failover: the even services have a DestinationRule with outlier
	// detection, failoverPriority and a v1 subset.
	failover bool
}

// batch writes the whole mesh into b for writer w.
func (m *diffMesh) full(w *index.Writer) *index.Batch {
	var b index.Batch
	for i := 0; i < m.services; i++ {
		svc := diffService(w, i)
		b.PutService(svc)
		b.PutEndpoints(svc.Key, m.group(w, i))
		if m.failover && i%2 == 0 {
			b.PutConfig(diffFailoverRule(w, svc))
		}
	}
	return &b
}

// diffFailoverRule is a DestinationRule for svc whose failoverPriority
// orders endpoints by zone and version relative to the proxy.
func diffFailoverRule(w *index.Writer, svc index.Service) index.Config {
	sy, ls := w.Symbols(), w.Labels()
	host := sy.String(svc.Key.Host)
	dr := &networking.DestinationRule{
		Host: host,
		TrafficPolicy: &networking.TrafficPolicy{
			OutlierDetection: &networking.OutlierDetection{Consecutive_5XxErrors: wrapperspb.UInt32(3)},
			LoadBalancer: &networking.LoadBalancerSettings{LocalityLbSetting: &networking.LocalityLoadBalancerSetting{
				FailoverPriority: []string{"topology.kubernetes.io/zone", "version"},
			}},
		},
		Subsets: []*networking.Subset{{Name: "v1", Labels: map[string]string{"version": "v1"}}},
	}
	return index.Config{
		Kind: index.ConfigDestinationRule, Key: index.ConfigKey{Namespace: svc.Key.Namespace, Name: svc.Name},
		Spec: dr, Hosts: []index.Sym{svc.Key.Host}, Hash: uint64(svc.Key.Host) + 1,
		SubsetLabels: []index.LabelSetID{ls.Intern([]index.Label{{Key: sy.Intern("version"), Value: sy.Intern("v1")}})},
	}
}

func diffService(w *index.Writer, i int) index.Service {
	sy, ls := w.Symbols(), w.Labels()
	name := fmt.Sprintf("svc-%d", i)
	return index.Service{
		Key:  index.ServiceKey{Host: sy.Intern(name + ".default.svc.cluster.local"), Namespace: sy.Intern("default")},
		Name: sy.Intern(name), Origin: index.OriginKubernetes,
		Addresses:   []netip.Prefix{netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 96, 0, byte(i)}), 32)},
		Ports:       []index.Port{{Name: sy.Intern("http"), Number: 80, Protocol: index.ProtocolHTTP}, {Name: sy.Intern("grpc"), Number: 9090, Protocol: index.ProtocolGRPC}},
		HasSelector: true, Selector: ls.Intern([]index.Label{{Key: sy.Intern("app"), Value: sy.Intern(name)}}),
	}
}

func (m *diffMesh) group(w *index.Writer, i int) index.EndpointGroup {
	sy := w.Symbols()
	g := index.EndpointGroup{Source: sy.Intern(fmt.Sprintf("svc-%d-slice", i)), Pods: true,
		Ports: []index.EndpointPort{{Name: sy.Intern("http"), Port: 8080}, {Name: sy.Intern("grpc"), Port: 9090}}}
	for _, a := range m.endpoints[i] {
		v := m.versions[a]
		if v == "" {
			v = "v" + fmt.Sprint(a.As4()[3]%2+1)
		}
		labels := w.Labels().Intern([]index.Label{{Key: sy.Intern("version"), Value: sy.Intern(v)}})
		g.Endpoints = append(g.Endpoints, index.Endpoint{Addr: a, Weight: m.weights[a], Labels: labels,
			Locality: sy.Intern("region/zone-" + fmt.Sprint(a.As4()[3]%3) + "/")})
	}
	return g
}

// TestEndpointFastPathMatchesFullRebuild applies random endpoint changes one
// by one (the fast path: endpoint shards only, warm cache) and checks after
// each that every ClusterLoadAssignment is byte-identical to what a fresh
// index built from the final state, with an empty cache, generates.
//
// With failover, half the services have a DestinationRule whose
// failoverPriority splits their localities by the labels endpoints share
// with the proxy (version v1, zone-1), and pods also change version.
func TestEndpointFastPathMatchesFullRebuild(t *testing.T) {
	t.Run("plain", func(t *testing.T) { testFastPathMatchesFullRebuild(t, false) })
	t.Run("failover", func(t *testing.T) { testFastPathMatchesFullRebuild(t, true) })
}

// diffNode is the proxy of the differential test: version v1 in
// region/zone-1.
func diffNode(t *testing.T) *corev3.Node {
	n := sidecarNode(t, "10.1.0.1", "p1", "default")
	n.Metadata.Fields["LABELS"] = structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{
		"version": structpb.NewStringValue("v1"),
	}})
	n.Locality = &corev3.Locality{Region: "region", Zone: "zone-1"}
	return n
}

func testFastPathMatchesFullRebuild(t *testing.T, failover bool) {
	rng := rand.New(rand.NewPCG(7, 11))
	m := &diffMesh{services: 12, endpoints: map[int][]netip.Addr{}, weights: map[netip.Addr]uint16{},
		versions: map[netip.Addr]string{}, failover: failover}
	next := 1
	newAddr := func() netip.Addr {
		next++
		return netip.AddrFrom4([4]byte{10, 244, byte(next >> 8), byte(next)})
	}
	for i := 0; i < m.services; i++ {
		for j := 0; j < 3; j++ {
			a := newAddr()
			m.endpoints[i] = append(m.endpoints[i], a)
			if a.As4()[3]%3 == 1 {
				m.versions[a] = "v2" // in the proxy's zone, not its version
			}
		}
	}
	inc := index.NewWriter()
	inc.Apply(m.full(inc))
	incEngine := New(inc, Options{})
	ctx := context.Background()
	conn, err := incEngine.Connect(ctx, diffNode(t), "")
	if err != nil {
		t.Fatal(err)
	}
	clusterNames := func(c *Conn) []string {
		res, err := c.Generate(TypeCluster, nil, true, nil)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, r := range res {
			names = append(names, r.Name)
		}
		return names
	}
	names := clusterNames(conn)
	if _, err := conn.Generate(TypeEndpoint, names, false, nil); err != nil { // warm the cache
		t.Fatal(err)
	}

	prioritized := 0
	for step := 0; step < 60; step++ {
		i := rng.IntN(m.services)
		switch rng.IntN(5) {
		case 0: // scale up
			m.endpoints[i] = append(m.endpoints[i], newAddr())
		case 1: // scale down
			if n := len(m.endpoints[i]); n > 0 {
				m.endpoints[i] = m.endpoints[i][:n-1]
			}
		case 2: // replace a pod
			if n := len(m.endpoints[i]); n > 0 {
				m.endpoints[i][rng.IntN(n)] = newAddr()
			}
		case 3: // reweight
			if n := len(m.endpoints[i]); n > 0 {
				m.weights[m.endpoints[i][rng.IntN(n)]] = uint16(1 + rng.IntN(5))
			}
		case 4: // relabel a pod
			if n := len(m.endpoints[i]); n > 0 {
				m.versions[m.endpoints[i][rng.IntN(n)]] = "v" + fmt.Sprint(1+rng.IntN(2))
			}
		}
		var b index.Batch
		b.PutEndpoints(diffService(inc, i).Key, m.group(inc, i))
		if cs := inc.Apply(&b); !cs.Empty() && !cs.EndpointsOnly() {
			t.Fatalf("step %d: an endpoint change produced a config change %+v", step, cs)
		}
		got, err := conn.Generate(TypeEndpoint, names, false, nil)
		if err != nil {
			t.Fatal(err)
		}

		fresh := index.NewWriter()
		fresh.Apply(m.full(fresh))
		freshEngine := New(fresh, Options{Cache: encode.NewCache()})
		fc, err := freshEngine.Connect(ctx, diffNode(t), "")
		if err != nil {
			t.Fatal(err)
		}
		want, err := fc.Generate(TypeEndpoint, clusterNames(fc), false, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) < 2*m.services {
			t.Fatalf("step %d: only %d assignments generated; want one per service port (%d)", step, len(got), 2*m.services)
		}
		if len(got) != len(want) {
			t.Fatalf("step %d: fast path gave %d assignments, full rebuild %d", step, len(got), len(want))
		}
		if step == 0 {
			// The change must be visible: the comparison is not of stale bytes.
			seen := false
			for _, r := range got {
				seen = seen || bytes.Contains(r.Any, []byte(fmt.Sprintf("svc-%d.default", i)))
			}
			if !seen {
				t.Fatalf("no assignment for svc-%d", i)
			}
		}
		wantBy := map[string][]byte{}
		for _, r := range want {
			wantBy[r.Name] = r.Any
		}
		for _, r := range got {
			if !bytes.Equal(r.Any, wantBy[r.Name]) {
				t.Fatalf("step %d: %s differs between the fast path and a full rebuild", step, r.Name)
			}
			prioritized += diffPriorities(t, r.Any)
		}
	}
	// failoverPriority must have applied: the comparison is not of
	// assignments without its split.
	if failover && prioritized == 0 {
		t.Fatal("no assignment split the proxy's zone by version")
	}
	if !failover && prioritized != 0 {
		t.Fatalf("%d groups of the proxy's zone above priority 0 without a DestinationRule", prioritized)
	}
}

// diffPriorities is the number of locality groups of the encoded
// assignment (an Any) in the proxy's own zone with a priority above 0:
// locality failover alone puts that zone first, only failoverPriority's
// version split puts some of it lower.
func diffPriorities(t *testing.T, b []byte) int {
	var a anypb.Any
	var cla endpointv3.ClusterLoadAssignment
	if err := proto.Unmarshal(b, &a); err != nil {
		t.Fatal(err)
	}
	if err := a.UnmarshalTo(&cla); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, le := range cla.Endpoints {
		if le.GetLocality().GetZone() == "zone-1" && le.Priority > 0 {
			n++
		}
	}
	return n
}

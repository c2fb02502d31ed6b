package rules

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/index"
)

func newCLA() *endpointv3.ClusterLoadAssignment { return &endpointv3.ClusterLoadAssignment{} }

func TestBuildEndpoints(t *testing.T) {
	f := newXDSFixture(t)
	f.httpWorkload(10)
	snap := f.apply()
	mesh := encode.DefaultMesh()
	sc := sidecarScope(snap, "default", "10.0.0.1")
	names := []string{
		"outbound|80||random-5.host.example",
		"outbound|443||kubernetes.default.svc.cluster.local",
		"outbound|80||nowhere.example",
		"outbound|81||random-5.host.example",
		"BlackHoleCluster",
	}
	rs, err := buildEndpoints(sc, mesh, verifyingCache(), names, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := resourceNames(rs); !slices.Equal(got, names) {
		t.Fatalf("every requested name gets an assignment: got %q", got)
	}
	clas := decodeResources(t, rs, newCLA)
	if n := len(clas[0].Endpoints); n != 1 {
		t.Fatalf("random-5: %d localities", n)
	}
	lbe := clas[0].Endpoints[0].LbEndpoints[0]
	if a := lbe.GetEndpoint().GetAddress().GetSocketAddress(); a.GetAddress() != "240.241.0.5" || a.GetPortValue() != 80 {
		t.Errorf("random-5 endpoint %v", a)
	}
	if w := lbe.Metadata.FilterMetadata["istio"].Fields["workload"].GetStringValue(); w != "service-5-0;default;service-5-0;;Kubernetes" {
		t.Errorf("workload metadata %q", w)
	}
	for _, cla := range clas[1:] {
		if len(cla.Endpoints) != 0 {
			t.Errorf("%s: want an empty assignment", cla.ClusterName)
		}
	}

	t.Run("wildcard", func(t *testing.T) {
		rs, err := buildEndpoints(sc, mesh, verifyingCache(), nil, true, nil)
		if err != nil {
			t.Fatal(err)
		}
		// istiod's dump for this workload holds 12 assignments.
		if len(rs) != 12 {
			t.Fatalf("got %d: %q", len(rs), resourceNames(rs))
		}
	})
}

// TestBuildEndpointsFastPath: an endpoint change to one service re-encodes
// only that service's assignments; every other assignment keeps its bytes.
func TestBuildEndpointsFastPath(t *testing.T) {
	f := newXDSFixture(t)
	f.httpWorkload(10)
	snap := f.apply()
	mesh := encode.DefaultMesh()
	cache := verifyingCache()
	names := clusterNamesForEDS(sidecarScope(snap, "default", "10.0.0.1"), mesh, nil)
	before, _ := buildEndpoints(sidecarScope(snap, "default", "10.0.0.1"), mesh, cache, names, false, nil)

	svc := index.ServiceKey{Host: f.sym("random-3.host.example"), Namespace: f.sym("default")}
	f.b.PutEndpoints(svc, index.EndpointGroup{Source: f.sym("service-3"), Endpoints: []index.Endpoint{
		{Addr: netip.MustParseAddr("240.241.0.3"), TLSMode: index.TLSModeIstio},
		{Addr: netip.MustParseAddr("240.241.9.3"), TLSMode: index.TLSModeIstio},
	}})
	cs := f.w.Apply(&f.b)
	f.b = index.Batch{}
	if !cs.EndpointsOnly() {
		t.Fatal("want an endpoint-only change")
	}
	after, _ := buildEndpoints(sidecarScope(f.w.Snapshot(), "default", "10.0.0.1"), mesh, cache, names, false, nil)
	for i := range before {
		changed := before[i].Version != after[i].Version
		if want := before[i].Name == "outbound|80||random-3.host.example"; changed != want {
			t.Errorf("%s: changed=%v, want %v", before[i].Name, changed, want)
		}
	}
	i := slices.IndexFunc(after, func(r Resource) bool { return r.Name == "outbound|80||random-3.host.example" })
	if n := len(decodeResources(t, after[i:i+1], newCLA)[0].Endpoints[0].LbEndpoints); n != 2 {
		t.Errorf("random-3 has %d endpoints", n)
	}
}

func TestBuildEndpointsLocalitySharing(t *testing.T) {
	f := newXDSFixture(t)
	f.httpWorkload(2)
	f.config(index.ConfigDestinationRule, "default", "random-1", &networking.DestinationRule{
		Host:          "random-1.host.example",
		TrafficPolicy: &networking.TrafficPolicy{OutlierDetection: &networking.OutlierDetection{Consecutive_5XxErrors: wrapperspb.UInt32(3)}},
	}, 0, index.ExportTo{}, "random-1.host.example")
	snap := f.apply()
	mesh := encode.DefaultMesh()
	cache := verifyingCache()
	names := []string{"outbound|80||random-0.host.example", "outbound|80||random-1.host.example"}
	build := func(locality string) []Resource {
		sc := sidecarScope(snap, "default", "10.0.0.1")
		sc.Class.Locality = locality
		rs, err := buildEndpoints(sc, mesh, cache, names, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		decodeResources(t, rs, newCLA)
		return rs
	}
	a, b := build("us-east/a"), build("eu-west/b")
	// Sharing is one cache entry, so one buffer (versions name content,
	// which may coincide across entries).
	shared := func(x, y Resource) bool { return &x.Any[0] == &y.Any[0] }
	if !shared(a[0], b[0]) {
		t.Error("without failover, proxies of different localities must share the assignment")
	}
	if shared(a[1], b[1]) {
		t.Error("with outlier detection, the assignment depends on the proxy's locality")
	}
}

func TestBuildEndpointsSubset(t *testing.T) {
	f := newXDSFixture(t)
	svc := index.Service{Key: index.ServiceKey{Host: f.sym("reviews.bookinfo.svc.cluster.local"), Namespace: f.sym("bookinfo")},
		Name: f.sym("reviews"), Origin: index.OriginKubernetes, Ports: []index.Port{f.port("http", 9080, index.ProtocolHTTP)},
		HasSelector: true, Selector: f.labels("app", "reviews")}
	f.b.PutService(svc)
	var eps []index.Endpoint
	for i := 1; i <= 3; i++ {
		eps = append(eps, index.Endpoint{Addr: netip.MustParseAddr(fmt.Sprintf("10.0.0.%d", i)),
			Labels: f.labels("app", "reviews", "version", fmt.Sprintf("v%d", i)), TLSMode: index.TLSModeIstio})
	}
	f.b.PutEndpoints(svc.Key, index.EndpointGroup{Source: f.sym("reviews-x"), Ports: []index.EndpointPort{{Name: f.sym("http"), Port: 9080}}, Endpoints: eps})
	f.config(index.ConfigDestinationRule, "bookinfo", "reviews", &networking.DestinationRule{
		Host: "reviews",
		Subsets: []*networking.Subset{
			{Name: "v2", Labels: map[string]string{"version": "v2"}},
			{Name: "plain", Labels: map[string]string{"version": "v3"}, TrafficPolicy: &networking.TrafficPolicy{Tls: &networking.ClientTLSSettings{Mode: networking.ClientTLSSettings_DISABLE}}},
		},
	}, 0, index.ExportTo{}, "reviews.bookinfo.svc.cluster.local")
	snap := f.apply()
	sc := sidecarScope(snap, "bookinfo", "10.9.9.9")
	names := []string{"outbound|9080|v2|reviews.bookinfo.svc.cluster.local", "outbound|9080|plain|reviews.bookinfo.svc.cluster.local", "outbound|9080|gone|reviews.bookinfo.svc.cluster.local"}
	rs, err := buildEndpoints(sc, encode.DefaultMesh(), verifyingCache(), names, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	clas := decodeResources(t, rs, newCLA)
	v2 := clas[0].Endpoints[0].LbEndpoints
	if len(v2) != 1 || v2[0].GetEndpoint().GetAddress().GetSocketAddress().GetAddress() != "10.0.0.2" {
		t.Errorf("subset v2: %v", v2)
	}
	plain := clas[1].Endpoints[0].LbEndpoints
	if len(plain) != 1 || plain[0].Metadata.FilterMetadata["envoy.transport_socket_match"] != nil {
		t.Errorf("subset with TLS DISABLE keeps the tlsMode match: %v", plain)
	}
	if n := len(clas[2].Endpoints[0].LbEndpoints); n != 3 {
		t.Errorf("a subset the rule does not define selects every endpoint (istiod), got %d", n)
	}
	if wl := v2[0].Metadata.FilterMetadata["istio"].Fields["workload"].GetStringValue(); wl != ";bookinfo;reviews;v2;Kubernetes" {
		t.Errorf("workload metadata %q", wl)
	}
}

// TestBuildEndpointsKeyAllocs: turning a cluster name into an EDS key
// allocates nothing (the name is parsed in place, lookups are by symbol).
func TestBuildEndpointsKeyAllocs(t *testing.T) {
	f := newXDSFixture(t)
	f.httpWorkload(10)
	snap := f.apply()
	b := newEDSBuilder(sidecarScope(snap, "default", "10.0.0.1"), encode.DefaultMesh())
	name := "outbound|80||random-5.host.example"
	b.keyFor(name)
	if b.key.Service == nil || b.key.Shard == nil {
		t.Fatal("no service for the name")
	}
	if n := testing.AllocsPerRun(100, func() { b.keyFor(name) }); n != 0 {
		t.Errorf("keyFor allocates %v times", n)
	}
}

// TestBuildEndpointsWarmAllocs is the allocation budget of a warm EDS build.
func TestBuildEndpointsWarmAllocs(t *testing.T) {
	f := newXDSFixture(t)
	f.httpWorkload(100)
	snap := f.apply()
	sc := sidecarScope(snap, "default", "10.0.0.1")
	mesh := encode.DefaultMesh()
	cache := encode.NewCache()
	cache.SetVerify(false) // verify mode (PILOTFISH_VERIFY_CACHE) regenerates on every hit
	names := clusterNamesForEDS(sc, mesh, nil)
	dst, err := buildEndpoints(sc, mesh, cache, names, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(50, func() { dst, _ = buildEndpoints(sc, mesh, cache, names, false, dst[:0]) })
	t.Logf("warm buildEndpoints: %d assignments, %.0f allocs", len(dst), allocs)
	if allocs > 4 {
		t.Errorf("warm buildEndpoints allocates %.0f times for %d assignments", allocs, len(dst))
	}
}

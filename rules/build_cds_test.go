package rules

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
	networking "istio.io/api/networking/v1alpha3"
	security "istio.io/api/security/v1beta1"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/index"
)

func TestBuildClustersHTTPWorkload(t *testing.T) {
	f := newXDSFixture(t)
	f.httpWorkload(10)
	snap := f.apply()
	mesh := encode.DefaultMesh()
	outbound := []string{"outbound|80||example.com", "outbound|443||kubernetes.default.svc.cluster.local"}
	for i := 0; i < 10; i++ {
		outbound = append(outbound, fmt.Sprintf("outbound|80||random-%d.host.example", i))
	}
	cases := []struct {
		name  string
		scope *Scope
		want  []string
	}{
		{"sidecar without instances (10.0.0.1)", sidecarScope(snap, "default", "10.0.0.1"),
			append(slices.Clone(outbound), "BlackHoleCluster", "PassthroughCluster", "InboundPassthroughCluster")},
		{"sidecar backing example.com (1.1.1.1)", sidecarScope(snap, "default", "1.1.1.1"),
			append(slices.Clone(outbound), "BlackHoleCluster", "PassthroughCluster", "inbound|80||", "InboundPassthroughCluster")},
		{"router", classScope(snap, &encode.ProxyClass{Type: encode.ProxyRouter, Namespace: "istio-system"}),
			append(slices.Clone(outbound), "BlackHoleCluster")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rs, err := buildClusters(tc.scope, mesh, verifyingCache(), nil, true, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := resourceNames(rs); !slices.Equal(got, tc.want) {
				t.Fatalf("clusters\n got %q\nwant %q", got, tc.want)
			}
			cs := decodeResources(t, rs, newCluster)
			for _, c := range cs {
				if strings.HasPrefix(c.Name, "outbound|") && c.GetType() != clusterv3.Cluster_EDS {
					t.Errorf("%s: type %v", c.Name, c.GetType())
				}
			}
		})
	}

	t.Run("non-wildcard request filters by name", func(t *testing.T) {
		sc := sidecarScope(snap, "default", "10.0.0.1")
		rs, err := buildClusters(sc, mesh, verifyingCache(), []string{"outbound|80||random-3.host.example", "BlackHoleCluster", "nope"}, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := resourceNames(rs); !slices.Equal(got, []string{"outbound|80||random-3.host.example", "BlackHoleCluster"}) {
			t.Fatalf("got %q", got)
		}
	})

	t.Run("proxyless gRPC gets only the named clusters", func(t *testing.T) {
		sc := classScope(snap, &encode.ProxyClass{Type: encode.ProxyGRPC, Namespace: "default"})
		names := []string{"outbound|80||random-0.host.example", "outbound|80|v1|random-0.host.example", "outbound|81||random-0.host.example", "inbound|80||", "outbound|80||nowhere.example"}
		rs, err := buildClusters(sc, mesh, verifyingCache(), names, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := resourceNames(rs); !slices.Equal(got, []string{"outbound|80||random-0.host.example"}) {
			t.Fatalf("got %q", got)
		}
		c := decodeResources(t, rs, newCluster)[0]
		if c.ConnectTimeout != nil || len(c.Filters) != 0 || c.EdsClusterConfig.GetEdsConfig().GetAds() == nil {
			t.Errorf("not istiod's grpc shape: %v", c)
		}
	})

	t.Run("identical scopes share every cached resource", func(t *testing.T) {
		cache := verifyingCache()
		a, _ := buildClusters(sidecarScope(snap, "default", "10.0.0.1"), mesh, cache, nil, true, nil)
		b, _ := buildClusters(sidecarScope(snap, "default", "10.0.0.2"), mesh, cache, nil, true, nil)
		for i := range a {
			if &a[i].Any[0] != &b[i].Any[0] {
				t.Errorf("%s: not shared", a[i].Name)
			}
		}
		if n := cache.Len(); n != len(a) {
			t.Errorf("cache holds %d entries for %d clusters", n, len(a))
		}
	})
}

func TestBuildClustersDestinationRules(t *testing.T) {
	f := newXDSFixture(t)
	f.httpWorkload(2)
	dns := index.Service{
		Key: index.ServiceKey{Host: f.sym("db.example.com"), Namespace: f.sym("default")}, Name: f.sym("db"),
		Origin: index.OriginServiceEntry, Resolution: index.ResolutionDNS,
		Ports: []index.Port{f.port("tcp", 5432, index.ProtocolTCP)},
	}
	f.b.PutService(dns)
	f.b.PutEndpoints(dns.Key, index.EndpointGroup{Source: f.sym("db"), Endpoints: []index.Endpoint{
		{Hostname: f.sym("db-1.example.com"), Labels: f.labels("role", "primary"), Locality: f.sym("us/a")},
	}})
	f.config(index.ConfigDestinationRule, "default", "random-0", &networking.DestinationRule{
		Host: "random-0.host.example",
		TrafficPolicy: &networking.TrafficPolicy{
			LoadBalancer: &networking.LoadBalancerSettings{LbPolicy: &networking.LoadBalancerSettings_Simple{Simple: networking.LoadBalancerSettings_ROUND_ROBIN}},
		},
		Subsets: []*networking.Subset{
			{Name: "v1", Labels: map[string]string{"security.istio.io/tlsMode": "istio"}},
			{Name: "v2", Labels: map[string]string{"version": "v2"}},
		},
	}, 0, index.ExportTo{}, "random-0.host.example")
	f.config(index.ConfigDestinationRule, "default", "db", &networking.DestinationRule{
		Host:          "db.example.com",
		TrafficPolicy: &networking.TrafficPolicy{OutlierDetection: &networking.OutlierDetection{Consecutive_5XxErrors: wrapperspb.UInt32(3)}},
		Subsets: []*networking.Subset{
			{Name: "primary", Labels: map[string]string{"role": "primary"}},
			{Name: "replica", Labels: map[string]string{"role": "replica"}},
		},
	}, 0, index.ExportTo{}, "db.example.com")
	snap := f.apply()
	sc := sidecarScope(snap, "default", "10.0.0.1")
	sc.Class.Locality = "us/a/x"
	rs, err := buildClusters(sc, encode.DefaultMesh(), verifyingCache(), nil, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	names := resourceNames(rs)
	for _, want := range []string{"outbound|80|v1|random-0.host.example", "outbound|80|v2|random-0.host.example", "outbound|5432|primary|db.example.com"} {
		if !slices.Contains(names, want) {
			t.Errorf("missing %s in %q", want, names)
		}
	}
	if slices.Contains(names, "outbound|5432|replica|db.example.com") {
		t.Error("a DNS subset without endpoints must be left out, as istiod does")
	}
	byName := map[string]*clusterv3.Cluster{}
	for _, c := range decodeResources(t, rs, newCluster) {
		byName[c.Name] = c
	}
	if c := byName["outbound|80|v1|random-0.host.example"]; c.LbPolicy != clusterv3.Cluster_ROUND_ROBIN || c.Metadata.FilterMetadata["istio"].Fields["subset"].GetStringValue() != "v1" {
		t.Errorf("subset v1: %v", c)
	}
	if c := byName["outbound|80||random-1.host.example"]; c.LbPolicy != clusterv3.Cluster_LEAST_REQUEST {
		t.Errorf("a rule for random-0 leaked into random-1: %v", c.LbPolicy)
	}
	if c := byName["outbound|5432||db.example.com"]; c.GetType() != clusterv3.Cluster_STRICT_DNS || c.LoadAssignment.Endpoints[0].Priority != 0 {
		t.Errorf("dns cluster: %v", c)
	}
}

func TestBuildClustersPeerAuthentication(t *testing.T) {
	f := newXDSFixture(t)
	f.httpWorkload(1)
	f.config(index.ConfigPeerAuthentication, "istio-system", "default", &security.PeerAuthentication{
		Mtls: &security.PeerAuthentication_MutualTLS{Mode: security.PeerAuthentication_MutualTLS_DISABLE},
	}, 0, index.ExportTo{})
	snap := f.apply()
	rs, err := buildClusters(sidecarScope(snap, "default", "10.0.0.1"), encode.DefaultMesh(), verifyingCache(), []string{"outbound|80||random-0.host.example"}, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := decodeResources(t, rs, newCluster)[0]
	if len(c.TransportSocketMatches) != 0 {
		t.Error("mesh-wide DISABLE must turn auto mTLS off")
	}
	f.config(index.ConfigPeerAuthentication, "default", "default", &security.PeerAuthentication{
		Mtls: &security.PeerAuthentication_MutualTLS{Mode: security.PeerAuthentication_MutualTLS_STRICT},
	}, 0, index.ExportTo{})
	snap = f.apply()
	rs, _ = buildClusters(sidecarScope(snap, "default", "10.0.0.1"), encode.DefaultMesh(), verifyingCache(), []string{"outbound|80||random-0.host.example"}, false, nil)
	if c := decodeResources(t, rs, newCluster)[0]; len(c.TransportSocketMatches) != 2 {
		t.Error("namespace STRICT overrides the mesh policy")
	}
}

func TestBuildClustersInboundSharedPort(t *testing.T) {
	f := newXDSFixture(t)
	http := []index.Port{f.port("http", 80, index.ProtocolHTTP)}
	f.serviceEntry("a", "default", "a.example.com", "", true, true, http, "1.1.1.1")
	f.serviceEntry("b", "default", "b.example.com", "", true, true, http, "1.1.1.1")
	snap := f.apply()
	rs, err := buildClusters(sidecarScope(snap, "default", "1.1.1.1"), encode.DefaultMesh(), verifyingCache(), []string{"inbound|80||"}, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := decodeResources(t, rs, newCluster)[0]
	svcs := c.Metadata.FilterMetadata["istio"].Fields["services"].GetListValue().GetValues()
	if len(svcs) != 2 {
		t.Fatalf("want both services on the port in the metadata, got %v", svcs)
	}
}

// TestBuildClustersWarmAllocs is the allocation budget of a warm CDS build
// (every cluster cached): it may allocate a small constant per cluster.
func TestBuildClustersWarmAllocs(t *testing.T) {
	f := newXDSFixture(t)
	f.httpWorkload(100)
	snap := f.apply()
	sc := sidecarScope(snap, "default", "1.1.1.1")
	mesh := encode.DefaultMesh()
	cache := encode.NewCache()
	cache.SetVerify(false) // verify mode (PILOTFISH_VERIFY_CACHE) regenerates on every hit
	dst, err := buildClusters(sc, mesh, cache, nil, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	n := len(dst)
	allocs := testing.AllocsPerRun(50, func() {
		dst, _ = buildClusters(sc, mesh, cache, nil, true, dst[:0])
	})
	perResource := allocs / float64(n)
	t.Logf("warm buildClusters: %d clusters, %.0f allocs (%.3f per cluster)", n, allocs, perResource)
	if allocs > 8 {
		t.Errorf("warm buildClusters allocates %.0f times for %d clusters; budget is a small constant per build", allocs, n)
	}
}

func TestBuildClustersTwoSnapshotsReuseUnchanged(t *testing.T) {
	f := newXDSFixture(t)
	f.httpWorkload(5)
	snap := f.apply()
	cache := verifyingCache()
	mesh := encode.DefaultMesh()
	before, _ := buildClusters(sidecarScope(snap, "default", "10.0.0.1"), mesh, cache, nil, true, nil)
	// An endpoint change of an EDS service leaves every cluster as it was.
	f.b.PutEndpoints(index.ServiceKey{Host: f.sym("random-3.host.example"), Namespace: f.sym("default")},
		index.EndpointGroup{Source: f.sym("service-3"), Endpoints: []index.Endpoint{{Addr: netip.MustParseAddr("240.241.9.9"), TLSMode: index.TLSModeIstio}}})
	snap = f.apply()
	after, _ := buildClusters(sidecarScope(snap, "default", "10.0.0.1"), mesh, cache, nil, true, nil)
	for i := range before {
		if before[i].Version != after[i].Version {
			t.Errorf("%s changed on an endpoint-only update", before[i].Name)
		}
	}
}

func TestCDSEndpointDigest(t *testing.T) {
	f := newXDSFixture(t)
	http := []index.Port{f.port("http", 80, index.ProtocolHTTP)}
	svc := f.serviceEntry("a", "default", "a.example.com", "", true, true, http, "10.0.0.1")
	snap := f.apply()
	s, _, _ := snap.Service(svc)
	before := ClusterEndpointDigest(snap.Symbols, s, snap.Endpoints(svc))
	put := func(eps ...index.Endpoint) uint64 {
		f.b.PutEndpoints(svc, index.EndpointGroup{Source: f.sym("a"), Endpoints: eps})
		snap := f.apply()
		return ClusterEndpointDigest(snap.Symbols, s, snap.Endpoints(svc))
	}
	istio := func(ip, sa string) index.Endpoint {
		return index.Endpoint{Addr: netip.MustParseAddr(ip), TLSMode: index.TLSModeIstio, ServiceAccount: f.sym(sa)}
	}
	if d := put(istio("10.0.0.2", "")); d != before {
		t.Error("a new address alone does not change CDS")
	}
	withSA := put(istio("10.0.0.2", "sa-1"))
	if withSA == before {
		t.Error("a new service account changes the SANs")
	}
	if d := put(index.Endpoint{Addr: netip.MustParseAddr("10.0.0.2"), ServiceAccount: f.sym("sa-1")}); d == withSA {
		t.Error("an endpoint without a sidecar changes a passthrough service's mTLS inference")
	}
}

func newCluster() *clusterv3.Cluster { return &clusterv3.Cluster{} }

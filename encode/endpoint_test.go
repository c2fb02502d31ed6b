package encode_test

import (
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/index"
)

// genCLA generates k's assignment through a verifying cache, decodes the
// cached bytes and validates them.
func genCLA(t *testing.T, n index.Names, k *encode.EndpointsKey) *endpointv3.ClusterLoadAssignment {
	t.Helper()
	cache := encode.NewCache()
	cache.SetVerify(true)
	e, err := encode.Resource(cache, n, k, encode.EndpointsGen)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := encode.Resource(cache, n, k, encode.EndpointsGen); err != nil {
		t.Fatal(err)
	}
	var a anypb.Any
	if err := proto.Unmarshal(e.Bytes, &a); err != nil {
		t.Fatal(err)
	}
	cla := &endpointv3.ClusterLoadAssignment{}
	if err := a.UnmarshalTo(cla); err != nil {
		t.Fatal(err)
	}
	mustValidate(t, cla)
	// The direct encoding must describe the reference generator's message
	// (every EDS test is also a differential test of
	// AppendClusterLoadAssignment).
	_, ref := encode.ClusterLoadAssignment(n, k)
	if !proto.Equal(cla, ref) {
		t.Fatalf("AppendClusterLoadAssignment differs from ClusterLoadAssignment:\n got %v\nwant %v", cla, ref)
	}
	eq(t, "cla name", cla.ClusterName, k.ClusterName)
	eq(t, "entry name", e.Name, k.ClusterName)
	for _, le := range cla.Endpoints {
		if le.Locality == nil {
			t.Fatal("nil locality (gRPC NACKs it)")
		}
	}
	return cla
}

type epView struct {
	addr   string
	port   uint32
	weight uint32
	health corev3.HealthStatus
	tls    bool
	wl     string
}

func flatten(cla *endpointv3.ClusterLoadAssignment) []epView {
	var out []epView
	for _, le := range cla.Endpoints {
		for _, e := range le.LbEndpoints {
			sa := e.GetEndpoint().GetAddress().GetSocketAddress()
			md := e.Metadata.GetFilterMetadata()
			out = append(out, epView{
				addr: sa.GetAddress(), port: sa.GetPortValue(), weight: e.LoadBalancingWeight.GetValue(), health: e.HealthStatus,
				tls: md["envoy.transport_socket_match"].GetFields()["tlsMode"].GetStringValue() == "istio",
				wl:  md["istio"].GetFields()["workload"].GetStringValue(),
			})
		}
	}
	return out
}

func TestEndpointsServiceEntry(t *testing.T) {
	f := newFixture(t)
	svc := f.serviceEntry("random-5.host.example", "default", "service-5", f.port("http", 80, index.ProtocolHTTP))
	f.endpoints(svc, "service-5", nil, index.Endpoint{Addr: mustAddr("240.241.0.5"), TLSMode: index.TLSModeIstio})
	f.apply()
	cla := genCLA(t, f.names(), f.endpointsKey(svc))

	// istiod's output for the istio-bench http workload, field by field.
	eq(t, "localities", len(cla.Endpoints), 1)
	le := cla.Endpoints[0]
	eq(t, "empty locality", proto.Equal(le.Locality, &corev3.Locality{}), true)
	eq(t, "locality weight", le.LoadBalancingWeight.GetValue(), uint32(1))
	got := flatten(cla)
	want := []epView{{addr: "240.241.0.5", port: 80, weight: 1, health: corev3.HealthStatus_UNKNOWN, tls: true, wl: "service-5-0;default;service-5-0;;Kubernetes"}}
	eq(t, "endpoints", len(got), 1)
	eq(t, "endpoint", got[0], want[0])
	eq(t, "priority", le.Priority, uint32(0))
}

func TestEndpointsPorts(t *testing.T) {
	f := newFixture(t)
	kube := f.kubeService("reviews", "bookinfo", f.port("http", 9080, index.ProtocolHTTP), f.port("metrics", 15020, index.ProtocolHTTP))
	f.endpoints(kube, "reviews-abc", []index.EndpointPort{f.epPort("http", 8080)},
		index.Endpoint{Addr: mustAddr("10.0.0.2"), Workload: f.sym("reviews-v1-5d4f8b7c9-abcde"), Labels: f.labels("app", "reviews", "version", "v1", "pod-template-hash", "5d4f8b7c9"), TLSMode: index.TLSModeIstio},
		index.Endpoint{Addr: mustAddr("10.0.0.1"), Workload: f.sym("reviews-v2-7c9f-xyz12"), Labels: f.labels("app", "reviews", "version", "v2", "pod-template-hash", "7c9f")},
	)
	se := f.serviceEntry("vm.example.com", "default", "vms",
		index.Port{Name: f.sym("http"), Number: 80, TargetPort: 8000, Protocol: index.ProtocolHTTP},
		f.port("grpc", 90, index.ProtocolGRPC))
	f.endpoints(se, "vms", []index.EndpointPort{f.epPort("grpc", 9999)}, index.Endpoint{Addr: mustAddr("192.168.0.1")})
	f.endpoints(se, "vms#1", nil, index.Endpoint{Addr: mustAddr("192.168.0.2")})
	f.apply()

	t.Run("kubernetes maps the service port by name", func(t *testing.T) {
		got := flatten(genCLA(t, f.names(), f.endpointsKey(kube)))
		eq(t, "n", len(got), 2)
		// Sorted by address; HEALTHY for Kubernetes endpoints.
		eq(t, "first", got[0], epView{addr: "10.0.0.1", port: 8080, weight: 1, health: corev3.HealthStatus_HEALTHY, wl: "reviews-v2;bookinfo;reviews;v2;Kubernetes"})
		eq(t, "second", got[1], epView{addr: "10.0.0.2", port: 8080, weight: 1, health: corev3.HealthStatus_HEALTHY, tls: true, wl: "reviews-v1;bookinfo;reviews;v1;Kubernetes"})
		k := f.endpointsKey(kube)
		k.Port = f.svc(kube).Ports[1]
		k.ClusterName = "outbound|15020||reviews.bookinfo.svc.cluster.local"
		eq(t, "unserved port is empty", len(genCLA(t, f.names(), k).Endpoints), 0)
	})
	t.Run("service entry: endpoint port by name, else targetPort, else the port", func(t *testing.T) {
		got := flatten(genCLA(t, f.names(), f.endpointsKey(se)))
		eq(t, "n", len(got), 2)
		eq(t, "targetPort", got[0].port, uint32(8000))
		eq(t, "workload", got[0].wl, "vms-0;default;vms-0;;Kubernetes")
		eq(t, "second group index", got[1].wl, "vms-1;default;vms-1;;Kubernetes")
		k := f.endpointsKey(se)
		k.Port = f.svc(se).Ports[1]
		got = flatten(genCLA(t, f.names(), k))
		eq(t, "named", got[0].port, uint32(9999))
		eq(t, "number", got[1].port, uint32(90))
	})
}

func TestEndpointsFilters(t *testing.T) {
	f := newFixture(t)
	svc := f.kubeService("reviews", "bookinfo", f.port("http", 9080, index.ProtocolHTTP))
	v1, v2 := f.labels("app", "reviews", "version", "v1"), f.labels("app", "reviews", "version", "v2")
	f.endpoints(svc, "slice-a", []index.EndpointPort{f.epPort("http", 9080)},
		index.Endpoint{Addr: mustAddr("10.0.0.1"), Labels: v1, TLSMode: index.TLSModeIstio},
		index.Endpoint{Addr: mustAddr("10.0.0.2"), Labels: v2, TLSMode: index.TLSModeIstio, Health: index.HealthUnhealthy},
		index.Endpoint{Addr: mustAddr("10.0.0.3"), Labels: v2, Health: index.HealthDraining},
		index.Endpoint{Hostname: f.sym("not-an-ip.example.com"), Labels: v2},
	)
	f.apply()

	t.Run("unhealthy sent, draining and hostnames dropped", func(t *testing.T) {
		got := flatten(genCLA(t, f.names(), f.endpointsKey(svc)))
		eq(t, "n", len(got), 2)
		eq(t, "unhealthy", got[1].health, corev3.HealthStatus_UNHEALTHY)
	})
	t.Run("minHealthPercent drops unhealthy", func(t *testing.T) {
		k := f.endpointsKey(svc)
		k.SendUnhealthy = false
		eq(t, "n", len(flatten(genCLA(t, f.names(), k))), 1)
	})
	t.Run("subset labels", func(t *testing.T) {
		k := f.endpointsKey(svc)
		k.Subset, k.SubsetLabels = "v1", f.labels("version", "v1")
		k.ClusterName = "outbound|9080|v1|reviews.bookinfo.svc.cluster.local"
		got := flatten(genCLA(t, f.names(), k))
		eq(t, "n", len(got), 1)
		eq(t, "v1", got[0].addr, "10.0.0.1")
	})
	t.Run("mTLS disabled drops the tlsMode metadata", func(t *testing.T) {
		k := f.endpointsKey(svc)
		k.MTLSDisabled = true
		for _, e := range flatten(genCLA(t, f.names(), k)) {
			eq(t, "tls", e.tls, false)
		}
	})
	t.Run("unknown cluster is empty", func(t *testing.T) {
		k := &encode.EndpointsKey{ClusterName: "outbound|80||nowhere.example"}
		cla := genCLA(t, f.names(), k)
		eq(t, "empty", len(cla.Endpoints), 0)
	})
}

func TestEndpointsLocality(t *testing.T) {
	f := newFixture(t)
	svc := f.kubeService("reviews", "bookinfo", f.port("http", 9080, index.ProtocolHTTP))
	ep := func(ip, loc string, w uint16) index.Endpoint {
		return index.Endpoint{Addr: mustAddr(ip), Locality: f.sym(loc), Weight: w}
	}
	f.endpoints(svc, "slice-a", []index.EndpointPort{f.epPort("http", 9080)},
		ep("10.0.3.1", "us-west/b", 1),
		ep("10.0.1.1", "us-east/a/r1", 2),
		ep("10.0.1.2", "us-east/a/r1", 3),
		ep("10.0.2.1", "us-east/b", 1),
		ep("10.0.4.1", "", 1),
	)
	f.apply()

	cla := genCLA(t, f.names(), f.endpointsKey(svc))
	var locs []string
	for _, le := range cla.Endpoints {
		locs = append(locs, le.Locality.Region+"/"+le.Locality.Zone+"/"+le.Locality.SubZone)
		eq(t, "no priority without failover", le.Priority, uint32(0))
	}
	eq(t, "order", len(locs) == 4 && locs[0] == "//" && locs[1] == "us-east/a/r1" && locs[2] == "us-east/b/" && locs[3] == "us-west/b/", true)
	eq(t, "summed weight", cla.Endpoints[1].LoadBalancingWeight.GetValue(), uint32(5))

	t.Run("failover priorities relative to the proxy", func(t *testing.T) {
		k := f.endpointsKey(svc)
		k.Failover, k.Locality = true, "us-east/a/r1"
		prio := map[string]uint32{}
		for _, le := range genCLA(t, f.names(), k).Endpoints {
			prio[le.Locality.Region+"/"+le.Locality.Zone] = le.Priority
		}
		eq(t, "same subzone", prio["us-east/a"], uint32(0))
		eq(t, "same region", prio["us-east/b"], uint32(1))
		eq(t, "other region", prio["us-west/b"], uint32(2))
		eq(t, "no locality", prio["/"], uint32(2))
	})
	t.Run("failover rule", func(t *testing.T) {
		f2 := f
		dr := drConfig(f2, "bookinfo", "reviews", "reviews.bookinfo.svc.cluster.local", &networking.DestinationRule{
			TrafficPolicy: &networking.TrafficPolicy{
				OutlierDetection: &networking.OutlierDetection{Consecutive_5XxErrors: wrapperspb.UInt32(1)},
				LoadBalancer: &networking.LoadBalancerSettings{LocalityLbSetting: &networking.LocalityLoadBalancerSetting{
					Failover: []*networking.LocalityLoadBalancerSetting_Failover{{From: "us-east", To: "us-west"}},
				}},
			},
		})
		k := f.endpointsKey(svc)
		k.ApplyDestinationRule(dr, "us-east/a/r1", false)
		eq(t, "failover", k.Failover, true)
		eq(t, "locality in key", k.Locality, "us-east/a/r1")
		eq(t, "locality dr", k.LocalityDR == dr, true)
		prio := map[string]uint32{}
		for _, le := range genCLA(t, f.names(), k).Endpoints {
			prio[le.Locality.Region] = le.Priority
		}
		eq(t, "failover region", prio["us-west"], uint32(2))
		eq(t, "other", prio[""], uint32(3))
	})
	t.Run("distribute weights", func(t *testing.T) {
		dr := drConfig(f, "bookinfo", "reviews-dist", "reviews.bookinfo.svc.cluster.local", &networking.DestinationRule{
			TrafficPolicy: &networking.TrafficPolicy{LoadBalancer: &networking.LoadBalancerSettings{LocalityLbSetting: &networking.LocalityLoadBalancerSetting{
				Distribute: []*networking.LocalityLoadBalancerSetting_Distribute{{From: "us-east/*", To: map[string]uint32{"us-east/*": 80, "us-west/*": 20}}},
			}}},
		})
		k := f.endpointsKey(svc)
		k.ApplyDestinationRule(dr, "us-east/a/r1", false)
		eq(t, "no failover", k.Failover, false)
		eq(t, "locality in key", k.Locality, "us-east/a/r1")
		w := map[string]uint32{}
		n := map[string]int{}
		for _, le := range genCLA(t, f.names(), k).Endpoints {
			w[le.Locality.Region+"/"+le.Locality.Zone] = le.LoadBalancingWeight.GetValue()
			n[le.Locality.Region+"/"+le.Locality.Zone] = len(le.LbEndpoints)
		}
		eq(t, "us-east/a", w["us-east/a"], uint32(67)) // ceil(5*80/6)
		eq(t, "us-east/b", w["us-east/b"], uint32(14)) // ceil(1*80/6)
		eq(t, "us-west/b", w["us-west/b"], uint32(20))
		eq(t, "unlisted locality dropped", n["/"], 0)
	})
	t.Run("no locality in the key without failover", func(t *testing.T) {
		k := f.endpointsKey(svc)
		k.ApplyDestinationRule(nil, "us-east/a/r1", false)
		eq(t, "locality", k.Locality, "")
		eq(t, "send unhealthy", k.SendUnhealthy, true)
	})
}

func TestEndpointsApplyDestinationRuleTLS(t *testing.T) {
	f := newFixture(t)
	svc := f.kubeService("reviews", "bookinfo", f.port("http", 9080, index.ProtocolHTTP))
	f.apply()
	dr := drConfig(f, "bookinfo", "reviews", "reviews.bookinfo.svc.cluster.local", &networking.DestinationRule{
		TrafficPolicy: &networking.TrafficPolicy{
			Tls:              &networking.ClientTLSSettings{Mode: networking.ClientTLSSettings_ISTIO_MUTUAL},
			OutlierDetection: &networking.OutlierDetection{MinHealthPercent: 50},
		},
		Subsets: []*networking.Subset{
			{Name: "plain", TrafficPolicy: &networking.TrafficPolicy{Tls: &networking.ClientTLSSettings{Mode: networking.ClientTLSSettings_DISABLE}}},
			{Name: "inherit"},
		},
	})
	k := f.endpointsKey(svc)
	k.ApplyDestinationRule(dr, "", true)
	eq(t, "ISTIO_MUTUAL overrides PeerAuthentication", k.MTLSDisabled, false)
	eq(t, "minHealthPercent", k.SendUnhealthy, false)
	k.Subset = "plain"
	k.ApplyDestinationRule(dr, "", false)
	eq(t, "subset DISABLE", k.MTLSDisabled, true)
	k.Subset = "inherit"
	k.ApplyDestinationRule(dr, "", false)
	eq(t, "subset inherits", k.MTLSDisabled, false)
	k.ApplyDestinationRule(nil, "", true)
	eq(t, "PeerAuthentication DISABLE", k.MTLSDisabled, true)
}

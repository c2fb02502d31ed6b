package encode_test

import (
	"maps"
	"testing"

	"google.golang.org/protobuf/types/known/wrapperspb"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/index"
)

// TestEndpointsFailoverPriority: localityLbSetting.failoverPriority as
// istiod's applyFailoverPriorities computes it (the istiodref case
// dr-failoverpriority compares the common paths with real istiod; these are
// the rules it does not reach): the network entry's mismatch adds n and
// goes on, topology entries read the endpoints' locality, network and the
// registry's cluster, "key=value" overrides the proxy's value, failover
// rules compose, and a proxy without labels gets no priorities. Every case
// also checks the direct encoding against the reference (genCLA).
func TestEndpointsFailoverPriority(t *testing.T) {
	f := newFixture(t)
	svc := f.kubeService("reviews", "bookinfo", f.port("http", 9080, index.ProtocolHTTP))
	ep := func(ip, loc, network, version string, extra ...string) index.Endpoint {
		return index.Endpoint{Addr: mustAddr(ip), Locality: f.sym(loc), Network: f.sym(network),
			Labels: f.labels(append([]string{"version", version}, extra...)...)}
	}
	f.endpoints(svc, "slice-a", []index.EndpointPort{f.epPort("http", 9080)},
		ep("10.0.1.1", "us-east/a", "net1", "v1"),
		ep("10.0.1.2", "us-east/a", "net1", "v2"),
		ep("10.0.2.1", "us-east/b", "net2", "v1"),
		ep("10.0.2.2", "us-east/b", "net2", "v2"),
		// A network label wins over the endpoint's network.
		ep("10.0.3.1", "us-west/c", "net2", "v1", "topology.istio.io/network", "net1"),
		ep("10.0.4.1", "", "", "v1"),
	)
	f.apply()
	rule := func(name string, s *networking.LocalityLoadBalancerSetting) *index.Config {
		return drConfig(f, "bookinfo", name, "reviews.bookinfo.svc.cluster.local", &networking.DestinationRule{
			TrafficPolicy: &networking.TrafficPolicy{
				OutlierDetection: &networking.OutlierDetection{Consecutive_5XxErrors: wrapperspb.UInt32(1)},
				LoadBalancer:     &networking.LoadBalancerSettings{LocalityLbSetting: s},
			},
		})
	}
	cases := []struct {
		name     string
		setting  *networking.LocalityLoadBalancerSetting
		locality string // the proxy's
		proxy    string // FailoverLabels
		want     map[string]uint32
		groups   int
	}{{
		name:    "network mismatch adds n and goes on",
		setting: &networking.LocalityLoadBalancerSetting{FailoverPriority: []string{"topology.istio.io/network", "version"}},
		proxy:   "net1\nv1\n",
		// raw: 0, 1, 2+0, 2+1, 0, 2+0
		want:   map[string]uint32{"10.0.1.1": 0, "10.0.1.2": 1, "10.0.2.1": 2, "10.0.2.2": 3, "10.0.3.1": 0, "10.0.4.1": 2},
		groups: 6,
	}, {
		name: "topology from locality and the registry's cluster",
		setting: &networking.LocalityLoadBalancerSetting{FailoverPriority: []string{
			"topology.istio.io/cluster", "topology.kubernetes.io/region", "topology.kubernetes.io/zone"}},
		proxy:  "Kubernetes\nus-east\na\n",
		want:   map[string]uint32{"10.0.1.1": 0, "10.0.1.2": 0, "10.0.2.1": 1, "10.0.2.2": 1, "10.0.3.1": 2, "10.0.4.1": 2},
		groups: 4,
	}, {
		name: "another cluster matches no endpoint",
		setting: &networking.LocalityLoadBalancerSetting{FailoverPriority: []string{
			"topology.istio.io/cluster", "topology.kubernetes.io/region"}},
		proxy:  "remote\nus-east\n",
		want:   map[string]uint32{"10.0.1.1": 0, "10.0.1.2": 0, "10.0.2.1": 0, "10.0.2.2": 0, "10.0.3.1": 0, "10.0.4.1": 0},
		groups: 4,
	}, {
		name:    "an entry key=value overrides the proxy's value",
		setting: &networking.LocalityLoadBalancerSetting{FailoverPriority: []string{"version=v2"}},
		proxy:   "v1\n",
		want:    map[string]uint32{"10.0.1.1": 1, "10.0.1.2": 0, "10.0.2.1": 1, "10.0.2.2": 0, "10.0.3.1": 1, "10.0.4.1": 1},
		groups:  6,
	}, {
		name:    "an entry with two = names its first part, without override",
		setting: &networking.LocalityLoadBalancerSetting{FailoverPriority: []string{"version=v2=x"}},
		proxy:   "v1\n",
		want:    map[string]uint32{"10.0.1.1": 0, "10.0.1.2": 1, "10.0.2.1": 0, "10.0.2.2": 1, "10.0.3.1": 0, "10.0.4.1": 0},
		groups:  6,
	}, {
		name: "failover rules apply on top",
		setting: &networking.LocalityLoadBalancerSetting{FailoverPriority: []string{"version"},
			Failover: []*networking.LocalityLoadBalancerSetting_Failover{{From: "us-east", To: "us-west"}}},
		locality: "us-east/a/",
		proxy:    "v1\n",
		// version*5 + locality: 0, 5+0, 1, 5+1, 3, 4
		want:   map[string]uint32{"10.0.1.1": 0, "10.0.1.2": 4, "10.0.2.1": 1, "10.0.2.2": 5, "10.0.3.1": 2, "10.0.4.1": 3},
		groups: 6,
	}, {
		name:     "without failover rules, no locality priorities",
		setting:  &networking.LocalityLoadBalancerSetting{FailoverPriority: []string{"version"}},
		locality: "us-west/c/",
		proxy:    "v1\n",
		want:     map[string]uint32{"10.0.1.1": 0, "10.0.1.2": 1, "10.0.2.1": 0, "10.0.2.2": 1, "10.0.3.1": 0, "10.0.4.1": 0},
		groups:   6,
	}, {
		name:     "a proxy without labels gets no priorities at all",
		setting:  &networking.LocalityLoadBalancerSetting{FailoverPriority: []string{"version"}},
		locality: "us-west/c/",
		proxy:    "",
		want:     map[string]uint32{"10.0.1.1": 0, "10.0.1.2": 0, "10.0.2.1": 0, "10.0.2.2": 0, "10.0.3.1": 0, "10.0.4.1": 0},
		groups:   4,
	}}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dr := rule("fp-"+string(rune('a'+i)), tc.setting)
			k := f.endpointsKey(svc)
			k.ApplyDestinationRule(dr, tc.locality, false)
			eq(t, "failoverPriority applies", len(k.FailoverPriority()), len(tc.setting.FailoverPriority))
			k.FailoverLabels = tc.proxy
			cla := genCLA(t, f.names(), k)
			got := map[string]uint32{}
			for _, le := range cla.Endpoints {
				var w uint32
				for _, e := range le.LbEndpoints {
					got[e.GetEndpoint().GetAddress().GetSocketAddress().GetAddress()] = le.Priority
					w += e.GetLoadBalancingWeight().GetValue()
				}
				eq(t, "group weight", le.GetLoadBalancingWeight().GetValue(), w)
			}
			if !maps.Equal(got, tc.want) {
				t.Errorf("priorities\n got %v\nwant %v", got, tc.want)
			}
			eq(t, "groups", len(cla.Endpoints), tc.groups)
		})
	}
	t.Run("distribute or no outlier detection: none applies", func(t *testing.T) {
		dist := drConfig(f, "bookinfo", "fp-dist", "reviews.bookinfo.svc.cluster.local", &networking.DestinationRule{
			TrafficPolicy: &networking.TrafficPolicy{
				OutlierDetection: &networking.OutlierDetection{Consecutive_5XxErrors: wrapperspb.UInt32(1)},
				LoadBalancer: &networking.LoadBalancerSettings{LocalityLbSetting: &networking.LocalityLoadBalancerSetting{
					FailoverPriority: []string{"version"},
					Distribute:       []*networking.LocalityLoadBalancerSetting_Distribute{{From: "*", To: map[string]uint32{"*": 100}}},
				}},
			},
		})
		noOD := drConfig(f, "bookinfo", "fp-nood", "reviews.bookinfo.svc.cluster.local", &networking.DestinationRule{
			TrafficPolicy: &networking.TrafficPolicy{LoadBalancer: &networking.LoadBalancerSettings{
				LocalityLbSetting: &networking.LocalityLoadBalancerSetting{FailoverPriority: []string{"version"}},
			}},
		})
		disabled := drConfig(f, "bookinfo", "fp-off", "reviews.bookinfo.svc.cluster.local", &networking.DestinationRule{
			TrafficPolicy: &networking.TrafficPolicy{
				OutlierDetection: &networking.OutlierDetection{Consecutive_5XxErrors: wrapperspb.UInt32(1)},
				LoadBalancer: &networking.LoadBalancerSettings{LocalityLbSetting: &networking.LocalityLoadBalancerSetting{
					FailoverPriority: []string{"version"}, Enabled: wrapperspb.Bool(false),
				}},
			},
		})
		for _, dr := range []*index.Config{dist, noOD, disabled, nil} {
			k := f.endpointsKey(svc)
			k.ApplyDestinationRule(dr, "us-east/a/", false)
			if fp := k.FailoverPriority(); fp != nil {
				t.Errorf("rule %v: failoverPriority %q applies", dr != nil, fp)
			}
		}
	})
}

func TestFailoverPriorityKeyAndLocalityPart(t *testing.T) {
	eq(t, "plain", encode.FailoverPriorityKey("version"), "version")
	eq(t, "override", encode.FailoverPriorityKey("version=v1"), "version")
	eq(t, "two =", encode.FailoverPriorityKey("a=b=c"), "a")
	for key, want := range map[string]string{
		encode.LabelTopologyRegion: "r", encode.LabelTopologyZone: "z", encode.LabelTopologySubzone: "s", "app": "",
	} {
		eq(t, key, encode.LocalityPart("r/z/s", key), want)
	}
	eq(t, "zone only", encode.LocalityPart("/z", encode.LabelTopologyZone), "z")
}

package encode_test

import (
	"fmt"
	"testing"

	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/index"
)

// TestAppendRouteConfiguration: a route configuration assembled from
// cached virtual host bytes decodes to exactly the message built the slow
// way, for every option set.
func TestAppendRouteConfiguration(t *testing.T) {
	r := newLRRows()
	var vhosts []*route.VirtualHost
	var parts [][]byte
	for i := range 5 {
		k := r.vhKey(r.svc(fmt.Sprintf("s%d.example", i), "default", index.OriginServiceEntry, []string{fmt.Sprintf("10.0.0.%d", i+1)}, httpP(80)), 80)
		if i == 2 {
			k.VirtualService = r.vs("vs", "default", &networking.VirtualService{Http: []*networking.HTTPRoute{{
				Name: "faulty", Route: dest("s2.example"),
				Fault: &networking.HTTPFaultInjection{Abort: &networking.HTTPFaultInjection_Abort{
					Percentage: &networking.Percent{Value: 1}, ErrorType: &networking.HTTPFaultInjection_Abort_HttpStatus{HttpStatus: 500}}},
				CorsPolicy: &networking.CorsPolicy{AllowMethods: []string{"GET"}},
			}}})
		}
		_, m := encode.VirtualHost(lrNames, k)
		vhosts = append(vhosts, m.(*route.VirtualHost))
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, b)
	}
	parts = append(parts, nil) // an empty part is skipped
	vhosts = append(vhosts, &route.VirtualHost{})
	allow := encode.NewCatchAllVirtualHost(true)
	ab, _ := proto.MarshalOptions{Deterministic: true}.Marshal(allow)
	parts = append(parts, ab)
	vhosts = append(vhosts, allow)
	// The cached catch-all part decodes to the same virtual host.
	cached := &route.VirtualHost{}
	if err := proto.Unmarshal(encode.CatchAllVirtualHost(true).Bytes, cached); err != nil || !proto.Equal(cached, allow) {
		t.Errorf("cached catch-all = %v (%v)", cached, err)
	}

	for _, opts := range []encode.RouteConfigOptions{encode.RouteConfigPlain, encode.RouteConfigSidecar, encode.RouteConfigValidateOnly} {
		t.Run(fmt.Sprint(opts), func(t *testing.T) {
			b := encode.AppendRouteConfiguration(nil, "80", parts, opts)
			a := &anypb.Any{}
			if err := proto.Unmarshal(b, a); err != nil {
				t.Fatal(err)
			}
			if a.TypeUrl != encode.RouteConfigurationType {
				t.Errorf("type URL = %q", a.TypeUrl)
			}
			got := &route.RouteConfiguration{}
			if err := a.UnmarshalTo(got); err != nil {
				t.Fatal(err)
			}
			want := encode.NewRouteConfiguration("80", vhosts, opts)
			if !proto.Equal(got, want) {
				t.Errorf("assembled:\n%v\nslow:\n%v", got, want)
			}
			lrValidate(t, got)
			// Byte-identical to a deterministic marshal of the slow message.
			wb, _ := proto.MarshalOptions{Deterministic: true}.Marshal(want)
			if string(a.Value) != string(wb) {
				t.Errorf("assembled bytes differ from proto.Marshal")
			}
		})
	}
}

// TestRouteConfigurationEntry: the assembled configuration is cached under
// its parts' versions; a changed part makes a new entry.
func TestRouteConfigurationEntry(t *testing.T) {
	c := encode.NewCache()
	c.SetVerify(true)
	r := newLRRows()
	k1 := r.vhKey(r.svc("a.example", "default", index.OriginServiceEntry, nil, httpP(80)), 80)
	k2 := r.vhKey(r.svc("b.example", "default", index.OriginServiceEntry, nil, httpP(80)), 80)
	p1, err := encode.Part(c, lrNames, k1, encode.VirtualHostGen)
	if err != nil {
		t.Fatal(err)
	}
	p2, _ := encode.Part(c, lrNames, k2, encode.VirtualHostGen)
	key := &encode.RouteConfigKey{Name: "80", Options: encode.RouteConfigSidecar, VirtualHosts: []*encode.Entry{p1, p2, encode.CatchAllVirtualHost(false)}}
	e1, err := encode.RouteConfigurationEntry(c, key)
	if err != nil {
		t.Fatal(err)
	}
	e2, _ := encode.RouteConfigurationEntry(c, key)
	if e1 != e2 {
		t.Error("second assembly missed the cache")
	}
	plain := encode.NewCache()
	plain.SetVerify(false) // PILOTFISH_VERIFY_CACHE=1 (make test) would regenerate on every hit
	_, _ = encode.RouteConfigurationEntry(plain, key)
	if n := testing.AllocsPerRun(100, func() { _, _ = encode.RouteConfigurationEntry(plain, key) }); n != 0 {
		t.Errorf("a cached route configuration allocates %v times", n)
	}
	// A part rebuilt under a new key with the same bytes (an input that
	// changed nothing) has the same version: the assembly is the same entry.
	k2.Service.Hash++
	p2b, _ := encode.Part(c, lrNames, k2, encode.VirtualHostGen)
	if p2b == p2 || p2b.Version != p2.Version {
		t.Fatalf("part under a new key: same entry %v, versions %s and %s", p2b == p2, p2b.Version, p2.Version)
	}
	key.VirtualHosts[1] = p2b
	if e, _ := encode.RouteConfigurationEntry(c, key); e != e1 {
		t.Error("parts with equal bytes assembled a new route configuration")
	}
	// A part whose bytes changed changes the route configuration.
	k3 := r.vhKey(r.svc("c.example", "default", index.OriginServiceEntry, nil, httpP(80)), 80)
	p3, _ := encode.Part(c, lrNames, k3, encode.VirtualHostGen)
	key.VirtualHosts[1] = p3
	e3, _ := encode.RouteConfigurationEntry(c, key)
	if e3 == e1 || e3.Version == e1.Version {
		t.Error("a changed part did not change the route configuration")
	}
	got := &route.RouteConfiguration{}
	a := &anypb.Any{}
	if err := proto.Unmarshal(e3.Bytes, a); err != nil {
		t.Fatal(err)
	}
	if err := a.UnmarshalTo(got); err != nil {
		t.Fatal(err)
	}
	if len(got.VirtualHosts) != 3 || got.VirtualHosts[2].Name != "block_all" || got.VirtualHosts[2].Routes[0].GetDirectResponse().GetStatus() != 502 {
		t.Errorf("route configuration = %v", got)
	}
}

package loadgen

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// TestWireFieldNumbers checks every field number the lazy decoder relies on
// against the generated descriptors.
func TestWireFieldNumbers(t *testing.T) {
	cases := []struct {
		msg   proto.Message
		field string
		num   int
	}{
		{&discoveryv3.DiscoveryResponse{}, "version_info", fResponseVersion},
		{&discoveryv3.DiscoveryResponse{}, "resources", fResponseResource},
		{&discoveryv3.DiscoveryResponse{}, "type_url", fResponseTypeURL},
		{&discoveryv3.DiscoveryResponse{}, "nonce", fResponseNonce},
		{&discoveryv3.DeltaDiscoveryResponse{}, "system_version_info", fDeltaVersion},
		{&discoveryv3.DeltaDiscoveryResponse{}, "resources", fDeltaResource},
		{&discoveryv3.DeltaDiscoveryResponse{}, "type_url", fDeltaTypeURL},
		{&discoveryv3.DeltaDiscoveryResponse{}, "nonce", fDeltaNonce},
		{&discoveryv3.DeltaDiscoveryResponse{}, "removed_resources", fDeltaRemoved},
		{&discoveryv3.DeltaDiscoveryResponse{}, "removed_resource_names", fDeltaRemovedNames},
		{&discoveryv3.Resource{}, "version", fResourceVersion},
		{&discoveryv3.Resource{}, "resource", fResourceResource},
		{&discoveryv3.Resource{}, "name", fResourceName},
		{&discoveryv3.ResourceName{}, "name", fResourceNameName},
		{&anypb.Any{}, "type_url", fAnyTypeURL},
		{&anypb.Any{}, "value", fAnyValue},
		{&clusterv3.Cluster{}, "name", fClusterName},
		{&clusterv3.Cluster{}, "type", fClusterType},
		{&clusterv3.Cluster{}, "eds_cluster_config", fClusterEDSConfig},
		{&clusterv3.Cluster{}, "cluster_type", fClusterClusterType},
		{&clusterv3.Cluster_EdsClusterConfig{}, "service_name", fEDSServiceName},
		{&listenerv3.Listener{}, "name", fListenerName},
		{&listenerv3.Listener{}, "filter_chains", fListenerFilterChains},
		{&listenerv3.Listener{}, "api_listener", fListenerAPIListener},
		{&listenerv3.Listener{}, "default_filter_chain", fListenerDefaultChain},
		{&listenerv3.FilterChain{}, "filters", fFilterChainFilters},
		{&listenerv3.Filter{}, "typed_config", fFilterTypedConfig},
		{&listenerv3.ApiListener{}, "api_listener", fAPIListenerAPIListen},
		{&hcmv3.HttpConnectionManager{}, "rds", fHCMRds},
		{&hcmv3.HttpConnectionManager{}, "route_config", fHCMRouteConfig},
		{&hcmv3.Rds{}, "route_config_name", fRdsRouteConfigName},
		{&routev3.RouteConfiguration{}, "name", fRouteConfigName},
		{&routev3.RouteConfiguration{}, "virtual_hosts", fRouteConfigVHosts},
		{&routev3.VirtualHost{}, "routes", fVHostRoutes},
		{&routev3.Route{}, "route", fRouteRoute},
		{&routev3.RouteAction{}, "cluster", fRouteActionCluster},
		{&routev3.RouteAction{}, "weighted_clusters", fRouteActionWeighted},
		{&routev3.WeightedCluster{}, "clusters", fWeightedClusters},
		{&routev3.WeightedCluster_ClusterWeight{}, "name", fClusterWeightName},
		{&endpointv3.ClusterLoadAssignment{}, "cluster_name", fCLAClusterName},
	}
	for _, c := range cases {
		d := c.msg.ProtoReflect().Descriptor()
		t.Run(string(d.Name())+"."+c.field, func(t *testing.T) {
			f := d.Fields().ByName(protoreflect.Name(c.field))
			if f == nil {
				t.Fatalf("%s has no field %s", d.FullName(), c.field)
			}
			if int(f.Number()) != c.num {
				t.Errorf("%s.%s is field %d, decoder uses %d", d.FullName(), c.field, f.Number(), c.num)
			}
		})
	}
	if int(clusterv3.Cluster_EDS) != clusterTypeEDS {
		t.Errorf("Cluster_EDS = %d, decoder uses %d", clusterv3.Cluster_EDS, clusterTypeEDS)
	}
	for typ, url := range map[string]string{
		ClusterType:  string((&clusterv3.Cluster{}).ProtoReflect().Descriptor().FullName()),
		EndpointType: string((&endpointv3.ClusterLoadAssignment{}).ProtoReflect().Descriptor().FullName()),
		ListenerType: string((&listenerv3.Listener{}).ProtoReflect().Descriptor().FullName()),
		RouteType:    string((&routev3.RouteConfiguration{}).ProtoReflect().Descriptor().FullName()),
		hcmTypeURL:   string((&hcmv3.HttpConnectionManager{}).ProtoReflect().Descriptor().FullName()),
	} {
		if typ != "type.googleapis.com/"+url {
			t.Errorf("type URL %s, message %s", typ, url)
		}
	}
}

// wireCorpus is a set of resources covering every shape the decoder walks.
func wireCorpus(t testing.TB) []proto.Message {
	ads := &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}}}
	tcp := &listenerv3.Filter{Name: "envoy.filters.network.tcp_proxy", ConfigType: &listenerv3.Filter_TypedConfig{
		TypedConfig: mustAny(t, &tcpproxyv3.TcpProxy{StatPrefix: "tcp", ClusterSpecifier: &tcpproxyv3.TcpProxy_Cluster{Cluster: "tcp-cluster"}}),
	}}
	hcmFilter := func(h *hcmv3.HttpConnectionManager) *listenerv3.Filter {
		return &listenerv3.Filter{Name: "envoy.filters.network.http_connection_manager",
			ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: mustAny(t, h)}}
	}
	weighted := &routev3.RouteConfiguration{Name: "weighted", VirtualHosts: []*routev3.VirtualHost{{
		Name: "vh", Domains: []string{"*"},
		Routes: []*routev3.Route{
			{Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/a"}},
				Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_WeightedClusters{
					WeightedClusters: &routev3.WeightedCluster{Clusters: []*routev3.WeightedCluster_ClusterWeight{
						{Name: "w1", Weight: wrapperspb.UInt32(10)}, {Name: "w2", Weight: wrapperspb.UInt32(90)},
					}}}}}},
			{Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
				Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "direct"}}}},
			{Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/r"}},
				Action: &routev3.Route_Redirect{Redirect: &routev3.RedirectAction{HostRedirect: "example.com"}}},
		},
	}}}
	return []proto.Message{
		edsCluster("eds-with-service", true, 0),
		&clusterv3.Cluster{Name: "eds-other-service", ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
			EdsClusterConfig: &clusterv3.Cluster_EdsClusterConfig{EdsConfig: ads, ServiceName: "the-service"}},
		edsCluster("eds-no-service", false, 0),
		&clusterv3.Cluster{Name: "static", ConnectTimeout: durationpb.New(time.Second)},
		&clusterv3.Cluster{Name: "dns", ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STRICT_DNS}},
		&clusterv3.Cluster{Name: "aggregate", ClusterDiscoveryType: &clusterv3.Cluster_ClusterType{
			ClusterType: &clusterv3.Cluster_CustomClusterType{Name: "envoy.clusters.aggregate"}}},
		cla("eds-with-service", 1, 0),
		&listenerv3.Listener{Name: "chains", FilterChains: []*listenerv3.FilterChain{
			{Filters: []*listenerv3.Filter{hcmFilter(hcm(t, "80", nil))}},
			{Filters: []*listenerv3.Filter{tcp}},
			{Filters: []*listenerv3.Filter{hcmFilter(hcm(t, "9080", nil)), hcmFilter(hcm(t, "80", nil))}},
		}, DefaultFilterChain: &listenerv3.FilterChain{Filters: []*listenerv3.Filter{hcmFilter(hcm(t, "default", nil))}}},
		&listenerv3.Listener{Name: "tcp-only", FilterChains: []*listenerv3.FilterChain{{Filters: []*listenerv3.Filter{tcp}}}},
		&listenerv3.Listener{Name: "inline", FilterChains: []*listenerv3.FilterChain{
			{Filters: []*listenerv3.Filter{hcmFilter(hcm(t, "", weighted))}},
		}},
		apiListener(t, "api.example.com:80", "outbound|80||api.example.com"),
		weighted,
		routeConfig("80", 3, 0, func(i int) string { return clusterName(host(i)) }),
	}
}

// typedRefs extracts the same (resource, ref) pairs as the lazy decoder from
// typed messages: the reference the decoder is checked against.
func typedRefs(t testing.TB, m proto.Message, routeClusters bool) (name string, refs []string) {
	routeRefs := func(rc *routev3.RouteConfiguration) {
		if !routeClusters {
			return
		}
		for _, vh := range rc.GetVirtualHosts() {
			for _, r := range vh.GetRoutes() {
				a := r.GetRoute()
				if c := a.GetCluster(); c != "" {
					refs = append(refs, "cluster:"+c)
				}
				for _, w := range a.GetWeightedClusters().GetClusters() {
					refs = append(refs, "cluster:"+w.GetName())
				}
			}
		}
	}
	hcmRefs := func(a *anypb.Any) {
		if a.GetTypeUrl() != hcmTypeURL {
			return
		}
		var h hcmv3.HttpConnectionManager
		if err := a.UnmarshalTo(&h); err != nil {
			t.Fatal(err)
		}
		if n := h.GetRds().GetRouteConfigName(); n != "" {
			refs = append(refs, n)
		}
		if rc := h.GetRouteConfig(); rc != nil {
			routeRefs(rc)
		}
	}
	switch m := m.(type) {
	case *clusterv3.Cluster:
		if m.GetType() == clusterv3.Cluster_EDS && m.GetClusterType() == nil {
			s := m.GetEdsClusterConfig().GetServiceName()
			if s == "" {
				s = m.GetName()
			}
			refs = append(refs, s)
		}
		return m.GetName(), refs
	case *endpointv3.ClusterLoadAssignment:
		return m.GetClusterName(), nil
	case *listenerv3.Listener:
		chains := m.GetFilterChains()
		if m.GetDefaultFilterChain() != nil {
			chains = append(chains, m.GetDefaultFilterChain())
		}
		for _, fc := range chains {
			for _, f := range fc.GetFilters() {
				hcmRefs(f.GetTypedConfig())
			}
		}
		if a := m.GetApiListener().GetApiListener(); a != nil {
			hcmRefs(a)
		}
		return m.GetName(), refs
	case *routev3.RouteConfiguration:
		routeRefs(m)
		return m.GetName(), refs
	}
	t.Fatalf("unexpected %T", m)
	return "", nil
}

// refStrings renders decoded entries as sorted "name -> ref" strings.
func refStrings(syms *symtab, entries []ref) []string {
	var out []string
	for _, e := range entries {
		s := syms.name(e.name) + " -> "
		switch {
		case e.ref == 0:
		case e.ref&refCluster != 0:
			s += "cluster:" + syms.name(e.ref)
		default:
			s += syms.name(e.ref)
		}
		out = append(out, s)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func wantStrings(t testing.TB, msgs []proto.Message, routeClusters bool) []string {
	var out []string
	for _, m := range msgs {
		name, refs := typedRefs(t, m, routeClusters)
		if len(refs) == 0 {
			out = append(out, name+" -> ")
		}
		for _, r := range refs {
			out = append(out, name+" -> "+r)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func sotwResponse(t testing.TB, typeURL string, msgs []proto.Message) []byte {
	resp := &discoveryv3.DiscoveryResponse{VersionInfo: "v7", TypeUrl: typeURL, Nonce: "n42"}
	for _, m := range msgs {
		resp.Resources = append(resp.Resources, mustAny(t, m))
	}
	b, err := proto.Marshal(resp)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDecodeMatchesTyped: the lazy decoder extracts exactly what a typed
// walk of the same resources finds, with and without route clusters, in
// SotW and Delta responses.
func TestDecodeMatchesTyped(t *testing.T) {
	corpus := wireCorpus(t)
	for _, routeClusters := range []bool{false, true} {
		for _, delta := range []bool{false, true} {
			t.Run(fmt.Sprintf("routeClusters=%v/delta=%v", routeClusters, delta), func(t *testing.T) {
				d := decoder{syms: newSymtab(), routeClusters: routeClusters, full: true}
				var r response
				var err error
				if delta {
					resp := &discoveryv3.DeltaDiscoveryResponse{SystemVersionInfo: "v7", TypeUrl: ClusterType, Nonce: "n42"}
					for _, m := range corpus {
						resp.Resources = append(resp.Resources, &discoveryv3.Resource{Version: "1", Resource: mustAny(t, m)})
					}
					b, _ := proto.Marshal(resp)
					err = d.decodeDelta(b, &r)
				} else {
					err = d.decodeSotW(sotwResponse(t, ClusterType, corpus), &r)
				}
				if err != nil {
					t.Fatal(err)
				}
				if string(r.version) != "v7" || string(r.nonce) != "n42" || r.t != typeCDS || r.resources != len(corpus) || r.size == 0 {
					t.Errorf("header: version %q nonce %q type %v resources %d size %d", r.version, r.nonce, r.t, r.resources, r.size)
				}
				if r.invalid != 0 {
					t.Errorf("%d invalid: %s", r.invalid, r.whyBad)
				}
				got, want := refStrings(d.syms, r.entries), wantStrings(t, corpus, routeClusters)
				if !slices.Equal(got, want) {
					t.Errorf("lazy decode:\n got %q\nwant %q", got, want)
				}
			})
		}
	}
}

// TestDecodeDeltaNames: the Resource's name wins; a Resource without a body
// and removed_resources / removed_resource_names are removals.
func TestDecodeDeltaNames(t *testing.T) {
	resp := &discoveryv3.DeltaDiscoveryResponse{
		TypeUrl: EndpointType, Nonce: "1",
		Resources: []*discoveryv3.Resource{
			{Name: "outer", Resource: mustAny(t, cla("inner", 0, 0))},
			{Name: "gone-by-absence"},
			{Resource: mustAny(t, cla("unnamed", 0, 0))},
		},
		RemovedResources:     []string{"gone"},
		RemovedResourceNames: []*discoveryv3.ResourceName{{Name: "gone-too"}},
	}
	b, _ := proto.Marshal(resp)
	d := decoder{syms: newSymtab()}
	var r response
	if err := d.decodeDelta(b, &r); err != nil {
		t.Fatal(err)
	}
	if got := refStrings(d.syms, r.entries); !slices.Equal(got, []string{"outer -> ", "unnamed -> "}) {
		t.Errorf("entries %q", got)
	}
	removed := d.syms.names(nil, r.removed)
	slices.Sort(removed)
	if !slices.Equal(removed, []string{"gone", "gone-by-absence", "gone-too"}) {
		t.Errorf("removed %q", removed)
	}
	if r.t != typeEDS || r.resources != 3 {
		t.Errorf("type %v resources %d", r.t, r.resources)
	}
}

// TestDecodeOtherType: an unknown type is counted and its URL kept for the
// ACK; its resources are not held.
func TestDecodeOtherType(t *testing.T) {
	const url = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret"
	resp := &discoveryv3.DiscoveryResponse{TypeUrl: url, Nonce: "1",
		Resources: []*anypb.Any{{TypeUrl: url, Value: []byte{0x0a, 0x01, 'x'}}}}
	b, _ := proto.Marshal(resp)
	d := decoder{syms: newSymtab()}
	var r response
	if err := d.decodeSotW(b, &r); err != nil {
		t.Fatal(err)
	}
	if r.t != typeOther || r.url() != url || r.resources != 1 || len(r.entries) != 0 {
		t.Errorf("got type %v url %q resources %d entries %d", r.t, r.url(), r.resources, len(r.entries))
	}
}

// TestDecodeMalformed: truncated messages are ErrDecode, never a panic.
func TestDecodeMalformed(t *testing.T) {
	b := sotwResponse(t, ClusterType, wireCorpus(t))
	d := decoder{syms: newSymtab(), routeClusters: true}
	var r response
	bad := 0
	for n := range len(b) {
		err := d.decodeSotW(b[:n], &r)
		if err != nil {
			if !errors.Is(err, ErrDecode) {
				t.Fatalf("truncated at %d: %v, want ErrDecode", n, err)
			}
			bad++
		}
	}
	if bad == 0 {
		t.Error("no truncation was detected")
	}
}

// TestFullDecodeCountsInvalid: decode "full" runs ValidateAll and counts
// failures.
func TestFullDecodeCountsInvalid(t *testing.T) {
	invalid := &clusterv3.Cluster{Name: "", ConnectTimeout: durationpb.New(-time.Second)} // name is required; timeout must be > 0
	b := sotwResponse(t, ClusterType, []proto.Message{edsCluster("ok", true, 0), invalid})
	d := decoder{syms: newSymtab(), full: true}
	var r response
	if err := d.decodeSotW(b, &r); err != nil {
		t.Fatal(err)
	}
	if r.invalid != 1 || r.whyBad == "" {
		t.Errorf("invalid %d (%q), want 1", r.invalid, r.whyBad)
	}
}

// TestDecodeAllocs: decoding a response whose names are already interned
// allocates nothing.
func TestDecodeAllocs(t *testing.T) {
	b := cdsResponse(t, 100)
	d := decoder{syms: newSymtab()}
	r := new(response)
	if err := d.decodeSotW(b, r); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(100, func() {
		if err := d.decodeSotW(b, r); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 0 {
		t.Errorf("%v allocations per decode of 100 clusters, want none", allocs)
	}
	if len(r.entries) != 100 {
		t.Errorf("%d entries", len(r.entries))
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(sotwResponse(f, ClusterType, wireCorpus(f)), false)
	f.Add(sotwResponse(f, ListenerType, wireCorpus(f)[7:11]), false)
	delta, _ := proto.Marshal(&discoveryv3.DeltaDiscoveryResponse{TypeUrl: ClusterType, Nonce: "1",
		Resources: []*discoveryv3.Resource{{Name: "a", Resource: mustAny(f, edsCluster("a", true, 0))}}, RemovedResources: []string{"b"}})
	f.Add(delta, true)
	f.Fuzz(func(t *testing.T, b []byte, isDelta bool) {
		d := decoder{syms: newSymtab(), routeClusters: true}
		var r response
		var err error
		if isDelta {
			err = d.decodeDelta(b, &r)
		} else {
			err = d.decodeSotW(b, &r)
		}
		if err != nil && !errors.Is(err, ErrDecode) {
			t.Fatalf("error %v is not ErrDecode", err)
		}
		if err == nil && proto.Unmarshal(b, &discoveryv3.DiscoveryResponse{}) != nil && !isDelta {
			// The lazy decoder may accept what a full decode rejects
			// (invalid UTF-8, wrong wire types of skipped fields); that
			// is fine as long as it does not panic.
			return
		}
	})
}

// TestNextFieldFastPath: nextField's inline path reads exactly what
// protowire does, on random bytes biased to short tags and lengths.
func TestNextFieldFastPath(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for range 200000 {
		b := make([]byte, rng.IntN(8))
		for i := range b {
			b[i] = byte(rng.IntN(256))
			if rng.IntN(2) == 0 {
				b[i] &= 0x7f
			}
		}
		var fast, slow field
		restF, okF := nextField(b, &fast)
		restS, okS := nextFieldSlow(b, &slow)
		if okF != okS || len(restF) != len(restS) {
			t.Fatalf("% x: fast (%v, %d left), protowire (%v, %d left)", b, okF, len(restF), okS, len(restS))
		}
		if okF && (fast.num != slow.num || fast.typ != slow.typ ||
			(fast.typ == protowire.BytesType && !bytes.Equal(fast.bytes, slow.bytes)) ||
			(fast.typ == protowire.VarintType && fast.varint != slow.varint)) {
			t.Fatalf("% x: fast %+v, protowire %+v", b, fast, slow)
		}
	}
}

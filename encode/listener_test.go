package encode_test

import (
	"slices"
	"testing"
	"time"

	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tcp "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/index"
)

func tcpP(n uint32, p index.Protocol) index.Port { return index.Port{Number: n, Protocol: p} }

func outboundKey(r *lrRows, bind string, port uint32, svcs ...encode.ListenerService) *encode.OutboundListenerKey {
	return &encode.OutboundListenerKey{
		Namespace: "default", DomainSuffix: "cluster.local", OutboundAllowAny: true,
		Bind: bind, Port: port, Services: svcs,
	}
}

// genListener generates and validates a listener; with deep set the typed
// configs inside are validated too. Proxyless gRPC listeners are not deep
// validated: like istiod's, their connection managers have no stat_prefix,
// which gRPC ignores and Envoy requires.
func genListener[K any](t *testing.T, gen func(K) (string, any), k K, deep bool) *listener.Listener {
	t.Helper()
	name, m := gen(k)
	l := m.(*listener.Listener)
	if name != l.Name {
		t.Errorf("name %q, listener named %q", name, l.Name)
	}
	if err := l.ValidateAll(); err != nil {
		t.Fatalf("invalid listener: %v", err)
	}
	if deep {
		lrValidate(t, l)
	}
	return l
}

func outbound(t *testing.T, k *encode.OutboundListenerKey) *listener.Listener {
	t.Helper()
	return genListener(t, func(k *encode.OutboundListenerKey) (string, any) { return encode.OutboundListener(lrNames, k) }, k, true)
}

func tcpProxyOf(t *testing.T, fc *listener.FilterChain) *tcp.TcpProxy {
	t.Helper()
	f := fc.GetFilters()[len(fc.GetFilters())-1]
	p := &tcp.TcpProxy{}
	if err := f.GetTypedConfig().UnmarshalTo(p); err != nil {
		t.Fatalf("filter %s: %v", f.Name, err)
	}
	return p
}

func hcmOf(t *testing.T, fc *listener.FilterChain) *hcm.HttpConnectionManager {
	t.Helper()
	f := fc.GetFilters()[len(fc.GetFilters())-1]
	h := &hcm.HttpConnectionManager{}
	if err := f.GetTypedConfig().UnmarshalTo(h); err != nil {
		t.Fatalf("filter %s: %v", f.Name, err)
	}
	return h
}

func filterNames(l *listener.Listener) []string {
	var out []string
	for _, f := range l.ListenerFilters {
		out = append(out, f.Name)
	}
	return out
}

func TestOutboundListener(t *testing.T) {
	r := newLRRows()
	se := func(host string, addrs []string, p index.Port) *index.Service {
		return r.svc(host, "default", index.OriginServiceEntry, addrs, p)
	}
	ls := func(s *index.Service) encode.ListenerService { return encode.ListenerService{Service: s} }
	tests := []struct {
		name  string
		key   *encode.OutboundListenerKey
		check func(*testing.T, *listener.Listener)
	}{
		{"HTTP port: one wildcard listener, routes by RDS", outboundKey(r, "0.0.0.0", 80,
			ls(se("a.example", []string{"10.0.0.1"}, httpP(80))), ls(se("b.example", nil, httpP(80)))),
			func(t *testing.T, l *listener.Listener) {
				if l.Name != "0.0.0.0_80" || len(l.FilterChains) != 1 || l.GetBindToPort().GetValue() {
					t.Fatalf("listener = %v", l)
				}
				fc := l.FilterChains[0]
				if m := fc.GetFilterChainMatch(); m.GetTransportProtocol() != "raw_buffer" || !slices.Equal(m.GetApplicationProtocols(), []string{"http/1.1", "h2c"}) {
					t.Errorf("match = %v", m)
				}
				h := hcmOf(t, fc)
				if h.GetRds().GetRouteConfigName() != "80" || h.GetStatPrefix() != "outbound_0.0.0.0_80;" || h.GetRds().GetConfigSource().GetAds() == nil {
					t.Errorf("hcm = %v", h)
				}
				names := []string{}
				for _, f := range h.HttpFilters {
					names = append(names, f.Name)
				}
				want := []string{"istio.metadata_exchange", "envoy.filters.http.grpc_stats", "istio.alpn", "envoy.filters.http.fault", "envoy.filters.http.cors", "envoy.filters.http.router"}
				if !slices.Equal(names, want) {
					t.Errorf("http filters = %v", names)
				}
				if p := tcpProxyOf(t, l.DefaultFilterChain); p.GetCluster() != "PassthroughCluster" || l.DefaultFilterChain.Name != "PassthroughFilterChain" {
					t.Errorf("default chain = %v", l.DefaultFilterChain)
				}
				if !slices.Equal(filterNames(l), []string{"envoy.filters.listener.http_inspector"}) {
					t.Errorf("listener filters = %v", filterNames(l))
				}
			}},
		{"TCP with a VIP", outboundKey(r, "10.0.0.5", 3306, ls(se("db.example", []string{"10.0.0.5"}, tcpP(3306, index.ProtocolTCP)))),
			func(t *testing.T, l *listener.Listener) {
				if l.Name != "10.0.0.5_3306" || len(l.FilterChains) != 1 || l.DefaultFilterChain != nil || l.FilterChains[0].FilterChainMatch != nil {
					t.Fatalf("listener = %v", l)
				}
				if p := tcpProxyOf(t, l.FilterChains[0]); p.GetCluster() != "outbound|3306||db.example" || p.StatPrefix != "outbound|3306||db.example" {
					t.Errorf("tcp proxy = %v", p)
				}
				if len(l.ListenerFilters) != 0 || l.GetListenerFiltersTimeout().AsDuration() != 0 {
					t.Errorf("listener filters = %v", l.ListenerFilters)
				}
			}},
		{"HTTP over TCP on the wildcard address sniffs", outboundKey(r, "0.0.0.0", 9000,
			ls(se("tcp.example", nil, tcpP(9000, index.ProtocolTCP))), ls(se("http.example", nil, httpP(9000)))),
			func(t *testing.T, l *listener.Listener) {
				if len(l.FilterChains) != 1 || hcmOf(t, l.FilterChains[0]).GetRds().GetRouteConfigName() != "9000" {
					t.Fatalf("chains = %v", l.FilterChains)
				}
				if p := tcpProxyOf(t, l.DefaultFilterChain); p.GetCluster() != "outbound|9000||tcp.example" {
					t.Errorf("default chain = %v", p)
				}
			}},
		{"TCP over TCP: the first service keeps the port", outboundKey(r, "0.0.0.0", 9000,
			ls(se("first.example", nil, tcpP(9000, index.ProtocolTCP))), ls(se("second.example", nil, tcpP(9000, index.ProtocolTCP)))),
			func(t *testing.T, l *listener.Listener) {
				if len(l.FilterChains) != 1 || tcpProxyOf(t, l.FilterChains[0]).GetCluster() != "outbound|9000||first.example" {
					t.Errorf("chains = %v", l.FilterChains)
				}
			}},
		{"TLS without VIPs matches SNI", outboundKey(r, "0.0.0.0", 443,
			ls(se("a.example", nil, tcpP(443, index.ProtocolTLS))), ls(se("b.example", nil, tcpP(443, index.ProtocolHTTPS)))),
			func(t *testing.T, l *listener.Listener) {
				if len(l.FilterChains) != 2 || !slices.Equal(l.FilterChains[1].GetFilterChainMatch().GetServerNames(), []string{"b.example"}) {
					t.Fatalf("chains = %v", l.FilterChains)
				}
				if !slices.Equal(filterNames(l), []string{"envoy.filters.listener.tls_inspector"}) || l.DefaultFilterChain == nil {
					t.Errorf("listener = %v", l)
				}
			}},
		{"sniffed port with a VIP: TCP default, HTTP chain with its own route", outboundKey(r, "10.0.0.7", 8000,
			ls(se("auto.example", []string{"10.0.0.7"}, tcpP(8000, index.ProtocolUnknown)))),
			func(t *testing.T, l *listener.Listener) {
				if len(l.FilterChains) != 1 || hcmOf(t, l.FilterChains[0]).GetRds().GetRouteConfigName() != "auto.example:8000" {
					t.Fatalf("chains = %v", l.FilterChains)
				}
				if tcpProxyOf(t, l.DefaultFilterChain).GetCluster() != "outbound|8000||auto.example" {
					t.Errorf("default = %v", l.DefaultFilterChain)
				}
				if !slices.Equal(filterNames(l), []string{"envoy.filters.listener.http_inspector"}) {
					t.Errorf("listener filters = %v", filterNames(l))
				}
			}},
		{"CIDR addresses match by prefix", outboundKey(r, "0.0.0.0", 5432, ls(se("net.example", []string{"10.8.0.0/16"}, tcpP(5432, index.ProtocolTCP)))),
			func(t *testing.T, l *listener.Listener) {
				pr := l.FilterChains[0].GetFilterChainMatch().GetPrefixRanges()
				if len(pr) != 1 || pr[0].AddressPrefix != "10.8.0.0" || pr[0].GetPrefixLen().GetValue() != 16 || l.DefaultFilterChain == nil {
					t.Errorf("listener = %v", l)
				}
			}},
		{"REGISTRY_ONLY falls through to the blackhole", func() *encode.OutboundListenerKey {
			k := outboundKey(r, "0.0.0.0", 80, ls(se("a.example", nil, httpP(80))))
			k.OutboundAllowAny = false
			return k
		}(), func(t *testing.T, l *listener.Listener) {
			if tcpProxyOf(t, l.DefaultFilterChain).GetCluster() != "BlackHoleCluster" {
				t.Errorf("default = %v", l.DefaultFilterChain)
			}
		}},
		{"MySQL never shares a port", outboundKey(r, "0.0.0.0", 3306,
			ls(se("mysql.example", nil, tcpP(3306, index.ProtocolMySQL))), ls(se("http.example", nil, httpP(3306)))),
			func(t *testing.T, l *listener.Listener) {
				if len(l.FilterChains) != 1 || tcpProxyOf(t, l.FilterChains[0]).GetCluster() != "outbound|3306||mysql.example" {
					t.Errorf("chains = %v", l.FilterChains)
				}
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.check(t, outbound(t, tc.key)) })
	}
}

func TestOutboundListenerVirtualServiceRoutes(t *testing.T) {
	r := newLRRows()
	db := r.svc("db.default.svc.cluster.local", "default", index.OriginKubernetes, []string{"10.0.0.9"}, tcpP(5432, index.ProtocolTCP))
	replica := r.svc("replica.default.svc.cluster.local", "default", index.OriginKubernetes, []string{"10.0.0.10"}, tcpP(6432, index.ProtocolTCP))
	tests := []struct {
		name  string
		vs    *networking.VirtualService
		check func(*testing.T, *listener.Listener)
	}{
		{"weighted TCP routes", &networking.VirtualService{Hosts: []string{"db"}, Tcp: []*networking.TCPRoute{{Route: []*networking.RouteDestination{
			{Destination: &networking.Destination{Host: "db", Subset: "primary"}, Weight: 80},
			{Destination: &networking.Destination{Host: "replica"}, Weight: 20},
		}}}}, func(t *testing.T, l *listener.Listener) {
			p := tcpProxyOf(t, l.FilterChains[0])
			w := p.GetWeightedClusters().GetClusters()
			if p.StatPrefix != "db-routes.default" || len(w) != 2 || w[0].Name != "outbound|5432|primary|db.default.svc.cluster.local" || w[0].Weight != 80 ||
				w[1].Name != "outbound|6432||replica.default.svc.cluster.local" || w[1].Weight != 20 {
				t.Errorf("tcp proxy = %v", p)
			}
			if l.FilterChains[0].GetMetadata().GetFilterMetadata()["istio"] == nil {
				t.Errorf("chain metadata missing")
			}
		}},
		{"destination subnets", &networking.VirtualService{Hosts: []string{"db"}, Tcp: []*networking.TCPRoute{{
			Match: []*networking.L4MatchAttributes{{DestinationSubnets: []string{"10.1.0.0/24"}}},
			Route: []*networking.RouteDestination{{Destination: &networking.Destination{Host: "replica"}}},
		}}}, func(t *testing.T, l *listener.Listener) {
			if len(l.FilterChains) != 1 || l.DefaultFilterChain == nil {
				t.Fatalf("listener = %v", l)
			}
			if pr := l.FilterChains[0].GetFilterChainMatch().GetPrefixRanges(); len(pr) != 1 || pr[0].AddressPrefix != "10.1.0.0" {
				t.Errorf("match = %v", l.FilterChains[0].GetFilterChainMatch())
			}
			if tcpProxyOf(t, l.FilterChains[0]).GetCluster() != "outbound|6432||replica.default.svc.cluster.local" ||
				tcpProxyOf(t, l.DefaultFilterChain).GetCluster() != "outbound|5432||db.default.svc.cluster.local" {
				t.Errorf("chains = %v / %v", l.FilterChains, l.DefaultFilterChain)
			}
		}},
		{"match for another port is ignored", &networking.VirtualService{Hosts: []string{"db"}, Tcp: []*networking.TCPRoute{{
			Match: []*networking.L4MatchAttributes{{Port: 1}},
			Route: []*networking.RouteDestination{{Destination: &networking.Destination{Host: "replica"}}},
		}}}, func(t *testing.T, l *listener.Listener) {
			if tcpProxyOf(t, l.FilterChains[0]).GetCluster() != "outbound|5432||db.default.svc.cluster.local" {
				t.Errorf("chains = %v", l.FilterChains)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			vs := r.vs("db-routes", "default", tc.vs)
			k := outboundKey(r, "10.0.0.9", 5432, encode.ListenerService{Service: db, VirtualServices: []*index.Config{vs}, Destinations: []*index.Service{db, replica}})
			tc.check(t, outbound(t, k))
		})
	}

	t.Run("TLS SNI routes", func(t *testing.T) {
		ext := r.svc("*.example.com", "default", index.OriginServiceEntry, nil, tcpP(443, index.ProtocolTLS))
		vs := r.vs("egress", "default", &networking.VirtualService{Hosts: []string{"*.example.com"}, Tls: []*networking.TLSRoute{
			{Match: []*networking.TLSMatchAttributes{{SniHosts: []string{"a.example.com"}}, {SniHosts: []string{"a.example.com"}}},
				Route: []*networking.RouteDestination{{Destination: &networking.Destination{Host: "a.example.com", Port: &networking.PortSelector{Number: 443}}}}},
			{Match: []*networking.TLSMatchAttributes{{SniHosts: []string{"b.example.com", "c.example.com"}, Gateways: []string{"istio-system/egress"}}},
				Route: []*networking.RouteDestination{{Destination: &networking.Destination{Host: "b.example.com"}}}},
		}})
		l := outbound(t, outboundKey(r, "0.0.0.0", 443, encode.ListenerService{Service: ext, VirtualServices: []*index.Config{vs}}))
		if len(l.FilterChains) != 1 || !slices.Equal(l.FilterChains[0].GetFilterChainMatch().GetServerNames(), []string{"a.example.com"}) ||
			tcpProxyOf(t, l.FilterChains[0]).GetCluster() != "outbound|443||a.example.com" {
			t.Errorf("chains = %v", l.FilterChains)
		}
	})
}

func TestVirtualListeners(t *testing.T) {
	r := newLRRows()
	t.Run("virtualOutbound", func(t *testing.T) {
		l := genListener(t, func(k *encode.VirtualOutboundKey) (string, any) { return encode.VirtualOutboundListener(lrNames, k) },
			&encode.VirtualOutboundKey{OutboundAllowAny: false}, true)
		if l.Name != "virtualOutbound" || !l.GetUseOriginalDst().GetValue() || l.GetAddress().GetSocketAddress().GetPortValue() != 15001 {
			t.Fatalf("listener = %v", l)
		}
		if tcpProxyOf(t, l.FilterChains[0]).GetCluster() != "BlackHoleCluster" || l.FilterChains[0].GetFilterChainMatch().GetDestinationPort().GetValue() != 15001 ||
			tcpProxyOf(t, l.FilterChains[1]).GetCluster() != "BlackHoleCluster" {
			t.Errorf("chains = %v", l.FilterChains)
		}
	})
	t.Run("virtualInbound", func(t *testing.T) {
		web := r.svc("web.default.svc.cluster.local", "default", index.OriginKubernetes, []string{"10.0.0.3"})
		k := &encode.VirtualInboundKey{TrustDomain: "example.org", Instances: []encode.InboundInstance{
			{Service: web, Port: index.Port{Number: 80, Protocol: index.ProtocolHTTP2}, TargetPort: 8080},
			{Service: web, Port: index.Port{Number: 81, Protocol: index.ProtocolHTTP}, TargetPort: 8080}, // same target port: first wins
			{Service: web, Port: index.Port{Number: 9090, Protocol: index.ProtocolGRPC}, TargetPort: 9090},
			{Service: web, Port: index.Port{Number: 7000, Protocol: index.ProtocolUnknown}, TargetPort: 7000},
		}}
		l := genListener(t, func(k *encode.VirtualInboundKey) (string, any) { return encode.VirtualInboundListener(lrNames, k) }, k, true)
		byPort := map[uint32][]*listener.FilterChain{}
		for _, fc := range l.FilterChains {
			p := fc.GetFilterChainMatch().GetDestinationPort().GetValue()
			byPort[p] = append(byPort[p], fc)
		}
		if len(byPort[0]) != 5 || len(byPort[15006]) != 1 || len(byPort[8080]) != 2 || len(byPort[9090]) != 2 || len(byPort[7000]) != 5 {
			t.Fatalf("chains per port: 0:%d 15006:%d 8080:%d 9090:%d 7000:%d", len(byPort[0]), len(byPort[15006]), len(byPort[8080]), len(byPort[9090]), len(byPort[7000]))
		}
		h := hcmOf(t, byPort[8080][1])
		rc := h.GetRouteConfig()
		rt := rc.GetVirtualHosts()[0].GetRoutes()[0]
		if h.GetHttp2ProtocolOptions() == nil || rc.Name != "inbound|8080||" || rc.GetVirtualHosts()[0].Name != "inbound|http|80" ||
			rt.GetRoute().GetCluster() != "inbound|8080||" || rt.GetRoute().GetRetryPolicy().GetRetryOn() != "reset-before-request" ||
			rt.GetDecorator().GetOperation() != "web.default.svc.cluster.local:80/*" {
			t.Errorf("inbound HTTP/2 chain = %v", h)
		}
		if hcmOf(t, byPort[9090][1]).GetRouteConfig().GetVirtualHosts()[0].GetRoutes()[0].GetRoute().GetRetryPolicy() != nil {
			t.Error("gRPC inbound routes must not retry")
		}
		if byPort[8080][0].GetTransportSocket() == nil || byPort[8080][1].GetTransportSocket() != nil {
			t.Error("PERMISSIVE: the TLS chain terminates mTLS, the raw chain does not")
		}
		// The HTTP inspector runs on the sniffed port and for passthrough only.
		var hi *listener.ListenerFilter
		for _, f := range l.ListenerFilters {
			if f.Name == "envoy.filters.listener.http_inspector" {
				hi = f
			}
		}
		var off []int32
		for _, rule := range hi.GetFilterDisabled().GetOrMatch().GetRules() {
			off = append(off, rule.GetDestinationPortRange().GetStart())
		}
		if !slices.Equal(off, []int32{8080, 9090, 15006}) {
			t.Errorf("http inspector disabled on %v", off)
		}
	})
}

func TestGRPCListeners(t *testing.T) {
	r := newLRRows()
	svc := r.svc("echo.default.svc.cluster.local", "default", index.OriginKubernetes, []string{"10.0.0.4"}, index.Port{Number: 7070, Protocol: index.ProtocolGRPC})
	l := genListener(t, func(k *encode.GRPCListenerKey) (string, any) { return encode.GRPCListener(lrNames, k) },
		&encode.GRPCListenerKey{Name: "echo:7070", Service: svc, Port: 7070}, false)
	h := &hcm.HttpConnectionManager{}
	if err := l.GetApiListener().GetApiListener().UnmarshalTo(h); err != nil {
		t.Fatal(err)
	}
	if l.Name != "echo:7070" || l.GetAddress().GetSocketAddress().GetAddress() != "10.0.0.4" ||
		h.GetRds().GetRouteConfigName() != "outbound|7070||echo.default.svc.cluster.local" || h.GetRds().GetConfigSource().GetAds() == nil ||
		len(h.HttpFilters) != 2 || h.HttpFilters[1].Name != "envoy.filters.http.router" {
		t.Errorf("listener = %v\nhcm = %v", l, h)
	}

	s := genListener(t, func(k *encode.GRPCServerListenerKey) (string, any) { return encode.GRPCServerListener(lrNames, k) },
		&encode.GRPCServerListenerKey{Name: encode.GRPCServerListenerPrefix + "10.0.0.4:7070", Host: "10.0.0.4", Port: 7070}, false)
	sh := hcmOf(t, s.FilterChains[0])
	rt := sh.GetRouteConfig().GetVirtualHosts()[0].GetRoutes()[0]
	if _, ok := rt.Action.(*route.Route_NonForwardingAction); !ok || s.FilterChains[0].TransportSocket != nil {
		t.Errorf("server listener = %v", s)
	}
}

func TestOutboundListenerDestinationRule(t *testing.T) {
	r := newLRRows()
	db := r.svc("db.example", "default", index.OriginServiceEntry, []string{"10.0.0.9"}, tcpP(5432, index.ProtocolTCP))
	dr := &index.Config{Kind: index.ConfigDestinationRule, Key: index.ConfigKey{Namespace: r.sym("default"), Name: r.sym("db")}, Hash: 3,
		Spec: &networking.DestinationRule{Host: "db.example", TrafficPolicy: &networking.TrafficPolicy{
			ConnectionPool: &networking.ConnectionPoolSettings{Tcp: &networking.ConnectionPoolSettings_TCPSettings{
				IdleTimeout: durationpb.New(time.Hour), MaxConnectionDuration: durationpb.New(10 * time.Minute),
			}},
			LoadBalancer: &networking.LoadBalancerSettings{LbPolicy: &networking.LoadBalancerSettings_ConsistentHash{
				ConsistentHash: &networking.LoadBalancerSettings_ConsistentHashLB{HashKey: &networking.LoadBalancerSettings_ConsistentHashLB_UseSourceIp{UseSourceIp: true}},
			}},
		}}}
	l := outbound(t, outboundKey(r, "10.0.0.9", 5432, encode.ListenerService{Service: db,
		DestinationRules: []encode.HostDestinationRule{{Host: "db.example", Rule: dr}}}))
	p := tcpProxyOf(t, l.FilterChains[0])
	if p.GetIdleTimeout().AsDuration() != time.Hour || p.GetMaxDownstreamConnectionDuration().AsDuration() != 10*time.Minute ||
		len(p.HashPolicy) != 1 || p.HashPolicy[0].GetSourceIp() == nil {
		t.Errorf("tcp proxy = %v", p)
	}
}

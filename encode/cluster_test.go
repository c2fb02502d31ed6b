package encode_test

import (
	"math"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	httpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/index"
)

const (
	typeCluster  = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
	typeEndpoint = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"
)

// genCluster generates k's cluster through a verifying cache (twice: a miss
// and a verified hit; a directly encoded cluster is checked against its
// reference generator both times), decodes the cached bytes and validates them.
func genCluster(t *testing.T, n index.Names, k *encode.ClusterKey) *clusterv3.Cluster {
	t.Helper()
	cache := encode.NewCache()
	cache.SetVerify(true)
	e, err := encode.ClusterResource(cache, n, k)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := encode.ClusterResource(cache, n, k); err != nil {
		t.Fatal(err)
	}
	var a anypb.Any
	if err := proto.Unmarshal(e.Bytes, &a); err != nil {
		t.Fatal(err)
	}
	c := &clusterv3.Cluster{}
	if err := a.UnmarshalTo(c); err != nil {
		t.Fatal(err)
	}
	mustValidate(t, c)
	if c.Name != e.Name {
		t.Fatalf("entry name %q, cluster %q", e.Name, c.Name)
	}
	return c
}

func unpack[M proto.Message](t *testing.T, a *anypb.Any, m M) M {
	t.Helper()
	if a == nil {
		t.Fatalf("no %T", m)
	}
	if err := a.UnmarshalTo(m); err != nil {
		t.Fatal(err)
	}
	return m
}

func httpOptions(t *testing.T, c *clusterv3.Cluster) *httpv3.HttpProtocolOptions {
	t.Helper()
	a := c.TypedExtensionProtocolOptions["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"]
	if a == nil {
		return nil
	}
	return unpack(t, a, &httpv3.HttpProtocolOptions{})
}

func upstreamTLS(t *testing.T, ts *corev3.TransportSocket) *tlsv3.UpstreamTlsContext {
	t.Helper()
	if ts == nil {
		t.Fatal("no transport socket")
	}
	if ts.Name != "envoy.transport_sockets.tls" {
		t.Fatalf("transport socket %q", ts.Name)
	}
	return unpack(t, ts.GetTypedConfig(), &tlsv3.UpstreamTlsContext{})
}

func eq[T comparable](t *testing.T, what string, got, want T) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

func meshSvc(f *fixture) index.ServiceKey {
	k := f.serviceEntry("random-0.host.example", "default", "service-0", f.port("http", 80, index.ProtocolHTTP))
	f.endpoints(k, "service-0", nil, index.Endpoint{Addr: mustAddr("240.241.0.0"), TLSMode: index.TLSModeIstio})
	return k
}

func TestClusterOutboundDefaults(t *testing.T) {
	f := newFixture(t)
	svc := meshSvc(f)
	f.apply()
	c := genCluster(t, f.names(), f.clusterKey(svc))

	name := "outbound|80||random-0.host.example"
	eq(t, "name", c.Name, name)
	eq(t, "alt_stat_name", c.AltStatName, name+";")
	eq(t, "type", c.GetType(), clusterv3.Cluster_EDS)
	eq(t, "eds service_name", c.EdsClusterConfig.GetServiceName(), name)
	eq(t, "eds ads", c.EdsClusterConfig.GetEdsConfig().GetAds() != nil, true)
	eq(t, "eds initial_fetch_timeout", c.EdsClusterConfig.GetEdsConfig().GetInitialFetchTimeout().AsDuration(), time.Duration(0))
	eq(t, "eds api version", c.EdsClusterConfig.GetEdsConfig().GetResourceApiVersion(), corev3.ApiVersion_V3)
	eq(t, "connect_timeout", c.ConnectTimeout.AsDuration(), 10*time.Second)
	eq(t, "lb_policy", c.LbPolicy, clusterv3.Cluster_LEAST_REQUEST)
	th := c.CircuitBreakers.GetThresholds()[0]
	for what, v := range map[string]*wrapperspb.UInt32Value{"max_connections": th.MaxConnections, "max_pending_requests": th.MaxPendingRequests, "max_requests": th.MaxRequests, "max_retries": th.MaxRetries} {
		eq(t, what, v.GetValue(), uint32(math.MaxUint32))
	}
	eq(t, "healthy_panic_threshold", c.CommonLbConfig.GetHealthyPanicThreshold() != nil && c.CommonLbConfig.GetHealthyPanicThreshold().Value == 0, true)
	svcMeta := c.Metadata.FilterMetadata["istio"].Fields["services"].GetListValue().GetValues()[0].GetStructValue().Fields
	eq(t, "services.host", svcMeta["host"].GetStringValue(), "random-0.host.example")
	eq(t, "services.name", svcMeta["name"].GetStringValue(), "random-0.host.example")
	eq(t, "services.namespace", svcMeta["namespace"].GetStringValue(), "default")
	eq(t, "external", c.Metadata.FilterMetadata["istio"].Fields["external"] == nil, true)
	eq(t, "filters", len(c.Filters), 1)
	eq(t, "filter name", c.Filters[0].Name, "istio.metadata_exchange")

	// Auto mTLS: a transport socket match on tlsMode=istio, plaintext otherwise.
	eq(t, "transport_socket", c.TransportSocket == nil, true)
	eq(t, "transport_socket_matches", len(c.TransportSocketMatches), 2)
	m := c.TransportSocketMatches[0]
	eq(t, "match name", m.Name, "tlsMode-istio")
	eq(t, "match tlsMode", m.Match.Fields["tlsMode"].GetStringValue(), "istio")
	tc := upstreamTLS(t, m.TransportSocket)
	eq(t, "sni", tc.Sni, "outbound_.80_._.random-0.host.example")
	cc := tc.CommonTlsContext
	eq(t, "alpn", len(cc.AlpnProtocols) == 2 && cc.AlpnProtocols[0] == "istio-peer-exchange" && cc.AlpnProtocols[1] == "istio", true)
	eq(t, "min tls", cc.TlsParams.TlsMinimumProtocolVersion, tlsv3.TlsParameters_TLSv1_2)
	eq(t, "max tls", cc.TlsParams.TlsMaximumProtocolVersion, tlsv3.TlsParameters_TLSv1_3)
	eq(t, "cert sds", cc.TlsCertificateSdsSecretConfigs[0].Name, "default")
	eq(t, "cert sds cluster", cc.TlsCertificateSdsSecretConfigs[0].SdsConfig.GetApiConfigSource().GetGrpcServices()[0].GetEnvoyGrpc().GetClusterName(), "sds-grpc")
	eq(t, "root sds", cc.GetCombinedValidationContext().GetValidationContextSdsSecretConfig().GetName(), "ROOTCA")
	eq(t, "no SANs without service accounts", len(cc.GetCombinedValidationContext().GetDefaultValidationContext().GetMatchSubjectAltNames()), 0)
	d := c.TransportSocketMatches[1]
	eq(t, "default match name", d.Name, "tlsMode-disabled")
	eq(t, "default match empty", len(d.Match.GetFields()), 0)
	eq(t, "default socket", d.TransportSocket.Name, "envoy.transport_sockets.raw_buffer")
	eq(t, "no protocol options on an HTTP/1 port", c.TypedExtensionProtocolOptions == nil, true)
}

func TestClusterServiceKinds(t *testing.T) {
	f := newFixture(t)
	ext := f.service(index.Service{
		Key: index.ServiceKey{Host: f.sym("api.example.com"), Namespace: f.sym("default")}, Name: f.sym("ext"),
		Origin: index.OriginServiceEntry, MeshExternal: true,
		Ports: []index.Port{f.port("https", 443, index.ProtocolTLS)},
	})
	kube := f.kubeService("reviews", "bookinfo", f.port("http", 9080, index.ProtocolHTTP))
	grpcSvc := f.kubeService("ratings", "bookinfo", f.port("grpc", 50051, index.ProtocolGRPC))
	auto := f.kubeService("details", "bookinfo", f.port("", 9080, index.ProtocolUnknown))
	headless := f.service(index.Service{
		Key: index.ServiceKey{Host: f.sym("db.bookinfo.svc.cluster.local"), Namespace: f.sym("bookinfo")}, Name: f.sym("db"),
		Origin: index.OriginKubernetes, Resolution: index.ResolutionPassthrough,
		Ports: []index.Port{{Name: f.sym("tcp"), Number: 5432, TargetPort: 15432, Protocol: index.ProtocolTCP}},
	})
	f.apply()

	t.Run("mesh external", func(t *testing.T) {
		c := genCluster(t, f.names(), f.clusterKey(ext))
		eq(t, "external", c.Metadata.FilterMetadata["istio"].Fields["external"].GetBoolValue(), true)
		eq(t, "no auto mTLS", len(c.TransportSocketMatches)+boolInt(c.TransportSocket != nil), 0)
	})
	t.Run("kubernetes service name", func(t *testing.T) {
		c := genCluster(t, f.names(), f.clusterKey(kube))
		svcMeta := c.Metadata.FilterMetadata["istio"].Fields["services"].GetListValue().GetValues()[0].GetStructValue().Fields
		eq(t, "name", svcMeta["name"].GetStringValue(), "reviews")
		eq(t, "host", svcMeta["host"].GetStringValue(), "reviews.bookinfo.svc.cluster.local")
	})
	t.Run("grpc port is HTTP/2", func(t *testing.T) {
		c := genCluster(t, f.names(), f.clusterKey(grpcSvc))
		o := httpOptions(t, c)
		eq(t, "explicit http2", o.GetExplicitHttpConfig().GetHttp2ProtocolOptions() != nil, true)
		alpn := upstreamTLS(t, c.TransportSocketMatches[0].TransportSocket).CommonTlsContext.AlpnProtocols
		eq(t, "alpn h2", len(alpn) == 3 && alpn[2] == "h2", true)
	})
	t.Run("auto-detected port uses the downstream protocol on sidecars", func(t *testing.T) {
		c := genCluster(t, f.names(), f.clusterKey(auto))
		o := httpOptions(t, c)
		eq(t, "use_downstream_protocol", o.GetUseDownstreamProtocolConfig().GetHttp2ProtocolOptions() != nil, true)
		k := f.clusterKey(auto)
		k.ProxyType = encode.ProxyRouter
		eq(t, "router: none", genCluster(t, f.names(), k).TypedExtensionProtocolOptions == nil, true)
	})
	t.Run("passthrough is ORIGINAL_DST on sidecars, EDS on routers", func(t *testing.T) {
		k := f.clusterKey(headless)
		k.MTLS = encode.ServiceMTLSDisable
		c := genCluster(t, f.names(), k)
		eq(t, "type", c.GetType(), clusterv3.Cluster_ORIGINAL_DST)
		eq(t, "lb", c.LbPolicy, clusterv3.Cluster_CLUSTER_PROVIDED)
		eq(t, "no eds", c.EdsClusterConfig == nil, true)
		eq(t, "port override", c.GetOriginalDstLbConfig().GetUpstreamPortOverride().GetValue(), uint32(15432))
		k.ProxyType = encode.ProxyRouter
		eq(t, "router type", genCluster(t, f.names(), k).GetType(), clusterv3.Cluster_EDS)
	})
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestClusterDNS(t *testing.T) {
	f := newFixture(t)
	strict := f.service(index.Service{
		Key: index.ServiceKey{Host: f.sym("db.example.com"), Namespace: f.sym("default")}, Name: f.sym("db"),
		Origin: index.OriginServiceEntry, Resolution: index.ResolutionDNS, MeshExternal: true,
		Ports: []index.Port{f.port("tcp", 5432, index.ProtocolTCP)},
	})
	f.endpoints(strict, "db", nil,
		index.Endpoint{Hostname: f.sym("db-2.example.com"), Locality: f.sym("us/b")},
		index.Endpoint{Hostname: f.sym("db-1.example.com"), Locality: f.sym("us/a"), Weight: 3},
	)
	hostOnly := f.service(index.Service{
		Key: index.ServiceKey{Host: f.sym("api.example.com"), Namespace: f.sym("default")}, Name: f.sym("api"),
		Origin: index.OriginServiceEntry, Resolution: index.ResolutionDNSRoundRobin, MeshExternal: true,
		Ports: []index.Port{{Name: f.sym("https"), Number: 443, TargetPort: 8443, Protocol: index.ProtocolTLS}},
	})
	selector := f.service(index.Service{
		Key: index.ServiceKey{Host: f.sym("vm.example.com"), Namespace: f.sym("default")}, Name: f.sym("vm"),
		Origin: index.OriginServiceEntry, Resolution: index.ResolutionDNS, HasSelector: true, Selector: f.labels("app", "vm"),
		Ports: []index.Port{f.port("http", 80, index.ProtocolHTTP)},
	})
	f.apply()

	t.Run("STRICT_DNS with endpoints", func(t *testing.T) {
		k := f.clusterKey(strict)
		k.Endpoints = f.snap.Endpoints(strict)
		c := genCluster(t, f.names(), k)
		eq(t, "type", c.GetType(), clusterv3.Cluster_STRICT_DNS)
		eq(t, "family", c.DnsLookupFamily, clusterv3.Cluster_V4_ONLY)
		eq(t, "respect ttl", c.RespectDnsTtl, true)                     //nolint:staticcheck
		eq(t, "refresh", c.DnsRefreshRate.AsDuration(), 60*time.Second) //nolint:staticcheck
		eq(t, "resolver", c.TypedDnsResolverConfig.GetName(), "envoy.network.dns_resolver.cares")
		eq(t, "no eds", c.EdsClusterConfig == nil, true)
		la := c.LoadAssignment
		eq(t, "cla name", la.ClusterName, c.Name)
		eq(t, "localities", len(la.Endpoints), 2)
		eq(t, "first locality", la.Endpoints[0].Locality.GetZone(), "a")
		eq(t, "hostname", la.Endpoints[0].LbEndpoints[0].GetEndpoint().GetAddress().GetSocketAddress().GetAddress(), "db-1.example.com")
		eq(t, "port", la.Endpoints[0].LbEndpoints[0].GetEndpoint().GetAddress().GetSocketAddress().GetPortValue(), uint32(5432))
		eq(t, "locality weight", la.Endpoints[0].LoadBalancingWeight.GetValue(), uint32(3))
		eq(t, "skipped", encode.ClusterSkipped(f.names(), k), false)
		k.IPv6 = true
		eq(t, "ipv6 family", genCluster(t, f.names(), k).DnsLookupFamily, clusterv3.Cluster_V6_ONLY)
	})
	t.Run("LOGICAL_DNS without endpoints resolves the host", func(t *testing.T) {
		k := f.clusterKey(hostOnly)
		c := genCluster(t, f.names(), k)
		eq(t, "type", c.GetType(), clusterv3.Cluster_LOGICAL_DNS)
		lbe := c.LoadAssignment.Endpoints[0].LbEndpoints[0]
		eq(t, "host", lbe.GetEndpoint().GetAddress().GetSocketAddress().GetAddress(), "api.example.com")
		eq(t, "target port", lbe.GetEndpoint().GetAddress().GetSocketAddress().GetPortValue(), uint32(8443))
		eq(t, "workload", lbe.Metadata.FilterMetadata["istio"].Fields["workload"].GetStringValue(), "api;default;api;;Kubernetes")
		eq(t, "skipped", encode.ClusterSkipped(f.names(), k), false)
	})
	t.Run("DNS with a selector and no workloads is left out", func(t *testing.T) {
		eq(t, "skipped", encode.ClusterSkipped(f.names(), f.clusterKey(selector)), true)
	})
}

func drConfig(f *fixture, ns, name, host string, dr *networking.DestinationRule) *index.Config {
	dr.Host = host
	k := f.config(index.ConfigDestinationRule, ns, name, dr, host)
	f.apply()
	return f.cfg(index.ConfigDestinationRule, k)
}

func dur(d time.Duration) *durationpb.Duration { return durationpb.New(d) }

func TestClusterDestinationRule(t *testing.T) {
	host := "reviews.bookinfo.svc.cluster.local"
	cases := []struct {
		name   string
		dr     *networking.DestinationRule
		subset string
		check  func(t *testing.T, c *clusterv3.Cluster)
	}{
		{
			name: "lb simple ROUND_ROBIN",
			dr:   &networking.DestinationRule{TrafficPolicy: &networking.TrafficPolicy{LoadBalancer: simpleLB(networking.LoadBalancerSettings_ROUND_ROBIN)}},
			check: func(t *testing.T, c *clusterv3.Cluster) {
				eq(t, "lb", c.LbPolicy, clusterv3.Cluster_ROUND_ROBIN)
				eq(t, "config metadata", c.Metadata.FilterMetadata["istio"].Fields["config"].GetStringValue(),
					"/apis/networking.istio.io/v1/namespaces/bookinfo/destination-rule/reviews")
			},
		},
		{
			name:  "lb simple RANDOM",
			dr:    &networking.DestinationRule{TrafficPolicy: &networking.TrafficPolicy{LoadBalancer: simpleLB(networking.LoadBalancerSettings_RANDOM)}},
			check: func(t *testing.T, c *clusterv3.Cluster) { eq(t, "lb", c.LbPolicy, clusterv3.Cluster_RANDOM) },
		},
		{
			name: "lb simple PASSTHROUGH",
			dr:   &networking.DestinationRule{TrafficPolicy: &networking.TrafficPolicy{LoadBalancer: simpleLB(networking.LoadBalancerSettings_PASSTHROUGH)}},
			check: func(t *testing.T, c *clusterv3.Cluster) {
				eq(t, "type", c.GetType(), clusterv3.Cluster_ORIGINAL_DST)
				eq(t, "lb", c.LbPolicy, clusterv3.Cluster_CLUSTER_PROVIDED)
				eq(t, "no eds", c.EdsClusterConfig == nil, true)
			},
		},
		{
			name: "least request with warmup",
			dr: &networking.DestinationRule{TrafficPolicy: &networking.TrafficPolicy{LoadBalancer: &networking.LoadBalancerSettings{
				LbPolicy: &networking.LoadBalancerSettings_Simple{Simple: networking.LoadBalancerSettings_LEAST_REQUEST},
				Warmup:   &networking.WarmupConfiguration{Duration: dur(30 * time.Second)},
			}}},
			check: func(t *testing.T, c *clusterv3.Cluster) {
				eq(t, "lb", c.LbPolicy, clusterv3.Cluster_LEAST_REQUEST)
				ss := c.GetLeastRequestLbConfig().GetSlowStartConfig()
				eq(t, "window", ss.GetSlowStartWindow().AsDuration(), 30*time.Second)
				eq(t, "aggression", ss.GetAggression().GetDefaultValue(), 1.0)
				eq(t, "min weight", ss.GetMinWeightPercent().GetValue(), 10.0)
			},
		},
		{
			name: "consistent hash ring",
			dr: &networking.DestinationRule{TrafficPolicy: &networking.TrafficPolicy{LoadBalancer: &networking.LoadBalancerSettings{
				LbPolicy: &networking.LoadBalancerSettings_ConsistentHash{ConsistentHash: &networking.LoadBalancerSettings_ConsistentHashLB{
					HashKey:       &networking.LoadBalancerSettings_ConsistentHashLB_HttpHeaderName{HttpHeaderName: "x-user"},
					HashAlgorithm: &networking.LoadBalancerSettings_ConsistentHashLB_RingHash_{RingHash: &networking.LoadBalancerSettings_ConsistentHashLB_RingHash{MinimumRingSize: 2048}},
				}},
			}}},
			check: func(t *testing.T, c *clusterv3.Cluster) {
				eq(t, "lb", c.LbPolicy, clusterv3.Cluster_RING_HASH)
				eq(t, "ring", c.GetRingHashLbConfig().GetMinimumRingSize().GetValue(), uint64(2048))
			},
		},
		{
			name: "consistent hash default ring size",
			dr: &networking.DestinationRule{TrafficPolicy: &networking.TrafficPolicy{LoadBalancer: &networking.LoadBalancerSettings{
				LbPolicy: &networking.LoadBalancerSettings_ConsistentHash{ConsistentHash: &networking.LoadBalancerSettings_ConsistentHashLB{
					HashKey: &networking.LoadBalancerSettings_ConsistentHashLB_UseSourceIp{UseSourceIp: true},
				}},
			}}},
			check: func(t *testing.T, c *clusterv3.Cluster) {
				eq(t, "lb", c.LbPolicy, clusterv3.Cluster_RING_HASH)
				eq(t, "ring", c.GetRingHashLbConfig().GetMinimumRingSize().GetValue(), uint64(1024))
			},
		},
		{
			name: "maglev",
			dr: &networking.DestinationRule{TrafficPolicy: &networking.TrafficPolicy{LoadBalancer: &networking.LoadBalancerSettings{
				LbPolicy: &networking.LoadBalancerSettings_ConsistentHash{ConsistentHash: &networking.LoadBalancerSettings_ConsistentHashLB{
					HashKey:       &networking.LoadBalancerSettings_ConsistentHashLB_UseSourceIp{UseSourceIp: true},
					HashAlgorithm: &networking.LoadBalancerSettings_ConsistentHashLB_Maglev{Maglev: &networking.LoadBalancerSettings_ConsistentHashLB_MagLev{TableSize: 65537}},
				}},
			}}},
			check: func(t *testing.T, c *clusterv3.Cluster) {
				eq(t, "lb", c.LbPolicy, clusterv3.Cluster_MAGLEV)
				eq(t, "table", c.GetMaglevLbConfig().GetTableSize().GetValue(), uint64(65537))
			},
		},
		{
			name: "connection pool",
			dr: &networking.DestinationRule{TrafficPolicy: &networking.TrafficPolicy{ConnectionPool: &networking.ConnectionPoolSettings{
				Tcp: &networking.ConnectionPoolSettings_TCPSettings{
					MaxConnections: 100, ConnectTimeout: dur(3 * time.Second),
					TcpKeepalive:          &networking.ConnectionPoolSettings_TCPSettings_TcpKeepalive{Probes: 3, Time: dur(2 * time.Hour), Interval: dur(75 * time.Second)},
					MaxConnectionDuration: dur(time.Hour),
				},
				Http: &networking.ConnectionPoolSettings_HTTPSettings{
					Http1MaxPendingRequests: 10, Http2MaxRequests: 1000, MaxRequestsPerConnection: 5, MaxRetries: 7,
					IdleTimeout: dur(30 * time.Second),
				},
			}}},
			check: func(t *testing.T, c *clusterv3.Cluster) {
				th := c.CircuitBreakers.Thresholds[0]
				eq(t, "max_connections", th.MaxConnections.GetValue(), uint32(100))
				eq(t, "max_pending", th.MaxPendingRequests.GetValue(), uint32(10))
				eq(t, "max_requests", th.MaxRequests.GetValue(), uint32(1000))
				eq(t, "max_retries", th.MaxRetries.GetValue(), uint32(7))
				eq(t, "connect_timeout", c.ConnectTimeout.AsDuration(), 3*time.Second)
				ka := c.UpstreamConnectionOptions.GetTcpKeepalive()
				eq(t, "keepalive probes", ka.GetKeepaliveProbes().GetValue(), uint32(3))
				eq(t, "keepalive time", ka.GetKeepaliveTime().GetValue(), uint32(7200))
				eq(t, "keepalive interval", ka.GetKeepaliveInterval().GetValue(), uint32(75))
				o := httpOptions(t, c).CommonHttpProtocolOptions
				eq(t, "idle_timeout", o.GetIdleTimeout().AsDuration(), 30*time.Second)
				eq(t, "max_requests_per_connection", o.GetMaxRequestsPerConnection().GetValue(), uint32(5))
				eq(t, "max_connection_duration", o.GetMaxConnectionDuration().AsDuration(), time.Hour)
				eq(t, "explicit http1 default", httpOptions(t, c).GetExplicitHttpConfig().GetHttpProtocolOptions() != nil, true)
			},
		},
		{
			name: "h2 upgrade and streams",
			dr: &networking.DestinationRule{TrafficPolicy: &networking.TrafficPolicy{ConnectionPool: &networking.ConnectionPoolSettings{
				Http: &networking.ConnectionPoolSettings_HTTPSettings{H2UpgradePolicy: networking.ConnectionPoolSettings_HTTPSettings_UPGRADE, MaxConcurrentStreams: 50},
			}}},
			check: func(t *testing.T, c *clusterv3.Cluster) {
				h2 := httpOptions(t, c).GetExplicitHttpConfig().GetHttp2ProtocolOptions()
				eq(t, "upgraded", h2 != nil, true)
				eq(t, "streams", h2.GetMaxConcurrentStreams().GetValue(), uint32(50))
			},
		},
		{
			name: "outlier detection",
			dr: &networking.DestinationRule{TrafficPolicy: &networking.TrafficPolicy{OutlierDetection: &networking.OutlierDetection{
				Consecutive_5XxErrors: wrapperspb.UInt32(5), ConsecutiveGatewayErrors: wrapperspb.UInt32(0),
				Interval: dur(10 * time.Second), BaseEjectionTime: dur(30 * time.Second), MaxEjectionPercent: 50, MinHealthPercent: 20,
			}}},
			check: func(t *testing.T, c *clusterv3.Cluster) {
				od := c.OutlierDetection
				eq(t, "5xx", od.GetConsecutive_5Xx().GetValue(), uint32(5))
				eq(t, "enforce 5xx", od.GetEnforcingConsecutive_5Xx().GetValue(), uint32(100))
				eq(t, "gateway", od.GetConsecutiveGatewayFailure().GetValue(), uint32(0))
				eq(t, "enforce gateway", od.GetEnforcingConsecutiveGatewayFailure().GetValue(), uint32(0))
				eq(t, "success rate off", od.GetEnforcingSuccessRate().GetValue(), uint32(0))
				eq(t, "interval", od.GetInterval().AsDuration(), 10*time.Second)
				eq(t, "ejection", od.GetBaseEjectionTime().AsDuration(), 30*time.Second)
				eq(t, "max ejection", od.GetMaxEjectionPercent().GetValue(), uint32(50))
				eq(t, "panic", c.CommonLbConfig.GetHealthyPanicThreshold().GetValue(), 20.0)
			},
		},
		{
			name: "TLS DISABLE turns auto mTLS off",
			dr:   &networking.DestinationRule{TrafficPolicy: &networking.TrafficPolicy{Tls: &networking.ClientTLSSettings{Mode: networking.ClientTLSSettings_DISABLE}}},
			check: func(t *testing.T, c *clusterv3.Cluster) {
				eq(t, "no socket", c.TransportSocket == nil && len(c.TransportSocketMatches) == 0, true)
			},
		},
		{
			name: "TLS ISTIO_MUTUAL is explicit",
			dr: &networking.DestinationRule{TrafficPolicy: &networking.TrafficPolicy{Tls: &networking.ClientTLSSettings{
				Mode: networking.ClientTLSSettings_ISTIO_MUTUAL,
			}}},
			check: func(t *testing.T, c *clusterv3.Cluster) {
				eq(t, "no matches", len(c.TransportSocketMatches), 0)
				tc := upstreamTLS(t, c.TransportSocket)
				eq(t, "sni", tc.Sni, "outbound_.9080_._.reviews.bookinfo.svc.cluster.local")
				sans := tc.CommonTlsContext.GetCombinedValidationContext().GetDefaultValidationContext().GetMatchSubjectAltNames()
				eq(t, "sans", len(sans), 2)
				eq(t, "san 0", sans[0].GetExact(), "spiffe://cluster.local/ns/bookinfo/sa/bookinfo-reviews")
				eq(t, "san 1", sans[1].GetExact(), "spiffe://cluster.local/ns/bookinfo/sa/reviews-v2")
			},
		},
		{
			name: "TLS SIMPLE with system roots",
			dr:   &networking.DestinationRule{TrafficPolicy: &networking.TrafficPolicy{Tls: &networking.ClientTLSSettings{Mode: networking.ClientTLSSettings_SIMPLE}}},
			check: func(t *testing.T, c *clusterv3.Cluster) {
				tc := upstreamTLS(t, c.TransportSocket)
				eq(t, "root", tc.CommonTlsContext.GetCombinedValidationContext().GetValidationContextSdsSecretConfig().GetName(), "file-root:system")
				eq(t, "no cert", len(tc.CommonTlsContext.TlsCertificateSdsSecretConfigs), 0)
				u := httpOptions(t, c).GetUpstreamHttpProtocolOptions()
				eq(t, "auto_sni", u.GetAutoSni(), true)
				eq(t, "auto_san_validation", u.GetAutoSanValidation(), true)
				eq(t, "alpn_override", c.Metadata.FilterMetadata["istio"].Fields["alpn_override"].GetStringValue(), "false")
			},
		},
		{
			name: "TLS MUTUAL with files",
			dr: &networking.DestinationRule{TrafficPolicy: &networking.TrafficPolicy{Tls: &networking.ClientTLSSettings{
				Mode: networking.ClientTLSSettings_MUTUAL, ClientCertificate: "/certs/cert.pem", PrivateKey: "/certs/key.pem",
				CaCertificates: "/certs/ca.pem", Sni: "reviews.example.com", SubjectAltNames: []string{"reviews.example.com"},
			}}},
			check: func(t *testing.T, c *clusterv3.Cluster) {
				tc := upstreamTLS(t, c.TransportSocket)
				eq(t, "sni", tc.Sni, "reviews.example.com")
				eq(t, "cert", tc.CommonTlsContext.TlsCertificateSdsSecretConfigs[0].Name, "file-cert:/certs/cert.pem~/certs/key.pem")
				eq(t, "root", tc.CommonTlsContext.GetCombinedValidationContext().GetValidationContextSdsSecretConfig().GetName(), "file-root:/certs/ca.pem")
				eq(t, "san", tc.CommonTlsContext.GetCombinedValidationContext().GetDefaultValidationContext().GetMatchSubjectAltNames()[0].GetExact(), "reviews.example.com")
			},
		},
		{
			name: "TLS SIMPLE with credentialName is ignored on sidecars",
			dr: &networking.DestinationRule{TrafficPolicy: &networking.TrafficPolicy{Tls: &networking.ClientTLSSettings{
				Mode: networking.ClientTLSSettings_SIMPLE, CredentialName: "reviews-ca",
			}}},
			check: func(t *testing.T, c *clusterv3.Cluster) {
				eq(t, "no socket", c.TransportSocket == nil && len(c.TransportSocketMatches) == 0, true)
			},
		},
		{
			name: "portLevelSettings replace the top level for the port",
			dr: &networking.DestinationRule{TrafficPolicy: &networking.TrafficPolicy{
				LoadBalancer:     simpleLB(networking.LoadBalancerSettings_RANDOM),
				OutlierDetection: &networking.OutlierDetection{Consecutive_5XxErrors: wrapperspb.UInt32(3)},
				PortLevelSettings: []*networking.TrafficPolicy_PortTrafficPolicy{{
					Port:         &networking.PortSelector{Number: 9080},
					LoadBalancer: simpleLB(networking.LoadBalancerSettings_ROUND_ROBIN),
				}},
			}},
			check: func(t *testing.T, c *clusterv3.Cluster) {
				eq(t, "lb", c.LbPolicy, clusterv3.Cluster_ROUND_ROBIN)
				eq(t, "outlier not inherited", c.OutlierDetection == nil, true)
			},
		},
		{
			name: "retry budget, tcp idle timeout, client protocol",
			dr: &networking.DestinationRule{TrafficPolicy: &networking.TrafficPolicy{
				RetryBudget: &networking.TrafficPolicy_RetryBudget{MinRetryConcurrency: 5},
				ConnectionPool: &networking.ConnectionPoolSettings{
					Tcp:  &networking.ConnectionPoolSettings_TCPSettings{IdleTimeout: dur(time.Minute)},
					Http: &networking.ConnectionPoolSettings_HTTPSettings{UseClientProtocol: true},
				},
			}},
			check: func(t *testing.T, c *clusterv3.Cluster) {
				rb := c.CircuitBreakers.Thresholds[0].RetryBudget
				eq(t, "budget percent", rb.GetBudgetPercent().GetValue(), 20.0)
				eq(t, "min concurrency", rb.GetMinRetryConcurrency().GetValue(), uint32(5))
				o := httpOptions(t, c)
				eq(t, "tcp idle timeout", o.GetCommonHttpProtocolOptions().GetIdleTimeout().AsDuration(), time.Minute)
				eq(t, "use client protocol", o.GetUseDownstreamProtocolConfig() != nil, true)
			},
		},
		{
			name: "outlier error codes and local origin errors",
			dr: &networking.DestinationRule{TrafficPolicy: &networking.TrafficPolicy{OutlierDetection: &networking.OutlierDetection{
				OutlierDetectionHttpErrorCodes: []uint32{503, 504},
				SplitExternalLocalOriginErrors: true, ConsecutiveLocalOriginFailures: wrapperspb.UInt32(4),
			}}},
			check: func(t *testing.T, c *clusterv3.Cluster) {
				od := c.OutlierDetection
				eq(t, "split", od.GetSplitExternalLocalOriginErrors(), true)
				eq(t, "local origin", od.GetConsecutiveLocalOriginFailure().GetValue(), uint32(4))
				eq(t, "enforce local origin", od.GetEnforcingConsecutiveLocalOriginFailure().GetValue(), uint32(100))
				m := httpOptions(t, c).GetOutlierDetection().GetErrorMatcher().GetOrMatch().GetRules()
				eq(t, "codes", len(m), 2)
				eq(t, "first code", m[0].GetHttpResponseHeadersMatch().GetHeaders()[0].GetStringMatch().GetExact(), "503")
				eq(t, "panic threshold", c.CommonLbConfig.GetHealthyPanicThreshold().GetValue(), 0.0)
			},
		},
		{
			name: "proxy protocol wraps the auto mTLS sockets",
			dr: &networking.DestinationRule{TrafficPolicy: &networking.TrafficPolicy{
				ProxyProtocol: &networking.TrafficPolicy_ProxyProtocol{Version: networking.TrafficPolicy_ProxyProtocol_V2},
			}},
			check: func(t *testing.T, c *clusterv3.Cluster) {
				eq(t, "matches", len(c.TransportSocketMatches), 2)
				for _, m := range c.TransportSocketMatches {
					eq(t, m.Name+" wrapped", m.TransportSocket.GetName(), "envoy.transport_sockets.upstream_proxy_protocol")
				}
			},
		},
		{
			name: "locality distribution turns on locality weighted lb",
			dr: &networking.DestinationRule{TrafficPolicy: &networking.TrafficPolicy{LoadBalancer: &networking.LoadBalancerSettings{
				LocalityLbSetting: &networking.LocalityLoadBalancerSetting{Distribute: []*networking.LocalityLoadBalancerSetting_Distribute{
					{From: "us/*", To: map[string]uint32{"us/*": 100}},
				}},
			}}},
			check: func(t *testing.T, c *clusterv3.Cluster) {
				eq(t, "locality weighted", c.CommonLbConfig.GetLocalityWeightedLbConfig() != nil, true)
			},
		},
		{
			name: "portLevelSettings TLS and insecureSkipVerify",
			dr: &networking.DestinationRule{TrafficPolicy: &networking.TrafficPolicy{
				PortLevelSettings: []*networking.TrafficPolicy_PortTrafficPolicy{{
					Port: &networking.PortSelector{Number: 9080},
					Tls:  &networking.ClientTLSSettings{Mode: networking.ClientTLSSettings_SIMPLE, InsecureSkipVerify: wrapperspb.Bool(true), Sni: "r.example"},
				}},
			}},
			check: func(t *testing.T, c *clusterv3.Cluster) {
				tc := upstreamTLS(t, c.TransportSocket)
				eq(t, "sni", tc.Sni, "r.example")
				eq(t, "no verification", tc.CommonTlsContext.GetValidationContext() != nil, true)
				eq(t, "no auto_sni", httpOptions(t, c) == nil, true)
			},
		},
		{
			name: "subset PASSTHROUGH is ORIGINAL_DST",
			dr: &networking.DestinationRule{Subsets: []*networking.Subset{{
				Name: "v2", Labels: map[string]string{"version": "v2"},
				TrafficPolicy: &networking.TrafficPolicy{LoadBalancer: simpleLB(networking.LoadBalancerSettings_PASSTHROUGH)},
			}}},
			subset: "v2",
			check: func(t *testing.T, c *clusterv3.Cluster) {
				eq(t, "type", c.GetType(), clusterv3.Cluster_ORIGINAL_DST)
				eq(t, "no eds", c.EdsClusterConfig == nil, true)
				eq(t, "lb", c.LbPolicy, clusterv3.Cluster_CLUSTER_PROVIDED)
			},
		},
		{
			name: "subset cluster merges its policy over the top level",
			dr: &networking.DestinationRule{
				TrafficPolicy: &networking.TrafficPolicy{
					LoadBalancer:   simpleLB(networking.LoadBalancerSettings_RANDOM),
					ConnectionPool: &networking.ConnectionPoolSettings{Tcp: &networking.ConnectionPoolSettings_TCPSettings{MaxConnections: 9}},
				},
				Subsets: []*networking.Subset{{
					Name: "v2", Labels: map[string]string{"version": "v2"},
					TrafficPolicy: &networking.TrafficPolicy{LoadBalancer: simpleLB(networking.LoadBalancerSettings_ROUND_ROBIN)},
				}},
			},
			subset: "v2",
			check: func(t *testing.T, c *clusterv3.Cluster) {
				eq(t, "name", c.Name, "outbound|9080|v2|reviews.bookinfo.svc.cluster.local")
				eq(t, "eds name", c.EdsClusterConfig.GetServiceName(), c.Name)
				eq(t, "lb from subset", c.LbPolicy, clusterv3.Cluster_ROUND_ROBIN)
				eq(t, "pool from top", c.CircuitBreakers.Thresholds[0].MaxConnections.GetValue(), uint32(9))
				eq(t, "subset metadata", c.Metadata.FilterMetadata["istio"].Fields["subset"].GetStringValue(), "v2")
				tc := upstreamTLS(t, c.TransportSocketMatches[0].TransportSocket)
				eq(t, "subset sni", tc.Sni, "outbound_.9080_.v2_.reviews.bookinfo.svc.cluster.local")
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			svc := f.kubeService("reviews", "bookinfo", f.port("http", 9080, index.ProtocolHTTP))
			f.endpoints(svc, "reviews-abc", []index.EndpointPort{f.epPort("http", 9080)},
				index.Endpoint{Addr: mustAddr("10.0.0.1"), ServiceAccount: f.sym("reviews-v2"), TLSMode: index.TLSModeIstio},
				index.Endpoint{Addr: mustAddr("10.0.0.2"), ServiceAccount: f.sym("bookinfo-reviews"), TLSMode: index.TLSModeIstio},
			)
			f.apply()
			dr := drConfig(f, "bookinfo", "reviews", host, tc.dr)
			k := f.clusterKey(svc)
			k.DestinationRule = dr
			k.ServiceAccounts = []index.Sym{f.sym("reviews-v2"), f.sym("bookinfo-reviews")}
			if tc.subset != "" {
				k.Subset = tc.subset
				k.SubsetLabels = f.labels("version", "v2")
			}
			tc.check(t, genCluster(t, f.names(), k))
		})
	}
}

func simpleLB(s networking.LoadBalancerSettings_SimpleLB) *networking.LoadBalancerSettings {
	return &networking.LoadBalancerSettings{LbPolicy: &networking.LoadBalancerSettings_Simple{Simple: s}}
}

func TestClusterPeerAuthenticationDisable(t *testing.T) {
	f := newFixture(t)
	svc := meshSvc(f)
	f.apply()
	k := f.clusterKey(svc)
	k.MTLS = encode.ServiceMTLSDisable
	c := genCluster(t, f.names(), k)
	eq(t, "no auto mTLS", c.TransportSocket == nil && len(c.TransportSocketMatches) == 0, true)
	k.MTLS = encode.ServiceMTLSStrict
	eq(t, "strict keeps auto mTLS", len(genCluster(t, f.names(), k).TransportSocketMatches), 2)
	k.Mesh = &encode.Mesh{ConnectTimeout: time.Second, EnableAutoMTLS: false}
	c = genCluster(t, f.names(), k)
	eq(t, "auto mTLS off in mesh", len(c.TransportSocketMatches), 0)
	eq(t, "mesh connect timeout", c.ConnectTimeout.AsDuration(), time.Second)
}

func TestClusterFixed(t *testing.T) {
	f := newFixture(t)
	f.apply()
	base := encode.ClusterKey{Mesh: encode.DefaultMesh()}

	k := base
	k.Role = encode.ClusterBlackHole
	c := genCluster(t, f.names(), &k)
	eq(t, "name", c.Name, "BlackHoleCluster")
	eq(t, "type", c.GetType(), clusterv3.Cluster_STATIC)
	eq(t, "alt", c.AltStatName, "BlackHoleCluster;")
	eq(t, "timeout", c.ConnectTimeout.AsDuration(), 10*time.Second)

	k.Role = encode.ClusterPassthrough
	c = genCluster(t, f.names(), &k)
	eq(t, "name", c.Name, "PassthroughCluster")
	eq(t, "type", c.GetType(), clusterv3.Cluster_ORIGINAL_DST)
	eq(t, "lb", c.LbPolicy, clusterv3.Cluster_CLUSTER_PROVIDED)
	o := httpOptions(t, c)
	eq(t, "idle", o.CommonHttpProtocolOptions.GetIdleTimeout().AsDuration(), 300*time.Second)
	eq(t, "downstream", o.GetUseDownstreamProtocolConfig() != nil, true)
	eq(t, "mx", c.Filters[0].Name, "istio.metadata_exchange")
	eq(t, "breakers", c.CircuitBreakers.Thresholds[0].MaxConnections.GetValue(), uint32(math.MaxUint32))

	k.Role = encode.ClusterInboundPassthrough
	c = genCluster(t, f.names(), &k)
	eq(t, "name", c.Name, "InboundPassthroughCluster")
	eq(t, "alt", c.AltStatName, "PassthroughCluster;")
	eq(t, "no filters", len(c.Filters), 0)
	eq(t, "bind", c.UpstreamBindConfig.GetSourceAddress().GetAddress(), "127.0.0.6")
	k.IPv6 = true
	eq(t, "bind v6", genCluster(t, f.names(), &k).UpstreamBindConfig.GetSourceAddress().GetAddress(), "::6")
}

func TestClusterInbound(t *testing.T) {
	f := newFixture(t)
	proxySvc := f.serviceEntry("example.com", "default", "proxy-service-instance",
		f.port("http", 80, index.ProtocolHTTP), f.port("auto", 9090, index.ProtocolUnknown))
	external := f.service(index.Service{
		Key: index.ServiceKey{Host: f.sym("ext.example.com"), Namespace: f.sym("default")}, Name: f.sym("ext"),
		Origin: index.OriginServiceEntry, MeshExternal: true, Ports: []index.Port{f.port("http", 80, index.ProtocolHTTP)},
	})
	f.apply()
	s := f.svc(proxySvc)
	k := &encode.ClusterKey{
		Role: encode.ClusterInbound, Mesh: encode.DefaultMesh(), ProxyType: encode.ProxySidecar,
		Service: s, Port: s.Ports[0], TargetPort: 8080, Inbound: []*index.Service{s},
	}
	c := genCluster(t, f.names(), k)
	eq(t, "name", c.Name, "inbound|8080||")
	eq(t, "alt", c.AltStatName, "inbound|8080||;")
	eq(t, "type", c.GetType(), clusterv3.Cluster_ORIGINAL_DST)
	eq(t, "lb", c.LbPolicy, clusterv3.Cluster_CLUSTER_PROVIDED)
	eq(t, "cleanup", c.CleanupInterval.GetSeconds(), int64(9223372035))
	eq(t, "bind", c.UpstreamBindConfig.GetSourceAddress().GetAddress(), "127.0.0.6")
	eq(t, "common lb empty", c.CommonLbConfig != nil && c.CommonLbConfig.HealthyPanicThreshold == nil, true)
	eq(t, "no filters", len(c.Filters), 0)
	eq(t, "no tls", c.TransportSocket == nil && len(c.TransportSocketMatches) == 0, true)
	eq(t, "services", c.Metadata.FilterMetadata["istio"].Fields["services"].GetListValue().GetValues()[0].GetStructValue().Fields["host"].GetStringValue(), "example.com")

	k.Port, k.TargetPort = s.Ports[1], 9090
	eq(t, "auto port", httpOptions(t, genCluster(t, f.names(), k)).GetUseDownstreamProtocolConfig() != nil, true)

	e := f.svc(external)
	k.Service, k.Port, k.Inbound = e, e.Ports[0], []*index.Service{e}
	eq(t, "external: no metadata", genCluster(t, f.names(), k).Metadata == nil, true)
}

func TestClusterGRPC(t *testing.T) {
	f := newFixture(t)
	svc := meshSvc(f)
	f.apply()
	k := f.clusterKey(svc)
	k.ProxyType = encode.ProxyGRPC
	c := genCluster(t, f.names(), k)
	eq(t, "name", c.Name, "outbound|80||random-0.host.example")
	eq(t, "alt", c.AltStatName, "outbound|80||random-0.host.example;")
	eq(t, "type", c.GetType(), clusterv3.Cluster_EDS)
	eq(t, "ads", c.EdsClusterConfig.GetEdsConfig().GetAds() != nil, true)
	eq(t, "no initial fetch timeout", c.EdsClusterConfig.GetEdsConfig().GetInitialFetchTimeout() == nil, true)
	eq(t, "gRPC default lb", c.LbPolicy, clusterv3.Cluster_ROUND_ROBIN)
	eq(t, "no envoy-only fields", c.ConnectTimeout == nil && c.CircuitBreakers == nil && c.CommonLbConfig == nil && len(c.Filters) == 0 && c.Metadata == nil, true)
	eq(t, "no auto mTLS", len(c.TransportSocketMatches) == 0 && c.TransportSocket == nil, true)

	k.DestinationRule = drConfig(f, "default", "random-0", "random-0.host.example", &networking.DestinationRule{
		TrafficPolicy: &networking.TrafficPolicy{
			LoadBalancer:   simpleLB(networking.LoadBalancerSettings_LEAST_REQUEST),
			ConnectionPool: &networking.ConnectionPoolSettings{Http: &networking.ConnectionPoolSettings_HTTPSettings{Http2MaxRequests: 64}},
			Tls:            &networking.ClientTLSSettings{Mode: networking.ClientTLSSettings_ISTIO_MUTUAL},
		},
	})
	k.Service = f.svc(svc)
	k.ServiceAccounts = []index.Sym{f.sym("random")}
	c = genCluster(t, f.names(), k)
	eq(t, "lb", c.LbPolicy, clusterv3.Cluster_LEAST_REQUEST)
	eq(t, "max_requests", c.CircuitBreakers.Thresholds[0].MaxRequests.GetValue(), uint32(64))
	eq(t, "only max_requests", c.CircuitBreakers.Thresholds[0].MaxConnections == nil, true)
	tc := upstreamTLS(t, c.TransportSocket)
	eq(t, "provider", tc.CommonTlsContext.GetTlsCertificateProviderInstance().GetInstanceName(), "default")
	vc := tc.CommonTlsContext.GetValidationContext()
	eq(t, "ca", vc.GetCaCertificateProviderInstance().GetCertificateName(), "ROOTCA")
	eq(t, "san", vc.GetMatchSubjectAltNames()[0].GetExact(), "spiffe://cluster.local/ns/default/sa/random")
}

func TestClusterName(t *testing.T) {
	eq(t, "name", encode.ClusterName(80, "v1", "reviews.default.svc.cluster.local"), "outbound|80|v1|reviews.default.svc.cluster.local")
	eq(t, "inbound", encode.InboundClusterName(9080), "inbound|9080||")
	eq(t, "sni", encode.ClusterSNI(80, "", "a.b"), "outbound_.80_._.a.b")
	cases := []struct {
		in     string
		ok     bool
		dir    encode.Direction
		port   uint32
		subset string
		host   string
	}{
		{"outbound|80|v1|reviews.default.svc.cluster.local", true, encode.Outbound, 80, "v1", "reviews.default.svc.cluster.local"},
		{"outbound|443||kubernetes.default.svc.cluster.local", true, encode.Outbound, 443, "", "kubernetes.default.svc.cluster.local"},
		{"inbound|9080||", true, encode.Inbound, 9080, "", ""},
		{"BlackHoleCluster", false, 0, 0, "", ""},
		{"outbound|x||h", false, 0, 0, "", ""},
		{"outbound|0||h", false, 0, 0, "", ""},
		{"outbound|80|h", false, 0, 0, "", ""},
		{"outbound|80|||", false, 0, 0, "", ""},
		{"outbound_.80_._.h", false, 0, 0, "", ""},
	}
	for _, c := range cases {
		dir, port, subset, host, ok := encode.ParseClusterName(c.in)
		if ok != c.ok || dir != c.dir || port != c.port || subset != c.subset || host != c.host {
			t.Errorf("ParseClusterName(%q) = %v %d %q %q %v", c.in, dir, port, subset, host, ok)
		}
	}
	name := "outbound|80|v1|reviews.default.svc.cluster.local"
	if n := testing.AllocsPerRun(100, func() { _, _, _, _, _ = encode.ParseClusterName(name) }); n != 0 {
		t.Errorf("ParseClusterName allocates %v times", n)
	}
}

func TestClusterGRPCSubsetAndHash(t *testing.T) {
	f := newFixture(t)
	svc := meshSvc(f)
	f.apply()
	k := f.clusterKey(svc)
	k.ProxyType = encode.ProxyGRPC
	k.DestinationRule = drConfig(f, "default", "random-0", "random-0.host.example", &networking.DestinationRule{
		TrafficPolicy: &networking.TrafficPolicy{LoadBalancer: simpleLB(networking.LoadBalancerSettings_RANDOM)},
		Subsets: []*networking.Subset{{
			Name: "v1", Labels: map[string]string{"version": "v1"},
			TrafficPolicy: &networking.TrafficPolicy{LoadBalancer: &networking.LoadBalancerSettings{
				LbPolicy: &networking.LoadBalancerSettings_ConsistentHash{ConsistentHash: &networking.LoadBalancerSettings_ConsistentHashLB{
					HashKey: &networking.LoadBalancerSettings_ConsistentHashLB_HttpHeaderName{HttpHeaderName: "x-user"},
				}},
			}},
		}},
	})
	k.Service = f.svc(svc)
	c := genCluster(t, f.names(), k)
	eq(t, "RANDOM is not a gRPC policy: left at the default", c.LbPolicy, clusterv3.Cluster_ROUND_ROBIN)
	k.Subset, k.SubsetLabels = "v1", f.labels("version", "v1")
	c = genCluster(t, f.names(), k)
	eq(t, "name", c.Name, "outbound|80|v1|random-0.host.example")
	eq(t, "eds name", c.EdsClusterConfig.GetServiceName(), c.Name)
	eq(t, "ring hash", c.LbPolicy, clusterv3.Cluster_RING_HASH)
	eq(t, "ring size", c.GetRingHashLbConfig().GetMinimumRingSize().GetValue(), uint64(1024))
}

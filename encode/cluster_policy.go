package encode

import (
	"math"
	"strconv"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/config/common/matcher/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	proxyprotocolv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/proxy_protocol/v3"
	httpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	typematcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/pilotfish-mesh/pilotfish/index"
)

// clPolicy is the effective DestinationRule policy for one cluster:
// the top-level policy or its port-level override, merged with the subset's
// (istiod's GetPortLevelTrafficPolicy and MergeSubsetTrafficPolicy). It is a
// value of pointers into the immutable spec: resolving allocates nothing.
type clPolicy struct {
	connectionPool   *networking.ConnectionPoolSettings
	outlierDetection *networking.OutlierDetection
	loadBalancer     *networking.LoadBalancerSettings
	tls              *networking.ClientTLSSettings
	proxyProtocol    *networking.TrafficPolicy_ProxyProtocol
	retryBudget      *networking.TrafficPolicy_RetryBudget
}

// clPortPolicy applies port-level settings: a matching port-level entry
// replaces connection pool, load balancer, outlier detection and TLS (not
// inherited from the top level) and drops the other fields, as istiod's
// shadowCopyPortTrafficPolicy does.
func clPortPolicy(tp *networking.TrafficPolicy, port uint32) (clPolicy, bool, bool) {
	if tp == nil {
		return clPolicy{}, false, false
	}
	for _, p := range tp.PortLevelSettings {
		if p.GetPort() != nil && p.GetPort().GetNumber() == port {
			return clPolicy{
				connectionPool:   p.ConnectionPool,
				loadBalancer:     p.LoadBalancer,
				outlierDetection: p.OutlierDetection,
				tls:              p.Tls,
			}, true, true
		}
	}
	return clPolicy{
		connectionPool:   tp.ConnectionPool,
		outlierDetection: tp.OutlierDetection,
		loadBalancer:     tp.LoadBalancer,
		tls:              tp.Tls,
		proxyProtocol:    tp.ProxyProtocol,
		retryBudget:      tp.RetryBudget,
	}, true, false
}

// clResolvePolicy returns the effective policy of the port's cluster for
// subset (nil: the default cluster). def is meshConfig.defaultTrafficPolicy
// (nil: none, or where istiod does not apply it: EDS, proxyless gRPC): its
// connection pool and outlier detection fill those the rule's top-level or
// port-level policy leaves unset, under the subset's (istiod's
// applyDefaultTrafficPolicy between GetPortLevelTrafficPolicy and
// MergeSubsetTrafficPolicy).
func clResolvePolicy(dr *networking.DestinationRule, port uint32, subset *networking.Subset, def *networking.TrafficPolicy) clPolicy {
	top, hasTop, _ := clPortPolicy(dr.GetTrafficPolicy(), port)
	if def != nil {
		if def.ConnectionPool != nil && top.connectionPool == nil {
			top.connectionPool, hasTop = def.ConnectionPool, true
		}
		if def.OutlierDetection != nil && top.outlierDetection == nil {
			top.outlierDetection, hasTop = def.OutlierDetection, true
		}
	}
	if subset == nil || subset.TrafficPolicy == nil {
		return top
	}
	sub, _, subPortLevel := clPortPolicy(subset.TrafficPolicy, port)
	if !hasTop {
		return sub
	}
	merged := top
	if sub.connectionPool != nil || subPortLevel {
		merged.connectionPool = sub.connectionPool
	}
	if sub.outlierDetection != nil || subPortLevel {
		merged.outlierDetection = sub.outlierDetection
	}
	if sub.loadBalancer != nil || subPortLevel {
		merged.loadBalancer = sub.loadBalancer
	}
	if sub.tls != nil || subPortLevel {
		merged.tls = sub.tls
	}
	if sub.proxyProtocol != nil {
		merged.proxyProtocol = sub.proxyProtocol
	}
	if sub.retryBudget != nil {
		merged.retryBudget = sub.retryBudget
	}
	return merged
}

// applyTrafficPolicy is istiod's applyTrafficPolicy. Only the connection
// pool applies to inbound clusters.
func (s *clState) applyTrafficPolicy(p clPolicy, outbound bool, sni string) {
	cp := p.connectionPool
	if cp == nil {
		cp = &networking.ConnectionPoolSettings{}
	}
	if outbound && clShouldH2Upgrade(cp, s.k.Port.Protocol, s.k.Mesh) {
		s.setH2()
	}
	s.applyConnectionPool(cp, p.retryBudget)
	if outbound {
		s.applyOutlierDetection(p.outlierDetection)
		if od := p.outlierDetection; od != nil && len(od.OutlierDetectionHttpErrorCodes) > 0 {
			s.applyOutlierErrorCodes(od.OutlierDetectionHttpErrorCodes)
		}
		s.applyLoadBalancer(p.loadBalancer)
		s.applyUpstreamTLS(p.tls, sni)
		s.applyProxyProtocol(p.proxyProtocol)
	}
	if s.c.GetType() == clusterv3.Cluster_ORIGINAL_DST {
		s.c.LbPolicy = clusterv3.Cluster_CLUSTER_PROVIDED
	}
}

// clShouldH2Upgrade is istiod's shouldH2Upgrade: a DestinationRule's
// h2UpgradePolicy (or useClientProtocol) decides, else meshConfig's, which
// upgrades HTTP ports only (not sniffed ones: the application behind may
// speak HTTP/1.1 only).
func clShouldH2Upgrade(cp *networking.ConnectionPoolSettings, p index.Protocol, m *Mesh) bool {
	if h := cp.GetHttp(); h != nil {
		if h.UseClientProtocol {
			return false
		}
		switch h.H2UpgradePolicy {
		case networking.ConnectionPoolSettings_HTTPSettings_UPGRADE:
			return true
		case networking.ConnectionPoolSettings_HTTPSettings_DO_NOT_UPGRADE:
			return false
		}
	}
	return clMeshH2Upgrade(p, m)
}

// clMeshH2Upgrade: meshConfig's h2UpgradePolicy applies to p.
func clMeshH2Upgrade(p index.Protocol, m *Mesh) bool {
	return m.h2Upgrade() && p.IsHTTP()
}

// clDefaultThresholds are istiod's circuit breaker defaults: everything
// unlimited (max uint32), so Envoy's low defaults (1024) never shed load.
func clDefaultThresholds() *clusterv3.CircuitBreakers_Thresholds {
	return &clusterv3.CircuitBreakers_Thresholds{
		MaxConnections:     clU32(math.MaxUint32),
		MaxPendingRequests: clU32(math.MaxUint32),
		MaxRequests:        clU32(math.MaxUint32),
		MaxRetries:         clU32(math.MaxUint32),
	}
}

// clDefaultCircuitBreakers are the default thresholds, shared (immutable).
var clDefaultCircuitBreakers = &clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{clDefaultThresholds()}}

// applyConnectionPool is istiod's applyConnectionPool.
func (s *clState) applyConnectionPool(cp *networking.ConnectionPoolSettings, rb *networking.TrafficPolicy_RetryBudget) {
	c := s.c
	c.ConnectTimeout = clConnectTimeout(s.k.Mesh)
	c.UpstreamConnectionOptions = clKeepalive(s.k.Mesh.keepalive(), cp.GetTcp().GetTcpKeepalive())
	if rb == nil && cp.GetHttp() == nil && cp.GetTcp() == nil {
		// The common case: istiod's defaults, shared.
		c.CircuitBreakers = clDefaultCircuitBreakers
		return
	}
	t := clDefaultThresholds()
	if rb != nil {
		pct := 20.0
		if rb.Percent != nil {
			pct = rb.Percent.GetValue()
		}
		minConc := uint32(3)
		if rb.MinRetryConcurrency > 0 {
			minConc = rb.MinRetryConcurrency
		}
		t.RetryBudget = &clusterv3.CircuitBreakers_Thresholds_RetryBudget{
			BudgetPercent:       &typev3.Percent{Value: pct},
			BudgetInterval:      rb.BudgetInterval,
			MinRetryConcurrency: clU32(minConc),
		}
	}
	h := cp.GetHttp()
	idle := h.GetIdleTimeout()
	if h != nil {
		if h.Http2MaxRequests > 0 {
			t.MaxRequests = clU32(uint32(h.Http2MaxRequests))
		}
		if h.Http1MaxPendingRequests > 0 {
			t.MaxPendingRequests = clU32(uint32(h.Http1MaxPendingRequests))
		}
		if h.MaxRetries > 0 {
			t.MaxRetries = clU32(uint32(h.MaxRetries))
		}
	}
	tcp := cp.GetTcp()
	maxConnDuration := tcp.GetMaxConnectionDuration()
	if tcp != nil {
		if tcp.ConnectTimeout != nil {
			c.ConnectTimeout = tcp.ConnectTimeout
		}
		if tcp.MaxConnections > 0 {
			t.MaxConnections = clU32(uint32(tcp.MaxConnections))
		}
		if idle == nil {
			idle = tcp.IdleTimeout
		}
	}
	c.CircuitBreakers = &clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{t}}

	maxReqPerConn := uint32(h.GetMaxRequestsPerConnection())
	maxStreams := uint32(h.GetMaxConcurrentStreams())
	keepalive := h.GetHttp2KeepAlive()
	if maxConnDuration != nil || idle != nil || maxReqPerConn > 0 || maxStreams > 0 || keepalive != nil {
		o := s.httpOptions()
		if o.CommonHttpProtocolOptions == nil {
			o.CommonHttpProtocolOptions = &corev3.HttpProtocolOptions{}
		}
		if idle != nil {
			o.CommonHttpProtocolOptions.IdleTimeout = idle
		}
		if maxReqPerConn > 0 {
			o.CommonHttpProtocolOptions.MaxRequestsPerConnection = clU32(maxReqPerConn)
		}
		if maxConnDuration != nil {
			o.CommonHttpProtocolOptions.MaxConnectionDuration = maxConnDuration
		}
		if h2 := o.GetExplicitHttpConfig().GetHttp2ProtocolOptions(); h2 != nil {
			if maxStreams > 0 {
				h2.MaxConcurrentStreams = clU32(maxStreams)
			}
			if keepalive != nil {
				h2.ConnectionKeepalive = &corev3.KeepaliveSettings{Interval: keepalive.Interval, Timeout: keepalive.Timeout}
			}
		}
	}
	if h.GetUseClientProtocol() {
		s.setUseDownstreamProtocol()
	}
}

// clKeepalive is istiod's applyTCPKeepalive: the mesh's tcpKeepalive, then
// each field a DestinationRule's sets over it (nil when neither is set).
func clKeepalive(mesh *TCPKeepalive, dr *networking.ConnectionPoolSettings_TCPSettings_TcpKeepalive) *clusterv3.UpstreamConnectionOptions {
	if mesh == nil && dr == nil {
		return nil
	}
	tk := &corev3.TcpKeepalive{}
	if mesh != nil {
		if mesh.Probes > 0 {
			tk.KeepaliveProbes = clU32(mesh.Probes)
		}
		if mesh.HasTime {
			tk.KeepaliveTime = clU32(mesh.Time)
		}
		if mesh.HasInterval {
			tk.KeepaliveInterval = clU32(mesh.Interval)
		}
	}
	if dr != nil {
		if dr.Probes > 0 {
			tk.KeepaliveProbes = clU32(dr.Probes)
		}
		if dr.Time != nil {
			tk.KeepaliveTime = clU32(uint32(dr.Time.Seconds))
		}
		if dr.Interval != nil {
			tk.KeepaliveInterval = clU32(uint32(dr.Interval.Seconds))
		}
	}
	return &clusterv3.UpstreamConnectionOptions{TcpKeepalive: tk}
}

// applyOutlierDetection is istiod's applyOutlierDetection: success-rate
// ejection off, consecutive errors enforced at 100%, and the panic
// threshold set to minHealthPercent.
func (s *clState) applyOutlierDetection(od *networking.OutlierDetection) {
	if od == nil {
		return
	}
	out := &clusterv3.OutlierDetection{EnforcingSuccessRate: clU32(0)}
	if e := od.Consecutive_5XxErrors; e != nil {
		v := e.GetValue()
		out.Consecutive_5Xx = clU32(v)
		if v > 0 {
			v = 100
		}
		out.EnforcingConsecutive_5Xx = clU32(v)
	}
	if e := od.ConsecutiveGatewayErrors; e != nil {
		v := e.GetValue()
		out.ConsecutiveGatewayFailure = clU32(v)
		if v > 0 {
			v = 100
		}
		out.EnforcingConsecutiveGatewayFailure = clU32(v)
	}
	out.Interval = od.Interval
	out.BaseEjectionTime = od.BaseEjectionTime
	if od.MaxEjectionPercent > 0 {
		out.MaxEjectionPercent = clU32(uint32(od.MaxEjectionPercent))
	}
	if od.SplitExternalLocalOriginErrors {
		out.SplitExternalLocalOriginErrors = true
		if od.ConsecutiveLocalOriginFailures.GetValue() > 0 {
			out.ConsecutiveLocalOriginFailure = clU32(od.ConsecutiveLocalOriginFailures.GetValue())
			out.EnforcingConsecutiveLocalOriginFailure = clU32(100)
		}
		out.EnforcingLocalOriginSuccessRate = clU32(0)
	}
	s.c.OutlierDetection = out
	if od.MinHealthPercent >= 0 {
		s.c.CommonLbConfig.HealthyPanicThreshold = &typev3.Percent{Value: float64(od.MinHealthPercent)}
	}
}

// applyOutlierErrorCodes makes only the listed HTTP status codes count as
// outlier failures.
func (s *clState) applyOutlierErrorCodes(codes []uint32) {
	rules := make([]*matcherv3.MatchPredicate, 0, len(codes))
	for _, code := range codes {
		rules = append(rules, &matcherv3.MatchPredicate{Rule: &matcherv3.MatchPredicate_HttpResponseHeadersMatch{
			HttpResponseHeadersMatch: &matcherv3.HttpHeadersMatch{Headers: []*routev3.HeaderMatcher{{
				Name: ":status",
				HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{StringMatch: &typematcherv3.StringMatcher{
					MatchPattern: &typematcherv3.StringMatcher_Exact{Exact: strconv.FormatUint(uint64(code), 10)},
				}},
			}}},
		}})
	}
	pred := rules[0]
	if len(rules) > 1 {
		pred = &matcherv3.MatchPredicate{Rule: &matcherv3.MatchPredicate_OrMatch{OrMatch: &matcherv3.MatchPredicate_MatchSet{Rules: rules}}}
	}
	s.httpOptions().OutlierDetection = &httpv3.HttpProtocolOptions_OutlierDetection{ErrorMatcher: pred}
}

// meshLocalityLB is the mesh's locality setting (nil without a key: the
// constant parts of the direct encoder).
func (s *clState) meshLocalityLB() *LocalityLB {
	if s.k.ClusterKey == nil {
		return nil
	}
	return s.k.Mesh.localityLB()
}

// applyLoadBalancer is istiod's applyLoadBalancer for Envoy clusters.
func (s *clState) applyLoadBalancer(lb *networking.LoadBalancerSettings) {
	c := s.c
	// Unhealthy endpoints are sent by default (PILOT_AUTO_SEND_UNHEALTHY_ENDPOINTS),
	// so the panic threshold is off unless outlier detection set it.
	if c.CommonLbConfig.HealthyPanicThreshold == nil {
		c.CommonLbConfig.HealthyPanicThreshold = &typev3.Percent{}
	}
	if setting, ok := epEffectiveLocalityLB(lb, s.meshLocalityLB()); ok {
		failover := c.OutlierDetection != nil
		if (failover && (len(setting.GetFailover()) > 0 || len(setting.GetFailoverPriority()) > 0)) || setting.GetDistribute() != nil {
			c.CommonLbConfig.LocalityConfigSpecifier = &clusterv3.Cluster_CommonLbConfig_LocalityWeightedLbConfig_{
				LocalityWeightedLbConfig: &clusterv3.Cluster_CommonLbConfig_LocalityWeightedLbConfig{},
			}
		}
		if c.LoadAssignment != nil {
			for i, d := range epApplyLocalityLB(c.LoadAssignment.Endpoints, s.k.Locality, setting, failover) {
				if d {
					c.LoadAssignment.Endpoints[i].LbEndpoints = nil
				}
			}
		}
	}
	if c.GetType() == clusterv3.Cluster_ORIGINAL_DST {
		c.LbPolicy = clusterv3.Cluster_CLUSTER_PROVIDED
		return
	}
	switch lb.GetSimple() {
	case networking.LoadBalancerSettings_LEAST_CONN, networking.LoadBalancerSettings_LEAST_REQUEST: //nolint:staticcheck // LEAST_CONN is istiod's alias
		clApplyLeastRequest(c, lb)
	case networking.LoadBalancerSettings_RANDOM:
		c.LbPolicy = clusterv3.Cluster_RANDOM
	case networking.LoadBalancerSettings_ROUND_ROBIN:
		clApplyRoundRobin(c, lb)
	case networking.LoadBalancerSettings_PASSTHROUGH:
		c.LbPolicy = clusterv3.Cluster_CLUSTER_PROVIDED
		c.ClusterDiscoveryType = &clusterv3.Cluster_Type{Type: clusterv3.Cluster_ORIGINAL_DST}
		c.LoadAssignment = nil
	default:
		// istiod's default algorithm.
		clApplyLeastRequest(c, lb)
	}
	clApplyConsistentHash(c, lb)
}

func clApplyRoundRobin(c *clusterv3.Cluster, lb *networking.LoadBalancerSettings) {
	c.LbPolicy = clusterv3.Cluster_ROUND_ROBIN
	if ss := clSlowStart(lb); ss != nil {
		c.LbConfig = &clusterv3.Cluster_RoundRobinLbConfig_{RoundRobinLbConfig: &clusterv3.Cluster_RoundRobinLbConfig{SlowStartConfig: ss}}
	}
}

func clApplyLeastRequest(c *clusterv3.Cluster, lb *networking.LoadBalancerSettings) {
	c.LbPolicy = clusterv3.Cluster_LEAST_REQUEST
	if ss := clSlowStart(lb); ss != nil {
		c.LbConfig = &clusterv3.Cluster_LeastRequestLbConfig_{LeastRequestLbConfig: &clusterv3.Cluster_LeastRequestLbConfig{SlowStartConfig: ss}}
	}
}

// clSlowStart is istiod's warmup configuration (warmup, or the deprecated
// warmupDurationSecs).
func clSlowStart(lb *networking.LoadBalancerSettings) *clusterv3.Cluster_SlowStartConfig {
	if w := lb.GetWarmup(); w != nil {
		aggression, minPct := 1.0, 10.0
		if w.Aggression != nil {
			aggression = w.Aggression.GetValue()
		}
		if w.MinimumPercent != nil {
			minPct = w.MinimumPercent.GetValue()
		}
		return &clusterv3.Cluster_SlowStartConfig{
			SlowStartWindow:  w.Duration,
			Aggression:       &corev3.RuntimeDouble{DefaultValue: aggression, RuntimeKey: "("},
			MinWeightPercent: &typev3.Percent{Value: minPct},
		}
	}
	if d := lb.GetWarmupDurationSecs(); d != nil {
		return &clusterv3.Cluster_SlowStartConfig{SlowStartWindow: d}
	}
	return nil
}

// clApplyConsistentHash is istiod's ApplyRingHashLoadBalancer: MAGLEV or
// RING_HASH (minimum ring size 1024 unless set). The hash policy itself
// goes on routes.
func clApplyConsistentHash(c *clusterv3.Cluster, lb *networking.LoadBalancerSettings) {
	ch := lb.GetConsistentHash()
	if ch == nil {
		return
	}
	switch {
	case ch.GetMaglev() != nil:
		c.LbPolicy = clusterv3.Cluster_MAGLEV
		c.LbConfig = nil
		if ts := ch.GetMaglev().TableSize; ts != 0 {
			c.LbConfig = &clusterv3.Cluster_MaglevLbConfig_{MaglevLbConfig: &clusterv3.Cluster_MaglevLbConfig{TableSize: wrapperspb.UInt64(ts)}}
		}
	case ch.GetRingHash() != nil:
		c.LbPolicy = clusterv3.Cluster_RING_HASH
		c.LbConfig = nil
		if n := ch.GetRingHash().MinimumRingSize; n != 0 {
			c.LbConfig = &clusterv3.Cluster_RingHashLbConfig_{RingHashLbConfig: &clusterv3.Cluster_RingHashLbConfig{MinimumRingSize: wrapperspb.UInt64(n)}}
		}
	default:
		n := uint64(1024)
		if ch.MinimumRingSize != 0 { //nolint:staticcheck // deprecated field istiod still honours
			n = ch.MinimumRingSize //nolint:staticcheck
		}
		c.LbPolicy = clusterv3.Cluster_RING_HASH
		c.LbConfig = &clusterv3.Cluster_RingHashLbConfig_{RingHashLbConfig: &clusterv3.Cluster_RingHashLbConfig{MinimumRingSize: wrapperspb.UInt64(n)}}
	}
}

// applyProxyProtocol wraps the transport socket(s) in an upstream PROXY
// protocol socket.
func (s *clState) applyProxyProtocol(pp *networking.TrafficPolicy_ProxyProtocol) {
	if pp == nil {
		return
	}
	c := s.c
	wrap := func(inner *corev3.TransportSocket) *corev3.TransportSocket {
		return &corev3.TransportSocket{
			Name: "envoy.transport_sockets.upstream_proxy_protocol",
			ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: clAny(&proxyprotocolv3.ProxyProtocolUpstreamTransport{
				Config:          &corev3.ProxyProtocolConfig{Version: corev3.ProxyProtocolConfig_Version(pp.Version)},
				TransportSocket: inner,
			})},
		}
	}
	if c.TransportSocket == nil && len(c.TransportSocketMatches) == 0 {
		c.TransportSocket = wrap(clRawBufferSocket)
		return
	}
	if c.TransportSocket != nil {
		c.TransportSocket = wrap(c.TransportSocket)
	}
	for _, m := range c.TransportSocketMatches {
		m.TransportSocket = wrap(m.TransportSocket)
	}
}

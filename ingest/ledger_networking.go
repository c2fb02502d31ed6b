package ingest

// The ledger of networking.istio.io (ledger.go): every field reachable
// from the specs of VirtualService, DestinationRule, Gateway,
// ServiceEntry, WorkloadEntry and Sidecar. A field is honoured only when
// ingest converts it and rules or encode use it, and the test named
// asserts the xDS it produces. Scenario tests
// (engine.TestScenarios/NAME) are internal/scenario/testdata/NAME.txtar.

// Reasons shared by several fields.
const (
	whyIstiodIgnore = "istiod ignores it too"
	whyMultiNetwork = "multi-network meshes (split-horizon EDS, network gateways) are not implemented"
)

var networkingLedger = ledgerTable{
	// VirtualService
	"istio.networking.v1alpha3.VirtualService.hosts":     honoured("rules.TestVirtualServiceSelection"),
	"istio.networking.v1alpha3.VirtualService.gateways":  honoured("encode.TestRouteSelection"),
	"istio.networking.v1alpha3.VirtualService.http":      honoured("encode.TestRouteActions"),
	"istio.networking.v1alpha3.VirtualService.tls":       honoured("encode.TestOutboundListenerVirtualServiceRoutes"),
	"istio.networking.v1alpha3.VirtualService.tcp":       honoured("encode.TestOutboundListenerVirtualServiceRoutes"),
	"istio.networking.v1alpha3.VirtualService.export_to": honoured("engine.TestScenarios/export-to"),

	"istio.networking.v1alpha3.HTTPRoute.name":              honoured("encode.TestRouteSelection"),
	"istio.networking.v1alpha3.HTTPRoute.match":             honoured("encode.TestRouteMatch"),
	"istio.networking.v1alpha3.HTTPRoute.route":             honoured("encode.TestRouteActions"),
	"istio.networking.v1alpha3.HTTPRoute.redirect":          honoured("encode.TestRouteActions"),
	"istio.networking.v1alpha3.HTTPRoute.direct_response":   honoured("encode.TestRouteActions"),
	"istio.networking.v1alpha3.HTTPRoute.delegate":          honoured("rules.TestVirtualServiceDelegate"),
	"istio.networking.v1alpha3.Delegate.name":               honoured("rules.TestVirtualServiceDelegate"),
	"istio.networking.v1alpha3.Delegate.namespace":          honoured("rules.TestVirtualServiceDelegate"),
	"istio.networking.v1alpha3.HTTPRoute.rewrite":           honoured("encode.TestRouteActions"),
	"istio.networking.v1alpha3.HTTPRoute.timeout":           honoured("encode.TestRouteActions"),
	"istio.networking.v1alpha3.HTTPRoute.retries":           honoured("encode.TestRouteActions"),
	"istio.networking.v1alpha3.HTTPRoute.fault":             honoured("encode.TestRouteActions"),
	"istio.networking.v1alpha3.HTTPRoute.mirror":            honoured("encode.TestRouteActions"),
	"istio.networking.v1alpha3.HTTPRoute.mirrors":           honoured("encode.TestRouteActions"),
	"istio.networking.v1alpha3.HTTPRoute.mirror_percent":    honoured("engine.TestScenarios/ledger-route-policy"),
	"istio.networking.v1alpha3.HTTPRoute.mirror_percentage": honoured("encode.TestRouteActions"),
	"istio.networking.v1alpha3.HTTPRoute.cors_policy":       honoured("encode.TestRouteActions"),
	"istio.networking.v1alpha3.HTTPRoute.headers":           honoured("encode.TestRouteActions"),

	"istio.networking.v1alpha3.HTTPMatchRequest.name":             honoured("encode.TestRouteSelection"),
	"istio.networking.v1alpha3.HTTPMatchRequest.uri":              honoured("encode.TestRouteMatch"),
	"istio.networking.v1alpha3.HTTPMatchRequest.scheme":           honoured("encode.TestRouteActions"),
	"istio.networking.v1alpha3.HTTPMatchRequest.method":           honoured("encode.TestRouteMatch"),
	"istio.networking.v1alpha3.HTTPMatchRequest.authority":        honoured("encode.TestRouteMatch"),
	"istio.networking.v1alpha3.HTTPMatchRequest.headers":          honoured("encode.TestRouteMatch"),
	"istio.networking.v1alpha3.HTTPMatchRequest.port":             honoured("encode.TestRouteSelection"),
	"istio.networking.v1alpha3.HTTPMatchRequest.source_labels":    honoured("rules.TestVirtualServiceSourceLabels"),
	"istio.networking.v1alpha3.HTTPMatchRequest.gateways":         honoured("encode.TestRouteSelection"),
	"istio.networking.v1alpha3.HTTPMatchRequest.query_params":     honoured("encode.TestRouteMatch"),
	"istio.networking.v1alpha3.HTTPMatchRequest.ignore_uri_case":  honoured("encode.TestRouteMatch"),
	"istio.networking.v1alpha3.HTTPMatchRequest.without_headers":  honoured("encode.TestRouteMatch"),
	"istio.networking.v1alpha3.HTTPMatchRequest.source_namespace": honoured("encode.TestRouteSelection"),
	"istio.networking.v1alpha3.HTTPMatchRequest.stat_prefix":      honoured("engine.TestScenarios/ledger-route-policy"),

	"istio.networking.v1alpha3.StringMatch.exact":  honoured("encode.TestRouteMatch"),
	"istio.networking.v1alpha3.StringMatch.prefix": honoured("encode.TestRouteMatch"),
	"istio.networking.v1alpha3.StringMatch.regex":  honoured("encode.TestRouteMatch"),

	"istio.networking.v1alpha3.HTTPRouteDestination.destination": honoured("encode.TestRouteActions"),
	"istio.networking.v1alpha3.HTTPRouteDestination.weight":      honoured("encode.TestRouteActions"),
	"istio.networking.v1alpha3.HTTPRouteDestination.headers":     honoured("encode.TestRouteActions"),
	"istio.networking.v1alpha3.RouteDestination.destination":     honoured("encode.TestOutboundListenerVirtualServiceRoutes"),
	"istio.networking.v1alpha3.RouteDestination.weight":          honoured("encode.TestOutboundListenerVirtualServiceRoutes"),
	"istio.networking.v1alpha3.Destination.host":                 honoured("encode.TestRouteActions"),
	"istio.networking.v1alpha3.Destination.subset":               honoured("encode.TestRouteActions"),
	"istio.networking.v1alpha3.Destination.port":                 honoured("encode.TestGatewayVirtualHostComposed"),
	"istio.networking.v1alpha3.PortSelector.number":              honoured("encode.TestGatewayVirtualHostComposed"),

	"istio.networking.v1alpha3.Headers.request":                   honoured("encode.TestRouteActions"),
	"istio.networking.v1alpha3.Headers.response":                  honoured("encode.TestRouteActions"),
	"istio.networking.v1alpha3.Headers.HeaderOperations.set":      honoured("encode.TestRouteActions"),
	"istio.networking.v1alpha3.Headers.HeaderOperations.add":      honoured("encode.TestRouteActions"),
	"istio.networking.v1alpha3.Headers.HeaderOperations.remove":   honoured("encode.TestRouteActions"),
	"istio.networking.v1alpha3.HTTPRedirect.uri":                  honoured("encode.TestRouteActions"),
	"istio.networking.v1alpha3.HTTPRedirect.authority":            honoured("encode.TestRouteActions"),
	"istio.networking.v1alpha3.HTTPRedirect.port":                 honoured("encode.TestRouteActions"),
	"istio.networking.v1alpha3.HTTPRedirect.derive_port":          honoured("encode.TestRouteActions"),
	"istio.networking.v1alpha3.HTTPRedirect.scheme":               honoured("encode.TestRouteActions"),
	"istio.networking.v1alpha3.HTTPRedirect.redirect_code":        honoured("encode.TestRouteActions"),
	"istio.networking.v1alpha3.HTTPRedirect.prefix_rewrite":       honoured("engine.TestScenarios/ledger-route-policy"),
	"istio.networking.v1alpha3.HTTPDirectResponse.status":         honoured("encode.TestRouteActions"),
	"istio.networking.v1alpha3.HTTPDirectResponse.body":           honoured("encode.TestRouteActions"),
	"istio.networking.v1alpha3.HTTPBody.string":                   honoured("encode.TestRouteActions"),
	"istio.networking.v1alpha3.HTTPBody.bytes":                    honoured("engine.TestScenarios/ledger-route-policy"),
	"istio.networking.v1alpha3.HTTPRewrite.uri":                   honoured("encode.TestRouteActions"),
	"istio.networking.v1alpha3.HTTPRewrite.authority":             honoured("encode.TestRouteActions"),
	"istio.networking.v1alpha3.HTTPRewrite.uri_regex_rewrite":     honoured("encode.TestRouteActions"),
	"istio.networking.v1alpha3.RegexRewrite.match":                honoured("encode.TestRouteActions"),
	"istio.networking.v1alpha3.RegexRewrite.rewrite":              honoured("encode.TestRouteActions"),
	"istio.networking.v1alpha3.HTTPRetry.attempts":                honoured("encode.TestRouteActions"),
	"istio.networking.v1alpha3.HTTPRetry.per_try_timeout":         honoured("encode.TestRouteActions"),
	"istio.networking.v1alpha3.HTTPRetry.retry_on":                honoured("encode.TestRouteActions"),
	"istio.networking.v1alpha3.HTTPRetry.retry_remote_localities": honoured("encode.TestRouteActions"),
	"istio.networking.v1alpha3.HTTPRetry.retry_ignore_previous_hosts": honoured(
		"engine.TestScenarios/ledger-route-policy"),
	"istio.networking.v1alpha3.HTTPRetry.backoff":                    honoured("encode.TestRouteActions"),
	"istio.networking.v1alpha3.HTTPFaultInjection.delay":             honoured("encode.TestRouteActions"),
	"istio.networking.v1alpha3.HTTPFaultInjection.abort":             honoured("encode.TestRouteActions"),
	"istio.networking.v1alpha3.HTTPFaultInjection.Delay.percent":     honoured("engine.TestScenarios/ledger-route-policy"),
	"istio.networking.v1alpha3.HTTPFaultInjection.Delay.fixed_delay": honoured("encode.TestRouteActions"),
	"istio.networking.v1alpha3.HTTPFaultInjection.Delay.exponential_delay": unsupportedDoes(whyIstiodIgnore,
		"the delay is dropped"),
	"istio.networking.v1alpha3.HTTPFaultInjection.Delay.percentage":  honoured("encode.TestRouteActions"),
	"istio.networking.v1alpha3.HTTPFaultInjection.Abort.http_status": honoured("encode.TestRouteActions"),
	"istio.networking.v1alpha3.HTTPFaultInjection.Abort.grpc_status": honoured("encode.TestRouteActions"),
	"istio.networking.v1alpha3.HTTPFaultInjection.Abort.http2_error": unsupportedDoes(whyIstiodIgnore,
		"the abort is dropped"),
	"istio.networking.v1alpha3.HTTPFaultInjection.Abort.percentage": honoured("encode.TestRouteActions"),
	"istio.networking.v1alpha3.Percent.value":                       honoured("encode.TestRouteActions"),
	"istio.networking.v1alpha3.HTTPMirrorPolicy.destination":        honoured("encode.TestRouteActions"),
	"istio.networking.v1alpha3.HTTPMirrorPolicy.percentage":         honoured("encode.TestRouteActions"),
	"istio.networking.v1alpha3.CorsPolicy.allow_origin":             honoured("engine.TestScenarios/ledger-route-policy"),
	"istio.networking.v1alpha3.CorsPolicy.allow_origins":            honoured("encode.TestRouteActions"),
	"istio.networking.v1alpha3.CorsPolicy.allow_methods":            honoured("encode.TestRouteActions"),
	"istio.networking.v1alpha3.CorsPolicy.allow_headers":            honoured("encode.TestRouteActions"),
	"istio.networking.v1alpha3.CorsPolicy.expose_headers":           honoured("encode.TestRouteActions"),
	"istio.networking.v1alpha3.CorsPolicy.max_age":                  honoured("encode.TestRouteActions"),
	"istio.networking.v1alpha3.CorsPolicy.allow_credentials":        honoured("encode.TestRouteActions"),
	"istio.networking.v1alpha3.CorsPolicy.unmatched_preflights":     honoured("engine.TestScenarios/ledger-route-policy"),

	"istio.networking.v1alpha3.TLSRoute.match":                         honoured("encode.TestOutboundListenerVirtualServiceRoutes"),
	"istio.networking.v1alpha3.TLSRoute.route":                         honoured("encode.TestOutboundListenerVirtualServiceRoutes"),
	"istio.networking.v1alpha3.TLSMatchAttributes.sni_hosts":           honoured("encode.TestOutboundListenerVirtualServiceRoutes"),
	"istio.networking.v1alpha3.TLSMatchAttributes.destination_subnets": honoured("encode.TestOutboundListenerVirtualServiceRoutes"),
	"istio.networking.v1alpha3.TLSMatchAttributes.port":                honoured("engine.TestScenarios/ledger-tcp-routes"),
	"istio.networking.v1alpha3.TLSMatchAttributes.source_labels":       honoured("rules.TestVirtualServicesMatchIstiod"),
	"istio.networking.v1alpha3.TLSMatchAttributes.gateways":            honoured("engine.TestScenarios/ledger-tcp-routes"),
	"istio.networking.v1alpha3.TLSMatchAttributes.source_namespace":    honoured("engine.TestScenarios/ledger-tcp-routes"),
	"istio.networking.v1alpha3.TCPRoute.match":                         honoured("encode.TestOutboundListenerVirtualServiceRoutes"),
	"istio.networking.v1alpha3.TCPRoute.route":                         honoured("encode.TestOutboundListenerVirtualServiceRoutes"),
	"istio.networking.v1alpha3.L4MatchAttributes.destination_subnets": honoured(
		"encode.TestOutboundListenerVirtualServiceRoutes"),
	"istio.networking.v1alpha3.L4MatchAttributes.port": honoured("engine.TestScenarios/ledger-tcp-routes"),
	"istio.networking.v1alpha3.L4MatchAttributes.source_subnet": unsupported(
		"matching on the client's subnet is not implemented"),
	"istio.networking.v1alpha3.L4MatchAttributes.source_labels":    honoured("rules.TestVirtualServiceSourceLabels"),
	"istio.networking.v1alpha3.L4MatchAttributes.gateways":         honoured("engine.TestScenarios/ledger-tcp-routes"),
	"istio.networking.v1alpha3.L4MatchAttributes.source_namespace": honoured("engine.TestScenarios/ledger-tcp-routes"),

	// DestinationRule
	"istio.networking.v1alpha3.DestinationRule.host":              honoured("rules.TestBuildClustersDestinationRules"),
	"istio.networking.v1alpha3.DestinationRule.traffic_policy":    honoured("encode.TestClusterDestinationRule"),
	"istio.networking.v1alpha3.DestinationRule.subsets":           honoured("rules.TestBuildClustersDestinationRules"),
	"istio.networking.v1alpha3.DestinationRule.export_to":         honoured("rules.TestDestinationRuleLookup"),
	"istio.networking.v1alpha3.DestinationRule.workload_selector": honoured("rules.TestDestinationRuleWorkloadSelectorMatchesIstiod"),
	"istio.networking.v1alpha3.Subset.name":                       honoured("rules.TestBuildEndpointsSubset"),
	"istio.networking.v1alpha3.Subset.labels":                     honoured("rules.TestBuildEndpointsSubset"),
	"istio.networking.v1alpha3.Subset.traffic_policy":             honoured("encode.TestClusterDestinationRule"),

	"istio.networking.v1alpha3.TrafficPolicy.load_balancer":                   honoured("encode.TestClusterDestinationRule"),
	"istio.networking.v1alpha3.TrafficPolicy.connection_pool":                 honoured("encode.TestClusterDestinationRule"),
	"istio.networking.v1alpha3.TrafficPolicy.outlier_detection":               honoured("encode.TestClusterDestinationRule"),
	"istio.networking.v1alpha3.TrafficPolicy.tls":                             honoured("encode.TestClusterDestinationRule"),
	"istio.networking.v1alpha3.TrafficPolicy.port_level_settings":             honoured("encode.TestClusterDestinationRule"),
	"istio.networking.v1alpha3.TrafficPolicy.tunnel":                          honoured("rules.TestDestinationRuleTunnelMatchesIstiod"),
	"istio.networking.v1alpha3.TrafficPolicy.TunnelSettings.protocol":         honoured("rules.TestDestinationRuleTunnelMatchesIstiod"),
	"istio.networking.v1alpha3.TrafficPolicy.TunnelSettings.target_host":      honoured("rules.TestDestinationRuleTunnelMatchesIstiod"),
	"istio.networking.v1alpha3.TrafficPolicy.TunnelSettings.target_port":      honoured("rules.TestDestinationRuleTunnelMatchesIstiod"),
	"istio.networking.v1alpha3.TrafficPolicy.proxy_protocol":                  honoured("encode.TestClusterDestinationRule"),
	"istio.networking.v1alpha3.TrafficPolicy.retry_budget":                    honoured("encode.TestClusterDestinationRule"),
	"istio.networking.v1alpha3.TrafficPolicy.PortTrafficPolicy.port":          honoured("encode.TestClusterDestinationRule"),
	"istio.networking.v1alpha3.TrafficPolicy.PortTrafficPolicy.load_balancer": honoured("encode.TestClusterDestinationRule"),
	"istio.networking.v1alpha3.TrafficPolicy.PortTrafficPolicy.connection_pool": honoured(
		"encode.TestClusterDestinationRule"),
	"istio.networking.v1alpha3.TrafficPolicy.PortTrafficPolicy.outlier_detection": honoured(
		"encode.TestClusterDestinationRule"),
	"istio.networking.v1alpha3.TrafficPolicy.PortTrafficPolicy.tls":             honoured("encode.TestClusterDestinationRule"),
	"istio.networking.v1alpha3.TrafficPolicy.ProxyProtocol.version":             honoured("encode.TestClusterDestinationRule"),
	"istio.networking.v1alpha3.TrafficPolicy.RetryBudget.percent":               honoured("engine.TestScenarios/ledger-destination-policy"),
	"istio.networking.v1alpha3.TrafficPolicy.RetryBudget.min_retry_concurrency": honoured("encode.TestClusterDestinationRule"),
	"istio.networking.v1alpha3.TrafficPolicy.RetryBudget.budget_interval":       honoured("engine.TestScenarios/ledger-destination-policy"),

	"istio.networking.v1alpha3.LoadBalancerSettings.simple":          honoured("encode.TestClusterDestinationRule"),
	"istio.networking.v1alpha3.LoadBalancerSettings.consistent_hash": honoured("encode.TestRouteHashPolicy"),
	"istio.networking.v1alpha3.LoadBalancerSettings.locality_lb_setting": honoured(
		"encode.TestEndpointsLocality"),
	"istio.networking.v1alpha3.LoadBalancerSettings.zone_aware_lb_setting": unsupported(
		"zone-aware load balancing is not implemented; use localityLbSetting"),
	"istio.networking.v1alpha3.LoadBalancerSettings.warmup_duration_secs": honoured(
		"engine.TestScenarios/ledger-destination-policy"),
	"istio.networking.v1alpha3.LoadBalancerSettings.warmup":                            honoured("encode.TestClusterDestinationRule"),
	"istio.networking.v1alpha3.WarmupConfiguration.duration":                           honoured("encode.TestClusterDestinationRule"),
	"istio.networking.v1alpha3.WarmupConfiguration.minimum_percent":                    honoured("engine.TestScenarios/ledger-destination-policy"),
	"istio.networking.v1alpha3.WarmupConfiguration.aggression":                         honoured("encode.TestClusterDestinationRule"),
	"istio.networking.v1alpha3.LoadBalancerSettings.ConsistentHashLB.http_header_name": honoured("encode.TestRouteHashPolicy"),
	"istio.networking.v1alpha3.LoadBalancerSettings.ConsistentHashLB.http_cookie":      honoured("engine.TestScenarios/ledger-destination-policy"),
	"istio.networking.v1alpha3.LoadBalancerSettings.ConsistentHashLB.use_source_ip":    honoured("encode.TestRouteHashPolicy"),
	"istio.networking.v1alpha3.LoadBalancerSettings.ConsistentHashLB.http_query_parameter_name": honoured(
		"engine.TestScenarios/ledger-destination-policy"),
	"istio.networking.v1alpha3.LoadBalancerSettings.ConsistentHashLB.ring_hash":         honoured("encode.TestClusterDestinationRule"),
	"istio.networking.v1alpha3.LoadBalancerSettings.ConsistentHashLB.maglev":            honoured("encode.TestClusterDestinationRule"),
	"istio.networking.v1alpha3.LoadBalancerSettings.ConsistentHashLB.minimum_ring_size": honoured("encode.TestClusterDestinationRule"),
	"istio.networking.v1alpha3.LoadBalancerSettings.ConsistentHashLB.RingHash.minimum_ring_size": honoured(
		"encode.TestClusterDestinationRule"),
	"istio.networking.v1alpha3.LoadBalancerSettings.ConsistentHashLB.MagLev.table_size": honoured(
		"encode.TestClusterDestinationRule"),
	"istio.networking.v1alpha3.LoadBalancerSettings.ConsistentHashLB.HTTPCookie.name": honoured(
		"engine.TestScenarios/ledger-destination-policy"),
	"istio.networking.v1alpha3.LoadBalancerSettings.ConsistentHashLB.HTTPCookie.path": honoured(
		"engine.TestScenarios/ledger-destination-policy"),
	"istio.networking.v1alpha3.LoadBalancerSettings.ConsistentHashLB.HTTPCookie.ttl": honoured(
		"engine.TestScenarios/ledger-destination-policy"),
	"istio.networking.v1alpha3.LoadBalancerSettings.ConsistentHashLB.HTTPCookie.attributes": honoured(
		"engine.TestScenarios/ledger-destination-policy"),
	"istio.networking.v1alpha3.LoadBalancerSettings.ConsistentHashLB.HTTPCookie.Attribute.name": honoured(
		"engine.TestScenarios/ledger-destination-policy"),
	"istio.networking.v1alpha3.LoadBalancerSettings.ConsistentHashLB.HTTPCookie.Attribute.value": honoured(
		"engine.TestScenarios/ledger-destination-policy"),

	"istio.networking.v1alpha3.LocalityLoadBalancerSetting.distribute":        honoured("encode.TestEndpointsLocality"),
	"istio.networking.v1alpha3.LocalityLoadBalancerSetting.failover":          honoured("encode.TestEndpointsLocality"),
	"istio.networking.v1alpha3.LocalityLoadBalancerSetting.failover_priority": partial("engine.TestScenarios/istiod-dr-failoverpriority", "EDS clusters as istiod; DNS-resolved clusters (endpoints inline in CDS) get no priorities yet"),
	"istio.networking.v1alpha3.LocalityLoadBalancerSetting.enabled": honoured(
		"engine.TestScenarios/ledger-destination-policy"),
	"istio.networking.v1alpha3.LocalityLoadBalancerSetting.Distribute.from": honoured("encode.TestEndpointsLocality"),
	"istio.networking.v1alpha3.LocalityLoadBalancerSetting.Distribute.to":   honoured("encode.TestEndpointsLocality"),
	"istio.networking.v1alpha3.LocalityLoadBalancerSetting.Failover.from":   honoured("encode.TestEndpointsLocality"),
	"istio.networking.v1alpha3.LocalityLoadBalancerSetting.Failover.to":     honoured("encode.TestEndpointsLocality"),

	"istio.networking.v1alpha3.ConnectionPoolSettings.tcp":  honoured("encode.TestClusterDestinationRule"),
	"istio.networking.v1alpha3.ConnectionPoolSettings.http": honoured("encode.TestClusterDestinationRule"),
	"istio.networking.v1alpha3.ConnectionPoolSettings.TCPSettings.max_connections": honoured(
		"encode.TestClusterDestinationRule"),
	"istio.networking.v1alpha3.ConnectionPoolSettings.TCPSettings.connect_timeout": honoured(
		"encode.TestClusterDestinationRule"),
	"istio.networking.v1alpha3.ConnectionPoolSettings.TCPSettings.tcp_keepalive": honoured(
		"encode.TestClusterDestinationRule"),
	"istio.networking.v1alpha3.ConnectionPoolSettings.TCPSettings.max_connection_duration": honoured(
		"encode.TestOutboundListenerDestinationRule"),
	"istio.networking.v1alpha3.ConnectionPoolSettings.TCPSettings.idle_timeout": honoured(
		"encode.TestOutboundListenerDestinationRule"),
	"istio.networking.v1alpha3.ConnectionPoolSettings.TCPSettings.TcpKeepalive.probes": honoured(
		"encode.TestClusterDestinationRule"),
	"istio.networking.v1alpha3.ConnectionPoolSettings.TCPSettings.TcpKeepalive.time": honoured(
		"encode.TestClusterDestinationRule"),
	"istio.networking.v1alpha3.ConnectionPoolSettings.TCPSettings.TcpKeepalive.interval": honoured(
		"encode.TestClusterDestinationRule"),
	"istio.networking.v1alpha3.ConnectionPoolSettings.HTTPSettings.http1_max_pending_requests": honoured(
		"encode.TestClusterDestinationRule"),
	"istio.networking.v1alpha3.ConnectionPoolSettings.HTTPSettings.http2_max_requests": honoured(
		"encode.TestClusterDestinationRule"),
	"istio.networking.v1alpha3.ConnectionPoolSettings.HTTPSettings.max_requests_per_connection": honoured(
		"encode.TestClusterDestinationRule"),
	"istio.networking.v1alpha3.ConnectionPoolSettings.HTTPSettings.max_retries": honoured(
		"encode.TestClusterDestinationRule"),
	"istio.networking.v1alpha3.ConnectionPoolSettings.HTTPSettings.idle_timeout": honoured(
		"encode.TestClusterDestinationRule"),
	"istio.networking.v1alpha3.ConnectionPoolSettings.HTTPSettings.h2_upgrade_policy": honoured(
		"encode.TestClusterDestinationRule"),
	"istio.networking.v1alpha3.ConnectionPoolSettings.HTTPSettings.use_client_protocol": honoured(
		"encode.TestClusterDestinationRule"),
	"istio.networking.v1alpha3.ConnectionPoolSettings.HTTPSettings.max_concurrent_streams": honoured(
		"encode.TestClusterDestinationRule"),
	"istio.networking.v1alpha3.ConnectionPoolSettings.HTTPSettings.http2_keep_alive": honoured(
		"engine.TestScenarios/ledger-destination-policy"),
	"istio.networking.v1alpha3.ConnectionPoolSettings.HTTPSettings.ConnectionKeepalive.interval": honoured(
		"engine.TestScenarios/ledger-destination-policy"),
	"istio.networking.v1alpha3.ConnectionPoolSettings.HTTPSettings.ConnectionKeepalive.timeout": honoured(
		"engine.TestScenarios/ledger-destination-policy"),

	"istio.networking.v1alpha3.OutlierDetection.consecutive_errors": unsupported(
		"deprecated; use consecutive5xxErrors (" + whyIstiodIgnore + ")"),
	"istio.networking.v1alpha3.OutlierDetection.split_external_local_origin_errors": honoured(
		"encode.TestClusterDestinationRule"),
	"istio.networking.v1alpha3.OutlierDetection.consecutive_local_origin_failures": honoured(
		"encode.TestClusterDestinationRule"),
	"istio.networking.v1alpha3.OutlierDetection.consecutive_gateway_errors": honoured("encode.TestClusterDestinationRule"),
	"istio.networking.v1alpha3.OutlierDetection.consecutive_5xx_errors":     honoured("encode.TestClusterDestinationRule"),
	"istio.networking.v1alpha3.OutlierDetection.interval":                   honoured("encode.TestClusterDestinationRule"),
	"istio.networking.v1alpha3.OutlierDetection.base_ejection_time":         honoured("encode.TestClusterDestinationRule"),
	"istio.networking.v1alpha3.OutlierDetection.max_ejection_percent":       honoured("encode.TestClusterDestinationRule"),
	"istio.networking.v1alpha3.OutlierDetection.min_health_percent":         honoured("encode.TestClusterDestinationRule"),
	"istio.networking.v1alpha3.OutlierDetection.outlier_detection_http_error_codes": honoured(
		"encode.TestClusterDestinationRule"),

	"istio.networking.v1alpha3.ClientTLSSettings.mode":                 honoured("encode.TestClusterDestinationRule"),
	"istio.networking.v1alpha3.ClientTLSSettings.client_certificate":   honoured("encode.TestClusterDestinationRule"),
	"istio.networking.v1alpha3.ClientTLSSettings.private_key":          honoured("encode.TestClusterDestinationRule"),
	"istio.networking.v1alpha3.ClientTLSSettings.ca_certificates":      honoured("encode.TestClusterDestinationRule"),
	"istio.networking.v1alpha3.ClientTLSSettings.credential_name":      honoured("encode.TestClusterDestinationRule"),
	"istio.networking.v1alpha3.ClientTLSSettings.subject_alt_names":    honoured("encode.TestClusterDestinationRule"),
	"istio.networking.v1alpha3.ClientTLSSettings.sni":                  honoured("encode.TestClusterDestinationRule"),
	"istio.networking.v1alpha3.ClientTLSSettings.insecure_skip_verify": honoured("encode.TestClusterDestinationRule"),
	"istio.networking.v1alpha3.ClientTLSSettings.ca_crl":               honoured("engine.TestScenarios/ledger-destination-policy"),

	// Gateway
	"istio.networking.v1alpha3.Gateway.servers":  honoured("encode.TestGatewayListenerComposed"),
	"istio.networking.v1alpha3.Gateway.selector": honoured("engine.TestScenarios/gateway-routes"),
	"istio.networking.v1alpha3.Server.port":      honoured("encode.TestGatewayListenerComposed"),
	"istio.networking.v1alpha3.Server.bind": unsupportedDoes(
		"binding a gateway listener to one address is not implemented (only the route name carries it)",
		"the listener listens on every address"),
	"istio.networking.v1alpha3.Server.hosts": honoured("rules.TestGatewayVirtualHostsShareRoutesNotHosts"),
	"istio.networking.v1alpha3.Server.tls":   honoured("encode.TestGatewayListenerComposed"),
	"istio.networking.v1alpha3.Server.default_endpoint": unsupported(
		"a gateway forwards by its routes; " + whyIstiodIgnore),
	"istio.networking.v1alpha3.Server.name": honouredNote("engine.TestScenarios/ledger-gateway",
		"the stat prefix of an HTTPS server's connection manager"),
	"istio.networking.v1alpha3.Port.number":      honouredNote("engine.TestGatewayTargetPortsMatchIstiod", "a server listens on istiod's translation of its number: the target port of the router's service port of that number (docs/gateways.md)"),
	"istio.networking.v1alpha3.Port.protocol":    honoured("encode.TestGatewayListenerComposed"),
	"istio.networking.v1alpha3.Port.name":        honoured("encode.TestGatewayListenerComposed"),
	"istio.networking.v1alpha3.Port.target_port": unsupported("deprecated: it has no effect on a Gateway (validation rejects it)"),

	"istio.networking.v1alpha3.ServerTLSSettings.https_redirect":                    honoured("rules.TestGatewayVirtualHostsShareRoutesNotHosts"),
	"istio.networking.v1alpha3.ServerTLSSettings.mode":                              honoured("encode.TestGatewayListenerComposed"),
	"istio.networking.v1alpha3.ServerTLSSettings.server_certificate":                honoured("engine.TestScenarios/ledger-gateway"),
	"istio.networking.v1alpha3.ServerTLSSettings.private_key":                       honoured("engine.TestScenarios/ledger-gateway"),
	"istio.networking.v1alpha3.ServerTLSSettings.ca_certificates":                   honoured("engine.TestScenarios/ledger-gateway"),
	"istio.networking.v1alpha3.ServerTLSSettings.ca_crl":                            honoured("engine.TestScenarios/gw-tls-pinning"),
	"istio.networking.v1alpha3.ServerTLSSettings.credential_name":                   honoured("encode.TestGatewayListenerComposed"),
	"istio.networking.v1alpha3.ServerTLSSettings.credential_names":                  honoured("engine.TestScenarios/ledger-gateway"),
	"istio.networking.v1alpha3.ServerTLSSettings.ca_cert_credential_name":           honoured("engine.TestScenarios/istiod-gw-tls-files"),
	"istio.networking.v1alpha3.ServerTLSSettings.tls_certificates":                  honoured("engine.TestScenarios/istiod-gw-tls-files"),
	"istio.networking.v1alpha3.ServerTLSSettings.TLSCertificate.server_certificate": honoured("engine.TestScenarios/istiod-gw-tls-files"),
	"istio.networking.v1alpha3.ServerTLSSettings.TLSCertificate.private_key":        honoured("engine.TestScenarios/istiod-gw-tls-files"),
	"istio.networking.v1alpha3.ServerTLSSettings.TLSCertificate.ca_certificates":    honoured("engine.TestScenarios/istiod-gw-tls-files"),
	"istio.networking.v1alpha3.ServerTLSSettings.subject_alt_names": honoured(
		"engine.TestScenarios/ledger-gateway"),
	"istio.networking.v1alpha3.ServerTLSSettings.verify_certificate_spki": honoured("engine.TestScenarios/gw-tls-pinning"),
	"istio.networking.v1alpha3.ServerTLSSettings.verify_certificate_hash": honoured("engine.TestScenarios/gw-tls-pinning"),
	"istio.networking.v1alpha3.ServerTLSSettings.min_protocol_version":    honoured("engine.TestScenarios/ledger-gateway"),
	"istio.networking.v1alpha3.ServerTLSSettings.max_protocol_version":    honoured("engine.TestScenarios/ledger-gateway"),
	"istio.networking.v1alpha3.ServerTLSSettings.cipher_suites":           honoured("engine.TestScenarios/ledger-gateway"),
	"istio.networking.v1alpha3.ServerTLSSettings.insecure_skip_verify":    honoured("engine.TestScenarios/istiod-gw-tls-files"),

	// ServiceEntry and WorkloadEntry
	"istio.networking.v1alpha3.ServiceEntry.hosts":             honoured("rules.TestGoldenServiceEntryWorkloadEntry"),
	"istio.networking.v1alpha3.ServiceEntry.addresses":         honoured("rules.TestGoldenServiceEntryWorkloadEntry"),
	"istio.networking.v1alpha3.ServiceEntry.ports":             honoured("rules.TestGoldenServiceEntryWorkloadEntry"),
	"istio.networking.v1alpha3.ServiceEntry.location":          honoured("engine.TestScenarios/ledger-serviceentry"),
	"istio.networking.v1alpha3.ServiceEntry.resolution":        honoured("rules.TestGoldenServiceEntryWorkloadEntry"),
	"istio.networking.v1alpha3.ServiceEntry.endpoints":         honoured("encode.TestEndpointsServiceEntry"),
	"istio.networking.v1alpha3.ServiceEntry.workload_selector": honoured("rules.TestKubernetesServiceSelectsLaterWorkloadEntry"),
	"istio.networking.v1alpha3.ServiceEntry.export_to":         honoured("engine.TestScenarios/ledger-serviceentry"),
	"istio.networking.v1alpha3.ServiceEntry.subject_alt_names": honoured("rules.TestBuildClustersServiceEntrySANs"),
	"istio.networking.v1alpha3.ServicePort.number":             honoured("rules.TestGoldenServiceEntryWorkloadEntry"),
	"istio.networking.v1alpha3.ServicePort.protocol":           honoured("rules.TestGoldenServiceEntryWorkloadEntry"),
	"istio.networking.v1alpha3.ServicePort.name":               honoured("rules.TestGoldenServiceEntryWorkloadEntry"),
	"istio.networking.v1alpha3.ServicePort.target_port":        honoured("rules.TestGoldenServiceEntryWorkloadEntry"),
	"istio.networking.v1alpha3.WorkloadSelector.labels":        honoured("rules.TestKubernetesServiceSelectsLaterWorkloadEntry"),

	"istio.networking.v1alpha3.WorkloadEntry.address":         honoured("rules.TestKubernetesServiceSelectsLaterWorkloadEntry"),
	"istio.networking.v1alpha3.WorkloadEntry.ports":           honoured("rules.TestGoldenServiceEntryWorkloadEntry"),
	"istio.networking.v1alpha3.WorkloadEntry.labels":          honoured("rules.TestKubernetesServiceSelectsLaterWorkloadEntry"),
	"istio.networking.v1alpha3.WorkloadEntry.network":         unsupported(whyMultiNetwork),
	"istio.networking.v1alpha3.WorkloadEntry.locality":        honoured("engine.TestScenarios/ledger-serviceentry"),
	"istio.networking.v1alpha3.WorkloadEntry.weight":          honoured("engine.TestScenarios/ledger-serviceentry"),
	"istio.networking.v1alpha3.WorkloadEntry.service_account": honoured("rules.TestCrossRegistry"),

	// Sidecar
	"istio.networking.v1alpha3.Sidecar.workload_selector": honoured("rules.TestSidecarSelection"),
	"istio.networking.v1alpha3.Sidecar.ingress":           honoured("rules.TestSidecarIngressClasses"),
	"istio.networking.v1alpha3.Sidecar.egress":            honoured("rules.TestSidecarSelection"),
	"istio.networking.v1alpha3.Sidecar.inbound_connection_pool": honoured(
		"rules.TestSidecarIngressClasses"),
	// mode and egressProxy: rules/sidecar.go (Meshes.For, egressProxyCluster).
	"istio.networking.v1alpha3.Sidecar.outbound_traffic_policy":       honoured("engine.TestSidecarEgressProxy"),
	"istio.networking.v1alpha3.IstioIngressListener.port":             honoured("rules.TestSidecarIngressClasses"),
	"istio.networking.v1alpha3.IstioIngressListener.bind":             honoured("rules.TestSidecarIngressClasses"),
	"istio.networking.v1alpha3.IstioIngressListener.capture_mode":     honoured("rules.TestSidecarIngressClasses"),
	"istio.networking.v1alpha3.IstioIngressListener.default_endpoint": honoured("rules.TestSidecarIngressClasses"),
	"istio.networking.v1alpha3.IstioIngressListener.tls": unsupported(
		"terminating TLS on a Sidecar ingress listener is not implemented"),
	"istio.networking.v1alpha3.IstioIngressListener.connection_pool": honoured("rules.TestSidecarIngressClasses"),
	"istio.networking.v1alpha3.SidecarPort.number":                   honoured("rules.TestSidecarIngressClasses"),
	"istio.networking.v1alpha3.SidecarPort.protocol":                 honoured("rules.TestSidecarIngressClasses"),
	"istio.networking.v1alpha3.SidecarPort.name":                     honoured("rules.TestSidecarIngressClasses"),
	"istio.networking.v1alpha3.SidecarPort.target_port":              unsupported("deprecated: it has no effect on a Sidecar (validation rejects it)"),
	"istio.networking.v1alpha3.IstioEgressListener.port":             honoured("engine.TestScenarios/sidecar-egress-port"),
	"istio.networking.v1alpha3.IstioEgressListener.bind":             partial("engine.TestScenarios/sidecar-bind", "an IP address; a unix:// socket address builds no listener yet (istiod builds one)"),
	"istio.networking.v1alpha3.IstioEgressListener.capture_mode":     honoured("engine.TestScenarios/sidecar-bind"),
	"istio.networking.v1alpha3.IstioEgressListener.hosts":            honoured("rules.TestSidecarSelection"),
	"istio.networking.v1alpha3.OutboundTrafficPolicy.mode": honoured(
		"engine.TestSidecarEgressProxy"),
	"istio.networking.v1alpha3.OutboundTrafficPolicy.egress_proxy": honoured(
		"engine.TestSidecarEgressProxy"),
}

// ledgerOverrides classify a field differently in one kind, where a
// message is shared but read differently.
var ledgerOverrides = map[Kind]ledgerTable{
	KindWorkloadEntry: {
		"istio.networking.v1alpha3.WorkloadEntry.weight": unsupported(
			"a WorkloadEntry's weight is not carried to the endpoints of the services selecting it"),
	},
	KindSidecar: {
		// The inbound clusters' pool: no HTTP/2 upgrade on inbound, as in
		// istiod.
		"istio.networking.v1alpha3.ConnectionPoolSettings.HTTPSettings.h2_upgrade_policy": unsupported(
			"inbound clusters are never upgraded to HTTP/2; " + whyIstiodIgnore),
	},
}

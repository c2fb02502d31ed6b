package encode

import (
	"github.com/pilotfish-mesh/pilotfish/index"
	"strconv"
	"strings"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcher "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	networking "istio.io/api/networking/v1alpha3"
)

// Names istiod gives the pieces of outbound HTTP routing.
const (
	defaultRouteName   = "default"
	meshGatewayName    = "mesh"
	passthroughCluster = "PassthroughCluster"
	blackholeCluster   = "BlackHoleCluster"
	faultFilterName    = "envoy.filters.http.fault"
	corsFilterName     = "envoy.filters.http.cors"
)

// rtNoTimeout is istiod's "no timeout" (0s), shared read-only.
var rtNoTimeout = durationpb.New(0)

// defaultOutboundRoute is istiod's route for a service no VirtualService
// routes (BuildDefaultHTTPOutboundRoute): everything to the service's
// cluster, no timeout, the default retry policy.
func defaultOutboundRoute(cluster, host string, port uint32, retry *HTTPRetry) *route.Route {
	return &route.Route{
		Name:  defaultRouteName,
		Match: &route.RouteMatch{PathSpecifier: &route.RouteMatch_Prefix{Prefix: "/"}},
		Action: &route.Route_Route{Route: &route.RouteAction{
			ClusterSpecifier: &route.RouteAction_Cluster{Cluster: cluster},
			Timeout:          rtNoTimeout,
			RetryPolicy:      retry.policy(false),
			MaxGrpcTimeout:   rtNoTimeout,
		}},
		Decorator: &route.Decorator{Operation: host + ":" + strconv.FormatUint(uint64(port), 10) + "/*"},
	}
}

// routeCtx translates one VirtualService's HTTP routes for one virtual host.
type routeCtx struct {
	k     *VirtualHostKey
	names index.Names
	vs    *networking.VirtualService
	meta  *core.Metadata
	// gw is set when translating for a gateway (gateway_route.go).
	gw *gwRoute
	// omitMeta leaves out the routes' metadata: the gateway encoder writes
	// it (gateway_route_compose.go).
	omitMeta bool
}

// virtualServiceRoutes is istiod's BuildHTTPRoutesForVirtualService for a
// sidecar (gateway "mesh"): one route per match, stopping after the first
// catch-all.
func (rc *routeCtx) virtualServiceRoutes() []*route.Route {
	var out []*route.Route
	rc.eachRoute(func(in *networking.HTTPRoute, m *networking.HTTPMatchRequest) (bool, bool) {
		r := rc.translate(in, m)
		if r == nil {
			return false, false
		}
		out = append(out, r)
		return true, rtIsCatchAll(r)
	})
	return out
}

// eachRoute walks the (route, match) pairs of the VirtualService in
// BuildHTTPRoutesForVirtualService's order: emit translates one and reports
// whether it made a route and whether that route is a catch-all, after
// which the walk stops.
func (rc *routeCtx) eachRoute(emit func(in *networking.HTTPRoute, m *networking.HTTPMatchRequest) (ok, catchAll bool)) {
	for _, in := range rc.vs.GetHttp() {
		if in.GetDelegate() != nil {
			// Delegation is resolved by merging VirtualServices, which
			// pilotfish does not do yet: the delegating route is dropped.
			continue
		}
		catchall := false
		if len(in.GetMatch()) == 0 {
			emit(in, nil)
			catchall = true
		} else {
			for _, m := range in.GetMatch() {
				if ok, ca := emit(in, m); ok && ca {
					catchall = true
					break
				}
			}
		}
		if catchall {
			break
		}
	}
}

// sourceMatches is istiod's sourceMatchHTTP for a sidecar: a match naming
// gateways applies when "mesh" is one of them (its sourceLabels and
// sourceNamespace are then not looked at); otherwise its sourceLabels
// must be among the proxy's labels and its sourceNamespace the proxy's.
func (rc *routeCtx) sourceMatches(m *networking.HTTPMatchRequest) bool {
	if m == nil {
		return true
	}
	if rc.gw != nil {
		return rc.gw.matches(m, rc.vsNamespace(), rc.k.Namespace)
	}
	if len(m.GetGateways()) > 0 {
		for _, g := range m.GetGateways() {
			if g == meshGatewayName {
				return true
			}
		}
		return false
	}
	if !labelsHold(rc.k.SourceLabels, m.GetSourceLabels()) {
		return false
	}
	return m.GetSourceNamespace() == "" || m.GetSourceNamespace() == rc.k.Namespace
}

// applies reports whether a match applies to this proxy and port.
func (rc *routeCtx) applies(m *networking.HTTPMatchRequest) bool {
	if m != nil && m.GetPort() != 0 && m.GetPort() != rc.k.Port {
		return false
	}
	return rc.sourceMatches(m)
}

// rtRouteName is a translated route's name: the route's, then the match's.
func rtRouteName(in *networking.HTTPRoute, m *networking.HTTPMatchRequest) string {
	if m.GetName() != "" {
		return in.GetName() + "." + m.GetName()
	}
	return in.GetName()
}

// translate is istiod's TranslateRoute for one (route, match) pair.
func (rc *routeCtx) translate(in *networking.HTTPRoute, m *networking.HTTPMatchRequest) *route.Route {
	if !rc.applies(m) {
		return nil
	}
	name := rtRouteName(in, m)
	blk := &rtBlock{}
	out := &blk.route
	out.Name, out.Match = name, rtTranslateMatch(m)
	if !rc.omitMeta {
		out.Metadata = rc.metadata()
	}
	if m.GetStatPrefix() != "" {
		out.StatPrefix = m.GetStatPrefix()
	}
	authority := ""
	if in.GetHeaders() != nil {
		ops := rtHeaderOps(in.GetHeaders())
		out.RequestHeadersToAdd = ops.reqAdd
		out.ResponseHeadersToAdd = ops.respAdd
		out.RequestHeadersToRemove = ops.reqRemove
		out.ResponseHeadersToRemove = ops.respRemove
		authority = ops.authority
	}
	switch {
	case in.GetRedirect() != nil:
		rtApplyRedirect(out, in.GetRedirect(), rc.k.Port)
	case in.GetDirectResponse() != nil:
		rtApplyDirectResponse(out, in.GetDirectResponse())
	default:
		rc.applyDestination(blk, in, authority)
	}
	blk.decorator.Operation = rc.operation(out)
	out.Decorator = &blk.decorator
	if in.GetFault() != nil || in.GetCorsPolicy() != nil {
		out.TypedPerFilterConfig = map[string]*anypb.Any{}
	}
	if in.GetFault() != nil {
		if f := rtTranslateFault(in.GetFault()); f != nil {
			out.TypedPerFilterConfig[faultFilterName] = rtAny(f)
		}
	}
	if in.GetCorsPolicy() != nil {
		out.TypedPerFilterConfig[corsFilterName] = rtAny(rtTranslateCORS(in.GetCorsPolicy()))
	}
	return out
}

// rtBlock holds the messages most translated routes have, allocated
// together: a thousand-route virtual host makes a thousand of each.
type rtBlock struct {
	route       route.Route
	decorator   route.Decorator
	action      route.RouteAction
	actionRoute route.Route_Route
	cluster     route.RouteAction_Cluster
}

// applyDestination is istiod's applyHTTPRouteDestination.
func (rc *routeCtx) applyDestination(blk *rtBlock, in *networking.HTTPRoute, authority string) {
	out, action := &blk.route, &blk.action
	rc.setTimeout(action, in.GetTimeout())
	blk.actionRoute.Route = action
	out.Action = &blk.actionRoute
	if rw := in.GetRewrite(); rw != nil {
		if rr := rw.GetUriRegexRewrite(); rr != nil {
			action.RegexRewrite = &matcher.RegexMatchAndSubstitute{
				Pattern:      &matcher.RegexMatcher{Regex: rr.GetMatch()},
				Substitution: rr.GetRewrite(),
			}
		} else if rw.GetUri() != "" {
			action.PrefixRewrite = rw.GetUri()
		}
		if rw.GetAuthority() != "" {
			authority = rw.GetAuthority()
		}
	}
	if authority != "" {
		action.HostRewriteSpecifier = &route.RouteAction_HostRewriteLiteral{HostRewriteLiteral: authority}
	}
	if in.GetMirror() != nil {
		if mp := rtMirrorPercent(in); mp != nil {
			action.RequestMirrorPolicies = append(action.RequestMirrorPolicies,
				rtMirrorPolicy(rc.destinationCluster(in.GetMirror()), mp))
		}
	}
	for _, mirror := range in.GetMirrors() {
		if mp := rtMirrorPercentByPolicy(mirror); mp != nil && mirror.GetDestination() != nil {
			action.RequestMirrorPolicies = append(action.RequestMirrorPolicies,
				rtMirrorPolicy(rc.destinationCluster(mirror.GetDestination()), mp))
		}
	}
	consistentHash := false
	if len(in.GetRoute()) == 1 {
		dst := in.GetRoute()[0]
		blk.cluster.Cluster = rc.destinationCluster(dst.GetDestination())
		action.ClusterSpecifier = &blk.cluster
		if hp := rtHashPolicy(rc.destinationConsistentHash(dst.GetDestination())); hp != nil {
			action.HashPolicy = append(action.HashPolicy, hp)
			consistentHash = true
		}
		if dst.GetHeaders() != nil {
			ops := rtHeaderOps(dst.GetHeaders())
			out.RequestHeadersToAdd = append(out.RequestHeadersToAdd, ops.reqAdd...)
			out.RequestHeadersToRemove = append(out.RequestHeadersToRemove, ops.reqRemove...)
			out.ResponseHeadersToAdd = append(out.ResponseHeadersToAdd, ops.respAdd...)
			out.ResponseHeadersToRemove = append(out.ResponseHeadersToRemove, ops.respRemove...)
			if ops.authority != "" && action.HostRewriteSpecifier == nil {
				action.HostRewriteSpecifier = &route.RouteAction_HostRewriteLiteral{HostRewriteLiteral: ops.authority}
			}
		}
	} else {
		weighted := make([]*route.WeightedCluster_ClusterWeight, 0, len(in.GetRoute()))
		for _, dst := range in.GetRoute() {
			if dst.GetWeight() == 0 {
				continue // a zero weight is dropped when there are others
			}
			cw := &route.WeightedCluster_ClusterWeight{
				Name:   rc.destinationCluster(dst.GetDestination()),
				Weight: wrapperspb.UInt32(uint32(dst.GetWeight())),
			}
			if dst.GetHeaders() != nil {
				ops := rtHeaderOps(dst.GetHeaders())
				cw.RequestHeadersToAdd = ops.reqAdd
				cw.RequestHeadersToRemove = ops.reqRemove
				cw.ResponseHeadersToAdd = ops.respAdd
				cw.ResponseHeadersToRemove = ops.respRemove
				if ops.authority != "" {
					cw.HostRewriteSpecifier = &route.WeightedCluster_ClusterWeight_HostRewriteLiteral{HostRewriteLiteral: ops.authority}
				}
			}
			weighted = append(weighted, cw)
			if hp := rtHashPolicy(rc.destinationConsistentHash(dst.GetDestination())); hp != nil {
				action.HashPolicy = append(action.HashPolicy, hp)
			}
		}
		action.ClusterSpecifier = &route.RouteAction_WeightedClusters{WeightedClusters: &route.WeightedCluster{Clusters: weighted}}
	}
	retries := in.GetRetries()
	if retries == nil {
		retries = rc.k.Retry.spec() // the mesh's default, nil for istiod's built-in
	}
	action.RetryPolicy = rtRetryPolicy(retries, consistentHash)
}

// setTimeout is istiod's setTimeout: the route timeout (0s: none) and,
// for Envoy, max_grpc_timeout equal to it; proxyless gRPC reads
// max_stream_duration instead.
func (rc *routeCtx) setTimeout(action *route.RouteAction, t *durationpb.Duration) {
	action.Timeout = rtNoTimeout
	if t != nil {
		action.Timeout = t
	}
	if rc.k.Type == ProxyGRPC {
		action.MaxStreamDuration = &route.RouteAction_MaxStreamDuration{MaxStreamDuration: action.Timeout}
		return
	}
	action.MaxGrpcTimeout = action.Timeout
	if action.Timeout.AsDuration() == 0 {
		action.MaxGrpcTimeout = rtNoTimeout
	}
}

// destinationCluster is istiod's GetDestinationCluster on an outbound
// route: the destination's port, else the route's port; an ExternalName
// destination is named after its target.
func (rc *routeCtx) destinationCluster(d *networking.Destination) string {
	if d.GetHost() == "" {
		return "UnknownService"
	}
	host := rtResolveHost(d.GetHost(), rc.vsNamespace(), rc.k.DomainSuffix)
	for _, a := range rc.k.Destinations {
		if a.ExternalName != 0 && rc.names.String(a.Key.Host) == host && a.PortByNumber(rc.k.Port) != nil {
			host = rc.names.String(a.ExternalName)
			break
		}
	}
	port := rc.k.Port
	if d.GetPort() != nil {
		port = d.GetPort().GetNumber()
	} else if p, ok := rc.gw.onlyPort(host); ok {
		port = p
	}
	return outboundClusterName(port, d.GetSubset(), host)
}

func (rc *routeCtx) vsNamespace() string {
	return rc.names.String(rc.k.VirtualService.Key.Namespace)
}

// metadata is istiod's config-info route metadata, shared by the routes of
// one virtual host.
func (rc *routeCtx) metadata() *core.Metadata {
	if rc.meta == nil {
		rc.meta = rtConfigMetadata("virtual-service", rc.vsNamespace(), rc.names.String(rc.k.VirtualService.Key.Name))
	}
	return rc.meta
}

// rtConfigMetadata is istiod's BuildConfigInfoMetadata. The API version is
// always v1: pilotfish does not keep the version a manifest was written in.
func rtConfigMetadata(kebabKind, ns, name string) *core.Metadata {
	path := rtConfigPath(kebabKind, ns, name)
	return &core.Metadata{FilterMetadata: map[string]*structpb.Struct{
		"istio": {Fields: map[string]*structpb.Value{"config": structpb.NewStringValue(path)}},
	}}
}

// rtConfigPath is the config path rtConfigMetadata holds.
func rtConfigPath(kebabKind, ns, name string) string {
	return "/apis/networking.istio.io/v1/namespaces/" + ns + "/" + kebabKind + "/" + name
}

// operation is istiod's GetRouteOperation: "host:port/path" for a single
// destination, else "vsname:port/path".
func (rc *routeCtx) operation(r *route.Route) string {
	// path, then suffix: a prefix is written "PREFIX*"; one concatenation
	// builds the whole operation.
	path, suffix := "/*", ""
	switch ps := r.GetMatch().GetPathSpecifier().(type) {
	case *route.RouteMatch_Prefix:
		path, suffix = ps.Prefix, "*"
	case *route.RouteMatch_Path:
		path = ps.Path
	case *route.RouteMatch_SafeRegex:
		path = ps.SafeRegex.GetRegex()
	}
	if c, ok := strings.CutPrefix(r.GetRoute().GetCluster(), "outbound|"); ok {
		// outbound|PORT|SUBSET|HOST
		if port, rest, ok := strings.Cut(c, "|"); ok {
			if _, host, ok := strings.Cut(rest, "|"); ok {
				return host + ":" + port + path + suffix
			}
		}
	}
	return rc.names.String(rc.k.VirtualService.Key.Name) + ":" + strconv.FormatUint(uint64(rc.k.Port), 10) + path + suffix
}

// rtResolveHost is istiod's ResolveShortnameToFQDN: a name without a dot is
// a Kubernetes service in the config's namespace.
func rtResolveHost(h, ns, suffix string) string {
	if h == "*" || strings.IndexByte(h, '.') >= 0 {
		return h
	}
	if isIPLiteral(h) {
		return h
	}
	return h + "." + ns + ".svc." + suffix
}

// rtIsCatchAll is istiod's IsCatchAllRoute.
func rtIsCatchAll(r *route.Route) bool {
	m := r.GetMatch()
	catchall := false
	switch ps := m.GetPathSpecifier().(type) {
	case *route.RouteMatch_Prefix:
		catchall = ps.Prefix == "/"
	case *route.RouteMatch_PathSeparatedPrefix:
		catchall = ps.PathSeparatedPrefix == "/"
	case *route.RouteMatch_SafeRegex:
		catchall = ps.SafeRegex.GetRegex() == ".*"
	}
	return catchall && len(m.GetHeaders()) == 0 && len(m.GetQueryParameters()) == 0 && len(m.GetDynamicMetadata()) == 0
}

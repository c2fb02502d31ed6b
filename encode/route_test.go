package encode_test

import (
	"testing"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	cors "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/cors/v3"
	fault "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/fault/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/index"
)

func prefixMatch(p string) *networking.HTTPMatchRequest {
	return &networking.HTTPMatchRequest{Uri: &networking.StringMatch{MatchType: &networking.StringMatch_Prefix{Prefix: p}}}
}

func exact(s string) *networking.StringMatch {
	return &networking.StringMatch{MatchType: &networking.StringMatch_Exact{Exact: s}}
}

func dest(host string) []*networking.HTTPRouteDestination {
	return []*networking.HTTPRouteDestination{{Destination: &networking.Destination{Host: host}}}
}

// vsRoutes generates the routes of reviews:9080 under a VirtualService
// with the given HTTP routes.
func vsRoutes(t *testing.T, proxy encode.ProxyType, http ...*networking.HTTPRoute) []*route.Route {
	t.Helper()
	r := newLRRows()
	svc := r.svc("reviews.default.svc.cluster.local", "default", index.OriginKubernetes, []string{"10.0.0.9"}, httpP(9080))
	k := r.vhKey(svc, 9080)
	k.Type = proxy
	k.VirtualService = r.vs("reviews", "default", &networking.VirtualService{Hosts: []string{"reviews"}, Http: http})
	return genVH(t, k).Routes
}

func only(t *testing.T, rs []*route.Route) *route.Route {
	t.Helper()
	if len(rs) != 1 {
		t.Fatalf("got %d routes, want 1: %v", len(rs), rs)
	}
	return rs[0]
}

func TestRouteMatch(t *testing.T) {
	tests := []struct {
		name  string
		match *networking.HTTPMatchRequest
		check func(*testing.T, *route.RouteMatch)
	}{
		{"uri exact", &networking.HTTPMatchRequest{Uri: exact("/login")}, func(t *testing.T, m *route.RouteMatch) {
			if m.GetPath() != "/login" || !m.GetCaseSensitive().GetValue() {
				t.Errorf("match = %v", m)
			}
		}},
		{"uri prefix", prefixMatch("/api"), func(t *testing.T, m *route.RouteMatch) {
			if m.GetPrefix() != "/api" {
				t.Errorf("match = %v", m)
			}
		}},
		{"uri regex, ignore case", &networking.HTTPMatchRequest{IgnoreUriCase: true,
			Uri: &networking.StringMatch{MatchType: &networking.StringMatch_Regex{Regex: "/v[0-9]+/.*"}}}, func(t *testing.T, m *route.RouteMatch) {
			if m.GetSafeRegex().GetRegex() != "/v[0-9]+/.*" || m.GetCaseSensitive().GetValue() {
				t.Errorf("match = %v", m)
			}
		}},
		{"headers sorted, then method and authority", &networking.HTTPMatchRequest{
			Headers: map[string]*networking.StringMatch{
				"x-user": exact("jason"),
				"x-any":  {MatchType: &networking.StringMatch_Regex{Regex: "*"}},
				"x-ver":  {MatchType: &networking.StringMatch_Prefix{Prefix: "v2"}},
			},
			WithoutHeaders: map[string]*networking.StringMatch{"x-debug": exact("1")},
			Method:         exact("GET"),
			Authority:      exact("reviews:9080"),
		}, func(t *testing.T, m *route.RouteMatch) {
			hs := m.GetHeaders()
			names := []string{}
			for _, h := range hs {
				names = append(names, h.Name)
			}
			want := []string{"x-any", "x-debug", "x-user", "x-ver", ":method", ":authority"}
			if len(names) != len(want) {
				t.Fatalf("headers = %v, want %v", names, want)
			}
			for i := range want {
				if names[i] != want[i] {
					t.Fatalf("headers = %v, want %v", names, want)
				}
			}
			if !hs[0].GetPresentMatch() {
				t.Errorf("regex * is a present match: %v", hs[0])
			}
			if !hs[1].InvertMatch || !hs[1].TreatMissingHeaderAsEmpty || hs[1].GetStringMatch().GetExact() != "1" {
				t.Errorf("withoutHeaders = %v", hs[1])
			}
			if hs[3].GetStringMatch().GetPrefix() != "v2" || hs[4].GetStringMatch().GetExact() != "GET" {
				t.Errorf("headers = %v", hs)
			}
		}},
		{"query parameters", &networking.HTTPMatchRequest{QueryParams: map[string]*networking.StringMatch{
			"b": exact("1"), "a": {},
		}}, func(t *testing.T, m *route.RouteMatch) {
			q := m.GetQueryParameters()
			if len(q) != 2 || q[0].Name != "a" || !q[0].GetPresentMatch() || q[1].GetStringMatch().GetExact() != "1" {
				t.Errorf("query = %v", q)
			}
		}},
		{"JWT claim", &networking.HTTPMatchRequest{Headers: map[string]*networking.StringMatch{
			"@request.auth.claims.group": exact("admin"),
		}}, func(t *testing.T, m *route.RouteMatch) {
			dm := m.GetDynamicMetadata()
			if len(dm) != 1 || dm[0].Filter != "envoy.filters.http.jwt_authn" || len(dm[0].Path) != 2 ||
				dm[0].Path[0].GetKey() != "payload" || dm[0].Path[1].GetKey() != "group" {
				t.Errorf("dynamic metadata = %v", dm)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rt := only(t, vsRoutes(t, encode.ProxySidecar, &networking.HTTPRoute{
				Name: "r", Match: []*networking.HTTPMatchRequest{tc.match}, Route: dest("reviews"),
			}))
			tc.check(t, rt.Match)
		})
	}
}

func TestRouteActions(t *testing.T) {
	v1, v2 := &networking.Destination{Host: "reviews", Subset: "v1"}, &networking.Destination{Host: "reviews", Subset: "v2"}
	tests := []struct {
		name  string
		in    *networking.HTTPRoute
		proxy encode.ProxyType
		check func(*testing.T, *route.Route)
	}{
		{"single destination with subset and port", &networking.HTTPRoute{Route: []*networking.HTTPRouteDestination{{
			Destination: &networking.Destination{Host: "ratings", Subset: "v1", Port: &networking.PortSelector{Number: 9090}},
		}}}, encode.ProxySidecar, func(t *testing.T, r *route.Route) {
			if c := r.GetRoute().GetCluster(); c != "outbound|9090|v1|ratings.default.svc.cluster.local" {
				t.Errorf("cluster = %q", c)
			}
			if op := r.GetDecorator().GetOperation(); op != "ratings.default.svc.cluster.local:9090/*" {
				t.Errorf("decorator = %q", op)
			}
		}},
		{"weighted subsets", &networking.HTTPRoute{Route: []*networking.HTTPRouteDestination{
			{Destination: v1, Weight: 75}, {Destination: v2, Weight: 25}, {Destination: v1, Weight: 0},
		}}, encode.ProxySidecar, func(t *testing.T, r *route.Route) {
			w := r.GetRoute().GetWeightedClusters().GetClusters()
			if len(w) != 2 || w[0].Name != "outbound|9080|v1|reviews.default.svc.cluster.local" || w[0].Weight.GetValue() != 75 ||
				w[1].Name != "outbound|9080|v2|reviews.default.svc.cluster.local" || w[1].Weight.GetValue() != 25 {
				t.Errorf("weighted = %v", w)
			}
			if op := r.GetDecorator().GetOperation(); op != "reviews:9080/*" {
				t.Errorf("decorator = %q, want vsname:port/path", op)
			}
		}},
		{"timeout", &networking.HTTPRoute{Route: dest("reviews"), Timeout: durationpb.New(3 * time.Second)}, encode.ProxySidecar,
			func(t *testing.T, r *route.Route) {
				a := r.GetRoute()
				if a.GetTimeout().AsDuration() != 3*time.Second || a.GetMaxGrpcTimeout().AsDuration() != 3*time.Second {
					t.Errorf("timeouts = %v %v", a.GetTimeout(), a.GetMaxGrpcTimeout())
				}
			}},
		{"timeout, proxyless gRPC", &networking.HTTPRoute{Route: dest("reviews"), Timeout: durationpb.New(3 * time.Second)}, encode.ProxyGRPC,
			func(t *testing.T, r *route.Route) {
				a := r.GetRoute()
				if a.GetMaxStreamDuration().GetMaxStreamDuration().AsDuration() != 3*time.Second || a.GetMaxGrpcTimeout() != nil {
					t.Errorf("action = %v", a)
				}
			}},
		{"retries", &networking.HTTPRoute{Route: dest("reviews"), Retries: &networking.HTTPRetry{
			Attempts: 3, PerTryTimeout: durationpb.New(time.Second), RetryOn: "5xx,503,gateway-error",
			RetryRemoteLocalities: wrapperspb.Bool(true), Backoff: durationpb.New(50 * time.Millisecond),
		}}, encode.ProxySidecar, func(t *testing.T, r *route.Route) {
			p := r.GetRoute().GetRetryPolicy()
			if p.GetNumRetries().GetValue() != 3 || p.GetRetryOn() != "5xx,gateway-error,retriable-status-codes" ||
				len(p.GetRetriableStatusCodes()) != 1 || p.GetRetriableStatusCodes()[0] != 503 ||
				p.GetPerTryTimeout().AsDuration() != time.Second || p.GetRetryPriority().GetName() != "envoy.retry_priorities.previous_priorities" ||
				p.GetRetryBackOff().GetBaseInterval().AsDuration() != 50*time.Millisecond || len(p.GetRetryHostPredicate()) != 1 {
				t.Errorf("retry policy = %v", p)
			}
		}},
		{"retries disabled", &networking.HTTPRoute{Route: dest("reviews"), Retries: &networking.HTTPRetry{Attempts: 0}}, encode.ProxySidecar,
			func(t *testing.T, r *route.Route) {
				if r.GetRoute().GetRetryPolicy() != nil {
					t.Errorf("retry policy = %v, want none", r.GetRoute().GetRetryPolicy())
				}
			}},
		{"rewrite uri and authority", &networking.HTTPRoute{Route: dest("reviews"), Rewrite: &networking.HTTPRewrite{Uri: "/v2", Authority: "new.example"}},
			encode.ProxySidecar, func(t *testing.T, r *route.Route) {
				a := r.GetRoute()
				if a.GetPrefixRewrite() != "/v2" || a.GetHostRewriteLiteral() != "new.example" {
					t.Errorf("action = %v", a)
				}
			}},
		{"regex rewrite", &networking.HTTPRoute{Route: dest("reviews"), Rewrite: &networking.HTTPRewrite{
			UriRegexRewrite: &networking.RegexRewrite{Match: "^/old/(.*)", Rewrite: `/new/\1`},
		}}, encode.ProxySidecar, func(t *testing.T, r *route.Route) {
			rr := r.GetRoute().GetRegexRewrite()
			if rr.GetPattern().GetRegex() != "^/old/(.*)" || rr.GetSubstitution() != `/new/\1` {
				t.Errorf("regex rewrite = %v", rr)
			}
		}},
		{"redirect", &networking.HTTPRoute{Redirect: &networking.HTTPRedirect{
			Uri: "/v1/reviews", Authority: "new.example", RedirectCode: 302, Scheme: "https",
			RedirectPort: &networking.HTTPRedirect_Port{Port: 8443},
		}}, encode.ProxySidecar, func(t *testing.T, r *route.Route) {
			rd := r.GetRedirect()
			if rd.GetPathRedirect() != "/v1/reviews" || rd.GetHostRedirect() != "new.example" || rd.GetResponseCode() != route.RedirectAction_FOUND ||
				rd.GetSchemeRedirect() != "https" || rd.GetPortRedirect() != 8443 {
				t.Errorf("redirect = %v", rd)
			}
			if op := r.GetDecorator().GetOperation(); op != "reviews:9080/*" {
				t.Errorf("decorator = %q", op)
			}
		}},
		{"redirect from request port", &networking.HTTPRoute{Redirect: &networking.HTTPRedirect{
			Uri: "/x", RedirectPort: &networking.HTTPRedirect_DerivePort{DerivePort: networking.HTTPRedirect_FROM_REQUEST_PORT},
		}}, encode.ProxySidecar, func(t *testing.T, r *route.Route) {
			if rd := r.GetRedirect(); rd.GetPortRedirect() != 9080 || rd.GetResponseCode() != route.RedirectAction_MOVED_PERMANENTLY {
				t.Errorf("redirect = %v", rd)
			}
		}},
		{"direct response", &networking.HTTPRoute{DirectResponse: &networking.HTTPDirectResponse{
			Status: 418, Body: &networking.HTTPBody{Specifier: &networking.HTTPBody_String_{String_: "teapot"}},
		}}, encode.ProxySidecar, func(t *testing.T, r *route.Route) {
			d := r.GetDirectResponse()
			if d.GetStatus() != 418 || d.GetBody().GetInlineString() != "teapot" {
				t.Errorf("direct response = %v", d)
			}
		}},
		{"mirror", &networking.HTTPRoute{Route: dest("reviews"), Mirror: &networking.Destination{Host: "reviews", Subset: "shadow"},
			MirrorPercentage: &networking.Percent{Value: 12.5}}, encode.ProxySidecar, func(t *testing.T, r *route.Route) {
			m := r.GetRoute().GetRequestMirrorPolicies()
			if len(m) != 1 || m[0].Cluster != "outbound|9080|shadow|reviews.default.svc.cluster.local" ||
				m[0].GetRuntimeFraction().GetDefaultValue().GetNumerator() != 125000 ||
				m[0].GetRuntimeFraction().GetDefaultValue().GetDenominator() != typev3.FractionalPercent_MILLION ||
				m[0].GetTraceSampled().GetValue() {
				t.Errorf("mirror = %v", m)
			}
		}},
		{"mirrors", &networking.HTTPRoute{Route: dest("reviews"), Mirrors: []*networking.HTTPMirrorPolicy{
			{Destination: &networking.Destination{Host: "a.example"}},
			{Destination: &networking.Destination{Host: "b.example"}, Percentage: &networking.Percent{Value: 0}},
		}}, encode.ProxySidecar, func(t *testing.T, r *route.Route) {
			m := r.GetRoute().GetRequestMirrorPolicies()
			if len(m) != 1 || m[0].Cluster != "outbound|9080||a.example" || m[0].GetRuntimeFraction().GetDefaultValue().GetNumerator() != 100 {
				t.Errorf("mirrors = %v", m)
			}
		}},
		{"header manipulation", &networking.HTTPRoute{
			Route: []*networking.HTTPRouteDestination{{Destination: &networking.Destination{Host: "reviews"}, Headers: &networking.Headers{
				Request: &networking.Headers_HeaderOperations{Set: map[string]string{"x-dst": "1"}},
			}}},
			Headers: &networking.Headers{
				Request:  &networking.Headers_HeaderOperations{Set: map[string]string{"x-b": "2", "x-a": "1", ":authority": "auth.example"}, Add: map[string]string{"x-c": "3"}, Remove: []string{"x-del", ":path"}},
				Response: &networking.Headers_HeaderOperations{Set: map[string]string{"x-resp": "r"}, Remove: []string{"server"}},
			},
		}, encode.ProxySidecar, func(t *testing.T, r *route.Route) {
			add := r.GetRequestHeadersToAdd()
			if len(add) != 4 || add[0].Header.Key != "x-a" || add[1].Header.Key != "x-b" || add[2].Header.Key != "x-c" || add[3].Header.Key != "x-dst" ||
				add[0].AppendAction != core.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD || add[2].AppendAction != core.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD {
				t.Errorf("request headers to add = %v", add)
			}
			if rm := r.GetRequestHeadersToRemove(); len(rm) != 1 || rm[0] != "x-del" {
				t.Errorf("request headers to remove = %v", rm)
			}
			if r.GetRoute().GetHostRewriteLiteral() != "auth.example" {
				t.Errorf("authority = %q", r.GetRoute().GetHostRewriteLiteral())
			}
			if ra := r.GetResponseHeadersToAdd(); len(ra) != 1 || ra[0].Header.Key != "x-resp" || r.GetResponseHeadersToRemove()[0] != "server" {
				t.Errorf("response headers = %v %v", ra, r.GetResponseHeadersToRemove())
			}
		}},
		{"fault: delay and HTTP abort", &networking.HTTPRoute{Route: dest("reviews"), Fault: &networking.HTTPFaultInjection{
			Delay: &networking.HTTPFaultInjection_Delay{Percentage: &networking.Percent{Value: 10},
				HttpDelayType: &networking.HTTPFaultInjection_Delay_FixedDelay{FixedDelay: durationpb.New(5 * time.Second)}},
			Abort: &networking.HTTPFaultInjection_Abort{Percentage: &networking.Percent{Value: 50},
				ErrorType: &networking.HTTPFaultInjection_Abort_HttpStatus{HttpStatus: 503}},
		}}, encode.ProxySidecar, func(t *testing.T, r *route.Route) {
			f := &fault.HTTPFault{}
			if err := r.GetTypedPerFilterConfig()["envoy.filters.http.fault"].UnmarshalTo(f); err != nil {
				t.Fatal(err)
			}
			if f.GetDelay().GetFixedDelay().AsDuration() != 5*time.Second || f.GetDelay().GetPercentage().GetNumerator() != 100000 ||
				f.GetAbort().GetHttpStatus() != 503 || f.GetAbort().GetPercentage().GetNumerator() != 500000 {
				t.Errorf("fault = %v", f)
			}
		}},
		{"fault: gRPC abort", &networking.HTTPRoute{Route: dest("reviews"), Fault: &networking.HTTPFaultInjection{
			Abort: &networking.HTTPFaultInjection_Abort{Percentage: &networking.Percent{Value: 100},
				ErrorType: &networking.HTTPFaultInjection_Abort_GrpcStatus{GrpcStatus: "UNAVAILABLE"}},
		}}, encode.ProxyGRPC, func(t *testing.T, r *route.Route) {
			f := &fault.HTTPFault{}
			if err := r.GetTypedPerFilterConfig()["envoy.filters.http.fault"].UnmarshalTo(f); err != nil {
				t.Fatal(err)
			}
			if f.GetAbort().GetGrpcStatus() != 14 || f.GetDelay() != nil {
				t.Errorf("fault = %v", f)
			}
		}},
		{"CORS", &networking.HTTPRoute{Route: dest("reviews"), CorsPolicy: &networking.CorsPolicy{
			AllowOrigins: []*networking.StringMatch{exact("https://a.example")}, AllowMethods: []string{"GET", "POST"},
			AllowHeaders: []string{"x-a"}, ExposeHeaders: []string{"x-b"}, MaxAge: durationpb.New(24 * time.Hour),
			AllowCredentials: wrapperspb.Bool(true),
		}}, encode.ProxySidecar, func(t *testing.T, r *route.Route) {
			c := &cors.CorsPolicy{}
			if err := r.GetTypedPerFilterConfig()["envoy.filters.http.cors"].UnmarshalTo(c); err != nil {
				t.Fatal(err)
			}
			if len(c.AllowOriginStringMatch) != 1 || c.AllowOriginStringMatch[0].GetExact() != "https://a.example" ||
				c.AllowMethods != "GET,POST" || c.AllowHeaders != "x-a" || c.ExposeHeaders != "x-b" || c.MaxAge != "86400" ||
				!c.GetAllowCredentials().GetValue() || !c.GetForwardNotMatchingPreflights().GetValue() ||
				c.GetFilterEnabled().GetDefaultValue().GetNumerator() != 100 {
				t.Errorf("cors = %v", c)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in
			in.Name = "r"
			rt := only(t, vsRoutes(t, tc.proxy, in))
			if rt.Name != "r" || rt.GetMetadata().GetFilterMetadata()["istio"].GetFields()["config"].GetStringValue() !=
				"/apis/networking.istio.io/v1/namespaces/default/virtual-service/reviews" {
				t.Errorf("name/metadata = %q %v", rt.Name, rt.GetMetadata())
			}
			tc.check(t, rt)
		})
	}
}

func TestRouteSelection(t *testing.T) {
	tests := []struct {
		name  string
		http  []*networking.HTTPRoute
		names []string
	}{
		{"one route per match, named route.match", []*networking.HTTPRoute{{Name: "r", Route: dest("reviews"),
			Match: []*networking.HTTPMatchRequest{{Name: "a", Uri: exact("/a")}, {Uri: exact("/b")}}}}, []string{"r.a", "r"}},
		{"catch-all ends the list", []*networking.HTTPRoute{
			{Name: "first", Route: dest("reviews"), Match: []*networking.HTTPMatchRequest{prefixMatch("/")}},
			{Name: "never", Route: dest("reviews")},
		}, []string{"first"}},
		{"route without match is a catch-all", []*networking.HTTPRoute{
			{Name: "all", Route: dest("reviews")},
			{Name: "never", Route: dest("reviews")},
		}, []string{"all"}},
		{"match for another port is dropped", []*networking.HTTPRoute{
			{Name: "other", Route: dest("reviews"), Match: []*networking.HTTPMatchRequest{{Port: 8080}}},
			{Name: "this", Route: dest("reviews"), Match: []*networking.HTTPMatchRequest{{Port: 9080}}},
		}, []string{"this"}},
		{"gateway-only match is dropped, mesh kept", []*networking.HTTPRoute{
			{Name: "gw", Route: dest("reviews"), Match: []*networking.HTTPMatchRequest{{Gateways: []string{"istio-system/ingress"}}}},
			{Name: "mesh", Route: dest("reviews"), Match: []*networking.HTTPMatchRequest{{Gateways: []string{"mesh"}, Uri: exact("/m")}}},
		}, []string{"mesh"}},
		{"source namespace", []*networking.HTTPRoute{
			{Name: "other-ns", Route: dest("reviews"), Match: []*networking.HTTPMatchRequest{{SourceNamespace: "shop"}}},
			{Name: "this-ns", Route: dest("reviews"), Match: []*networking.HTTPMatchRequest{{SourceNamespace: "default", Uri: exact("/x")}}},
		}, []string{"this-ns"}},
		{"no route for this port falls back to the default route", []*networking.HTTPRoute{
			{Name: "other", Route: dest("reviews"), Match: []*networking.HTTPMatchRequest{{Port: 8080}}},
		}, []string{"default"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rs := vsRoutes(t, encode.ProxySidecar, tc.http...)
			var names []string
			for _, r := range rs {
				names = append(names, r.Name)
			}
			if len(names) != len(tc.names) {
				t.Fatalf("routes = %v, want %v", names, tc.names)
			}
			for i := range names {
				if names[i] != tc.names[i] {
					t.Fatalf("routes = %v, want %v", names, tc.names)
				}
			}
		})
	}
}

func TestRouteHashPolicy(t *testing.T) {
	r := newLRRows()
	dr := &index.Config{Kind: index.ConfigDestinationRule, Key: index.ConfigKey{Namespace: r.sym("default"), Name: r.sym("reviews")}, Hash: 9,
		Spec: &networking.DestinationRule{
			Host: "reviews",
			TrafficPolicy: &networking.TrafficPolicy{LoadBalancer: &networking.LoadBalancerSettings{LbPolicy: &networking.LoadBalancerSettings_ConsistentHash{
				ConsistentHash: &networking.LoadBalancerSettings_ConsistentHashLB{HashKey: &networking.LoadBalancerSettings_ConsistentHashLB_HttpHeaderName{HttpHeaderName: "x-user"}},
			}}},
			Subsets: []*networking.Subset{{Name: "v2", TrafficPolicy: &networking.TrafficPolicy{LoadBalancer: &networking.LoadBalancerSettings{LbPolicy: &networking.LoadBalancerSettings_ConsistentHash{
				ConsistentHash: &networking.LoadBalancerSettings_ConsistentHashLB{HashKey: &networking.LoadBalancerSettings_ConsistentHashLB_UseSourceIp{UseSourceIp: true}},
			}}}}},
		}}
	svc := r.svc("reviews.default.svc.cluster.local", "default", index.OriginKubernetes, []string{"10.0.0.9"}, httpP(9080))
	rules := []encode.HostDestinationRule{{Host: "reviews.default.svc.cluster.local", Rule: dr}}

	t.Run("default route", func(t *testing.T) {
		k := r.vhKey(svc, 9080)
		k.DestinationRules = rules
		a := only(t, genVH(t, k).Routes).GetRoute()
		if len(a.HashPolicy) != 1 || a.HashPolicy[0].GetHeader().GetHeaderName() != "x-user" {
			t.Errorf("hash policy = %v", a.HashPolicy)
		}
		if len(a.GetRetryPolicy().GetRetryHostPredicate()) != 1 {
			t.Errorf("the default route keeps istiod's default retry policy: %v", a.GetRetryPolicy())
		}
	})
	t.Run("VirtualService destinations", func(t *testing.T) {
		k := r.vhKey(svc, 9080)
		k.DestinationRules = rules
		k.VirtualService = r.vs("reviews", "default", &networking.VirtualService{Hosts: []string{"reviews"}, Http: []*networking.HTTPRoute{
			{Name: "v2", Match: []*networking.HTTPMatchRequest{{Uri: exact("/v2")}}, Route: []*networking.HTTPRouteDestination{{Destination: &networking.Destination{Host: "reviews", Subset: "v2"}}}},
			{Name: "split", Route: []*networking.HTTPRouteDestination{
				{Destination: &networking.Destination{Host: "reviews", Subset: "v1"}, Weight: 50},
				{Destination: &networking.Destination{Host: "reviews", Subset: "v2"}, Weight: 50},
			}},
		}})
		rs := genVH(t, k).Routes
		single := rs[0].GetRoute()
		if len(single.HashPolicy) != 1 || !single.HashPolicy[0].GetConnectionProperties().GetSourceIp() {
			t.Errorf("subset hash policy = %v", single.HashPolicy)
		}
		if len(single.GetRetryPolicy().GetRetryHostPredicate()) != 0 {
			t.Errorf("a consistent-hash destination retries on the same host: %v", single.GetRetryPolicy())
		}
		split := rs[1].GetRoute()
		if len(split.HashPolicy) != 2 || split.HashPolicy[0].GetHeader().GetHeaderName() != "x-user" || !split.HashPolicy[1].GetConnectionProperties().GetSourceIp() {
			t.Errorf("weighted hash policies = %v", split.HashPolicy)
		}
	})
}

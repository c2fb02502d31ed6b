package envoypatch

import (
	"slices"
	"testing"

	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/proto"
)

// patchAsParts patches rc with its virtual hosts as encoded parts and
// returns the configuration the parts make, decoded.
func patchAsParts(t testing.TB, s *Set, c Context, rc *route.RouteConfiguration, ports GatewayPorts) *route.RouteConfiguration {
	t.Helper()
	parts := make([]VirtualHostPart, len(rc.VirtualHosts))
	for i, vh := range rc.VirtualHosts {
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(vh)
		if err != nil {
			t.Fatal(err)
		}
		parts[i].Bytes = b
	}
	rc.VirtualHosts = nil
	parts, fails := s.PatchRouteConfigurationParts(c, rc, parts, ports)
	for _, f := range fails {
		t.Fatalf("failure: %v", f.Err)
	}
	for _, vp := range parts {
		if vp.Message == nil {
			vp.Message = &route.VirtualHost{}
			if err := proto.Unmarshal(vp.Bytes, vp.Message); err != nil {
				t.Fatal(err)
			}
		}
		rc.VirtualHosts = append(rc.VirtualHosts, vp.Message)
	}
	return rc
}

// manyHosts is a sidecar's outbound route configuration for port 80 with n
// virtual hosts, as the generators make it.
func manyHosts(n int) *route.RouteConfiguration {
	rc := &route.RouteConfiguration{Name: "80"}
	for i := range n {
		host := "svc-" + string(rune('a'+i)) + ".ns.svc.cluster.local"
		rc.VirtualHosts = append(rc.VirtualHosts, &route.VirtualHost{
			Name:    host + ":80",
			Domains: []string{host, host + ":80"},
			Routes: []*route.Route{{Name: "default", Match: &route.RouteMatch{PathSpecifier: &route.RouteMatch_Prefix{Prefix: "/"}},
				Action: &route.Route_Route{Route: &route.RouteAction{ClusterSpecifier: &route.RouteAction_Cluster{Cluster: "outbound|80||" + host}}}}},
		})
	}
	return rc
}

// TestPatchRouteConfigurationParts: patches applied to encoded virtual
// hosts give the configuration the message form gives, and decode only
// the hosts a patch changes.
func TestPatchRouteConfigurationParts(t *testing.T) {
	const b, c = "svc-b.ns.svc.cluster.local:80", "svc-c.ns.svc.cluster.local"
	cases := []struct {
		name    string
		patches string
		decoded []int // parts left with a Message (indices in the result)
	}{
		{"route configuration merge", `[{"applyTo":"ROUTE_CONFIGURATION","match":{"routeConfiguration":{"portNumber":80}},
			"patch":{"operation":"MERGE","value":{"request_headers_to_add":[{"header":{"key":"x","value":"1"}}]}}}]`, nil},
		{"merge by host name", `[{"applyTo":"VIRTUAL_HOST","match":{"routeConfiguration":{"vhost":{"name":"` + b + `"}}},
			"patch":{"operation":"MERGE","value":{"response_headers_to_add":[{"header":{"key":"x","value":"1"}}]}}}]`, []int{1}},
		{"replace by domain", `[{"applyTo":"VIRTUAL_HOST","match":{"routeConfiguration":{"vhost":{"domainName":"` + c + `"}}},
			"patch":{"operation":"REPLACE","value":{"name":"new","domains":["new"]}}}]`, []int{2}},
		{"remove by name, then add", `[{"applyTo":"VIRTUAL_HOST","match":{"routeConfiguration":{"vhost":{"name":"` + b + `"}}},"patch":{"operation":"REMOVE"}},
			{"applyTo":"VIRTUAL_HOST","patch":{"operation":"ADD","value":{"name":"added","domains":["added"]}}}]`, []int{3}},
		{"route of one host", `[{"applyTo":"HTTP_ROUTE","match":{"routeConfiguration":{"vhost":{"name":"` + b + `","route":{"name":"default"}}}},
			"patch":{"operation":"MERGE","value":{"decorator":{"operation":"x"}}}}]`, []int{1}},
		{"routes of every host", `[{"applyTo":"HTTP_ROUTE","patch":{"operation":"INSERT_FIRST","value":{"name":"first","direct_response":{"status":204}}}}]`, []int{0, 1, 2, 3}},
		{"merge that lists hosts", `[{"applyTo":"ROUTE_CONFIGURATION","patch":{"operation":"MERGE_AND_REPLACE_LIST","value":{"virtual_hosts":[{"name":"only","domains":["*"]}]}}}]`, []int{0}},
		{"another port", `[{"applyTo":"VIRTUAL_HOST","match":{"routeConfiguration":{"portNumber":81}},"patch":{"operation":"REMOVE"}}]`, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := set(t, "configPatches: "+tc.patches)
			want, _ := s.PatchRouteConfiguration(Outbound, manyHosts(4), nil)
			rc := manyHosts(4)
			parts := make([]VirtualHostPart, len(rc.VirtualHosts))
			for i, vh := range rc.VirtualHosts {
				parts[i].Bytes, _ = proto.MarshalOptions{Deterministic: true}.Marshal(vh)
			}
			rc.VirtualHosts = nil
			parts, fails := s.PatchRouteConfigurationParts(Outbound, rc, parts, nil)
			if len(fails) > 0 {
				t.Fatalf("failures: %v", fails[0].Err)
			}
			var decoded []int
			for i, vp := range parts {
				if vp.Message != nil {
					decoded = append(decoded, i)
				}
			}
			if !slices.Equal(decoded, tc.decoded) {
				t.Errorf("decoded parts %v, want %v", decoded, tc.decoded)
			}
			if got := patchAsParts(t, s, Outbound, manyHosts(4), nil); !proto.Equal(got, want) {
				t.Errorf("as parts\n%v\nas a message\n%v", got, want)
			}
		})
	}
}

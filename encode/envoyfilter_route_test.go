package encode

import (
	"fmt"
	"testing"

	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/pilotfish-mesh/pilotfish/envoypatch"
)

// TestPatchedRouteConfigurationParts: a route configuration assembled from
// shared virtual host bytes and patched host by host is, byte for byte,
// the whole configuration patched as a message and encoded.
func TestPatchedRouteConfigurationParts(t *testing.T) {
	var hosts []*route.VirtualHost
	var entries []*Entry
	for i := range 5 {
		host := fmt.Sprintf("s%d.ns.svc.cluster.local", i)
		vh := &route.VirtualHost{Name: host + ":80", Domains: []string{host, host + ":80"},
			Routes: []*route.Route{{Name: "default", Match: &route.RouteMatch{PathSpecifier: &route.RouteMatch_Prefix{Prefix: "/"}},
				Action: &route.Route_Route{Route: &route.RouteAction{ClusterSpecifier: &route.RouteAction_Cluster{Cluster: "outbound|80||" + host}}}}}}
		b, err := appendMessage(nil, vh)
		if err != nil {
			t.Fatal(err)
		}
		hosts = append(hosts, vh)
		entries = append(entries, newEntry(vh.Name, b, KindVirtualHost))
	}
	for name, patches := range map[string]string{
		"one host and the configuration": `[
			{"applyTo":"VIRTUAL_HOST","match":{"context":"SIDECAR_OUTBOUND","routeConfiguration":{"vhost":{"name":"s2.ns.svc.cluster.local:80"}}},
			 "patch":{"operation":"MERGE","value":{"response_headers_to_add":[{"header":{"key":"x-served-by","value":"mesh"}}]}}},
			{"applyTo":"ROUTE_CONFIGURATION","match":{"context":"SIDECAR_OUTBOUND","routeConfiguration":{"portNumber":80}},
			 "patch":{"operation":"MERGE","value":{"request_headers_to_add":[{"header":{"key":"x-mesh-route","value":"80"}}]}}}]`,
		"remove, replace and add": `[
			{"applyTo":"VIRTUAL_HOST","match":{"routeConfiguration":{"vhost":{"name":"s0.ns.svc.cluster.local:80"}}},"patch":{"operation":"REMOVE"}},
			{"applyTo":"VIRTUAL_HOST","match":{"routeConfiguration":{"vhost":{"domainName":"s3.ns.svc.cluster.local"}}},"patch":{"operation":"REPLACE","value":{"name":"r","domains":["r"]}}},
			{"applyTo":"VIRTUAL_HOST","patch":{"operation":"ADD","value":{"name":"added","domains":["added"]}}}]`,
		"every route": `[{"applyTo":"HTTP_ROUTE","match":{"routeConfiguration":{"vhost":{"route":{"name":"default"}}}},
			"patch":{"operation":"MERGE","value":{"decorator":{"operation":"d"}}}}]`,
	} {
		t.Run(name, func(t *testing.T) {
			ef := &networking.EnvoyFilter{}
			if err := protojson.Unmarshal([]byte(`{"configPatches":`+patches+`}`), ef); err != nil {
				t.Fatal(err)
			}
			f, err := envoypatch.Compile("ns", "ef", ef)
			if err != nil {
				t.Fatal(err)
			}
			set := envoypatch.NewSet(f.Patches)
			c := NewCache()
			e, err := RouteConfigurationEntry(c, &RouteConfigKey{Name: "80", Options: RouteConfigSidecar,
				VirtualHosts: entries, Patches: set, Context: envoypatch.Outbound})
			if err != nil {
				t.Fatal(err)
			}
			clones := make([]*route.VirtualHost, len(hosts))
			for i, vh := range hosts {
				clones[i] = proto.Clone(vh).(*route.VirtualHost)
			}
			want, fails := set.PatchRouteConfiguration(envoypatch.Outbound, NewRouteConfiguration("80", clones, RouteConfigSidecar), nil)
			if len(fails) > 0 {
				t.Fatal(fails[0].Err)
			}
			a := &anypb.Any{}
			if err := proto.Unmarshal(e.Bytes, a); err != nil {
				t.Fatal(err)
			}
			got := &route.RouteConfiguration{}
			if err := a.UnmarshalTo(got); err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(got, want) {
				t.Fatalf("patched from parts:\n%v\nas a message:\n%v", got, want)
			}
			// The bytes are those of the whole message encoded as any
			// resource is (AppendAny): the hosts no patch changed were encoded so.
			wb, err := AppendAny(nil, RouteConfigurationType, want)
			if err != nil {
				t.Fatal(err)
			}
			if string(e.Bytes) != string(wb) {
				t.Errorf("patched bytes are not the message's encoding:\n%x\n%x", e.Bytes, wb)
			}
		})
	}
}

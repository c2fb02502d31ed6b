package encode

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/cespare/xxhash/v2"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	networking "istio.io/api/networking/v1alpha3"
	"sigs.k8s.io/yaml"

	"github.com/pilotfish-mesh/pilotfish/index"
)

// TestGatewayVirtualHostComposed: a gateway virtual host encoded around its
// routes is byte for byte the marshaled GatewayVirtualHost, directly and
// through the cache; routes keys are equal on two ports only when the
// routes are port-free, and equal routes keys always mean equal routes
// bytes.
func TestGatewayVirtualHostComposed(t *testing.T) {
	syms := index.NewSymbols()
	svc := func(host string, ports ...uint32) *index.Service {
		s := &index.Service{Key: index.ServiceKey{Host: syms.Intern(host), Namespace: syms.Intern("gw")}, Hash: xxhash.Sum64String(host)}
		for _, p := range ports {
			s.Ports = append(s.Ports, index.Port{Number: p, Protocol: index.ProtocolHTTP})
		}
		return s
	}
	one, two := svc("one.example", 8080), svc("two.example", 80, 443)
	tests := []struct {
		name     string
		http     string // the VirtualService's http routes, YAML
		portFree bool
	}{
		{"one-port service", `[{match: [{uri: {prefix: /a}}], route: [{destination: {host: one.example}}]}]`, true},
		{"explicit port", `[{route: [{destination: {host: two.example, port: {number: 80}}}], mirror: {host: one.example}}]`, true},
		{"two-port service without a port", `[{route: [{destination: {host: two.example}}]}]`, false},
		{"match port", `[{match: [{port: 80}], route: [{destination: {host: one.example}}]}]`, false},
		{"redirect", `[{redirect: {uri: /b, derivePort: FROM_REQUEST_PORT}}]`, false},
		{"weighted", `[{route: [{destination: {host: one.example}, weight: 50}, {destination: {host: two.example, port: {number: 80}}, weight: 50}]}]`, false},
		{"direct response", `[{directResponse: {status: 404}}]`, false},
		{"mirror without a port", `[{route: [{destination: {host: one.example}}], mirror: {host: two.example}}]`, false},
		{"exact, regex, names, case", `[{name: r, match: [{name: m, uri: {exact: /x}, ignoreUriCase: true}, {uri: {regex: "/y.*"}}, {uri: {}}], route: [{destination: {host: one.example}}]}]`, true},
		{"catch-all regex before other routes", `[{match: [{uri: {regex: ".*"}}], route: [{destination: {host: one.example}}]}, {route: [{destination: {host: one.example}}]}]`, true},
		{"catch-all prefix, then a header match", `[{match: [{uri: {prefix: /}}, {headers: {x: {exact: z}}}], route: [{destination: {host: one.example}}]}]`, true},
		{"simple and translated", `[{match: [{uri: {prefix: /a}}], route: [{destination: {host: one.example}}], timeout: 5s}, {match: [{uri: {prefix: /b}}], route: [{destination: {host: one.example}}]}]`, true},
	}
	var all []GatewayRouteSource
	names := index.NamesOf(syms, nil)
	cache := NewCache()
	cache.SetVerify(true)
	// check: k's virtual host composed around routes is byte for byte the
	// marshaled reference, and so is the cached part.
	check := func(t *testing.T, k *GatewayVirtualHostKey, routes []byte) {
		t.Helper()
		wantName, msg := GatewayVirtualHost(names, k)
		want, err := marshalBare(msg)
		if err != nil {
			t.Fatal(err)
		}
		name, got := AppendGatewayVirtualHost(nil, k, routes)
		if name != wantName || !bytes.Equal(got, want) {
			t.Errorf("port %d: composed virtual host %q differs from the marshaled one %q", k.Port, name, wantName)
		}
		if !proto.Equal(barePayload(got, func() (string, proto.Message) { return GatewayVirtualHost(names, k) }), msg) {
			t.Errorf("port %d: composed virtual host decodes to another message", k.Port)
		}
		for range 2 { // a miss, then a verified hit
			e, err := Part(cache, names, k, GatewayVirtualHostGen)
			if err != nil {
				t.Fatal(err)
			}
			if e.Name != wantName || !bytes.Equal(e.Bytes, want) {
				t.Errorf("port %d: cached virtual host %q differs from the marshaled one %q", k.Port, e.Name, wantName)
			}
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j, err := yaml.YAMLToJSON([]byte(`{hosts: [a.example], gateways: [gw/gw], http: ` + tt.http + `}`))
			if err != nil {
				t.Fatal(err)
			}
			spec := &networking.VirtualService{}
			if err := protojson.Unmarshal(j, spec); err != nil {
				t.Fatal(err)
			}
			vs := &index.Config{Kind: index.ConfigVirtualService, Key: index.ConfigKey{Namespace: syms.Intern("gw"), Name: syms.Intern("vs-" + tt.name)},
				Spec: spec, Hash: xxhash.Sum64(j)}
			all = append(all, GatewayRouteSource{Gateway: "gw/gw", VirtualService: vs})
			key := func(port uint32, requireTLS bool) *GatewayVirtualHostKey {
				return &GatewayVirtualHostKey{Namespace: "gw", DomainSuffix: "cluster.local", Port: port,
					Hosts: []string{"a.example", "b.example"}, Sources: []GatewayRouteSource{{Gateway: "gw/gw", VirtualService: vs}},
					RequireTLS: requireTLS, Destinations: []*index.Service{one, two}}
			}
			k80, k443 := key(80, false), key(443, true)
			k80.SetRoutesPort(names)
			k443.SetRoutesPort(names)
			if simple := map[string]bool{"one-port service": true, "two-port service without a port": true, "exact, regex, names, case": true,
				"catch-all regex before other routes": true, "simple and translated": true}; gwDirect && simple[tt.name] {
				direct := 0
				for _, it := range gatewayRouteItems(names, k80.routesKeyAt(80), true, true) {
					if it.r == nil {
						direct++
					}
				}
				if direct == 0 {
					t.Error("no route is written directly")
				}
			}
			rk80, rk443 := k80.routesKey(), k443.routesKey()
			if free := rk80.Hash() == rk443.Hash(); free != tt.portFree {
				t.Fatalf("routes keys equal on 80 and 443: %v, want %v", free, tt.portFree)
			}
			r80, err := AppendGatewayRoutes(nil, names, &rk80)
			if err != nil {
				t.Fatal(err)
			}
			r443, err := AppendGatewayRoutes(nil, names, &rk443)
			if err != nil {
				t.Fatal(err)
			}
			if tt.portFree && !bytes.Equal(r80, r443) {
				t.Fatal("port-free routes differ between ports")
			}
			check(t, k80, r80)
			check(t, k443, r443)
			if !tt.portFree {
				// Routes keyed as port-free when they are not: verify mode
				// catches the wrong bytes (the reference translates for Port).
				wrong := key(80, false)
				wrong.RoutesPort = 0
				func() {
					defer func() {
						if r := recover(); r == nil {
							t.Error("verify mode accepted routes translated for the wrong port")
						}
					}()
					_, _ = Part(cache, names, wrong, GatewayVirtualHostGen)
				}()
			}
		})
	}
	t.Run("every source in one virtual host", func(t *testing.T) {
		k := &GatewayVirtualHostKey{Namespace: "gw", DomainSuffix: "cluster.local", Port: 80,
			Hosts: []string{"a.example"}, Sources: all, Destinations: []*index.Service{one, two}}
		k.SetRoutesPort(names)
		rk := k.routesKey()
		routes, err := AppendGatewayRoutes(nil, names, &rk)
		if err != nil {
			t.Fatal(err)
		}
		check(t, k, routes)
	})
	t.Run("hosts and RequireTLS are part of the key", func(t *testing.T) {
		c := NewCache()
		c.SetVerify(true)
		key := func(host string, tls bool) *GatewayVirtualHostKey {
			k := &GatewayVirtualHostKey{Namespace: "gw", DomainSuffix: "cluster.local", Port: 80,
				Hosts: []string{host}, Sources: all[:1], RequireTLS: tls, Destinations: []*index.Service{one, two}}
			k.SetRoutesPort(names)
			return k
		}
		seen := map[string]string{}
		for _, k := range []*GatewayVirtualHostKey{key("a.example", false), key("b.example", false), key("a.example", true)} {
			e, err := Part(c, names, k, GatewayVirtualHostGen)
			if err != nil {
				t.Fatal(err)
			}
			_, msg := GatewayVirtualHost(names, k)
			if want, _ := marshalBare(msg); !bytes.Equal(e.Bytes, want) {
				t.Errorf("%v tls=%v: cached bytes differ from the reference", k.Hosts, k.RequireTLS)
			}
			if other, dup := seen[string(e.Bytes)]; dup {
				t.Errorf("%v tls=%v: same bytes as %s", k.Hosts, k.RequireTLS, other)
			}
			seen[string(e.Bytes)] = fmt.Sprint(k.Hosts, k.RequireTLS)
		}
		for _, st := range c.Stats() {
			if st.Kind == "gatewayroutes" && st.Entries != 1 {
				t.Errorf("%d routes parts, want the one the three virtual hosts share", st.Entries)
			}
		}
	})
}

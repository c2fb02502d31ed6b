package encode

import (
	"bytes"
	"slices"
	"testing"

	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/proto"
	networking "istio.io/api/networking/v1alpha3"
	security "istio.io/api/security/v1beta1"

	"github.com/pilotfish-mesh/pilotfish/index"
)

// TestGatewayHCMComposed: the HCM filter composed from parts marshaled once
// is byte for byte the marshaled gatewayHCM, with and without security
// filters (jwt_authn, RBAC) and with and without a stat prefix.
func TestGatewayHCMComposed(t *testing.T) {
	syms := index.NewSymbols()
	cfg := func(kind index.ConfigKind, name string, spec proto.Message) *index.Config {
		return &index.Config{Kind: kind, Key: index.ConfigKey{Namespace: syms.Intern("gw"), Name: syms.Intern(name)}, Spec: spec}
	}
	ra := cfg(index.ConfigRequestAuthentication, "jwt", &security.RequestAuthentication{JwtRules: []*security.JWTRule{
		{Issuer: "https://a.example", Jwks: `{"keys":[]}`},
	}})
	deny := cfg(index.ConfigAuthorizationPolicy, "deny", &security.AuthorizationPolicy{
		Action: security.AuthorizationPolicy_DENY,
		Rules:  []*security.Rule{{To: []*security.Rule_To{{Operation: &security.Operation{Paths: []string{"/admin"}}}}}},
	})
	keys := map[string]*GatewayListenerKey{
		"plain":    {Namespace: "gw", DomainSuffix: "cluster.local", Port: 443},
		"security": {Namespace: "gw", DomainSuffix: "cluster.local", Port: 443, RequestAuthn: JWTRules{Policies: []*index.Config{ra}}, Authz: AuthzPolicies{Deny: []*index.Config{deny}}},
	}
	for name, key := range keys {
		k := gwlIn{key, index.NamesOf(syms, nil)}
		parts := k.hcmParts()
		if !parts.ok {
			t.Fatalf("%s: the gateway HCM is not composable", name)
		}
		for _, c := range []struct{ statPrefix, rds string }{
			{"outbound_0.0.0.0_80;", "http.80"},
			{"https", "https.443.https.gateway-0.gateway"},
			{"", "https.443.https.gw.ns"},
		} {
			want, err := proto.MarshalOptions{Deterministic: true}.Marshal(k.gatewayHCM(c.statPrefix, c.rds))
			if err != nil {
				t.Fatal(err)
			}
			f := parts.filter(k, c.statPrefix, c.rds)
			if n := parts.hcmSize(c.statPrefix, c.rds); n != len(want) {
				t.Errorf("%s %q %q: hcmSize %d, encoding %d bytes", name, c.statPrefix, c.rds, n, len(want))
			}
			if got := f.GetTypedConfig(); got.GetTypeUrl() != hcmTypeURL || !bytes.Equal(got.GetValue(), want) {
				t.Errorf("%s %q %q: composed HCM differs from its marshal (%d vs %d bytes)", name, c.statPrefix, c.rds, len(got.GetValue()), len(want))
			}
			if ref := lsHCMFilter(k.gatewayHCM(c.statPrefix, c.rds)); !proto.Equal(f, ref) {
				t.Errorf("%s %q %q: filter differs from lsHCMFilter's", name, c.statPrefix, c.rds)
			}
		}
	}
}

// TestGatewayListenerComposed: a router's listener encoded directly is byte
// for byte the marshaled GatewayListener: plain HTTP servers sharing one
// chain (a GRPC-WEB first server adds grpc_web to it; istio.alpn is on
// every HCM), HTTPS servers (ISTIO_MUTUAL, SIMPLE with a credential, a named
// server, a wildcard host) composed, and a PASSTHROUGH server's built chain
// between them; with and without security filters; no listener for a port
// with no chain.
func TestGatewayListenerComposed(t *testing.T) {
	syms := index.NewSymbols()
	gw := func(name string, servers ...*networking.Server) *index.Config {
		return &index.Config{Kind: index.ConfigGateway, Key: index.ConfigKey{Namespace: syms.Intern("gw"), Name: syms.Intern(name)},
			Spec: &networking.Gateway{Servers: servers}}
	}
	port := func(n uint32, name, protocol string) *networking.Port {
		return &networking.Port{Number: n, Name: name, Protocol: protocol}
	}
	mutual := &networking.ServerTLSSettings{Mode: networking.ServerTLSSettings_ISTIO_MUTUAL}
	http1 := gw("http1", &networking.Server{Port: port(80, "http", "HTTP"), Hosts: []string{"a.example"}})
	http2 := gw("http2", &networking.Server{Port: port(80, "http", "http"), Hosts: []string{"gw/b.example"}})
	grpcWeb := gw("grpcweb", &networking.Server{Port: port(80, "grpc-web", "GRPC-WEB"), Hosts: []string{"*"}})
	https := gw("https",
		&networking.Server{Port: port(443, "https", "HTTPS"), Hosts: []string{"a.example", "b.example"}, Tls: mutual},
		&networking.Server{Port: port(443, "https", "HTTPS"), Name: "named", Hosts: []string{"*"},
			Tls: &networking.ServerTLSSettings{Mode: networking.ServerTLSSettings_SIMPLE, CredentialName: "cert"}},
		&networking.Server{Port: port(443, "tls", "TLS"), Hosts: []string{"p.example"}, Tls: &networking.ServerTLSSettings{Mode: networking.ServerTLSSettings_PASSTHROUGH}},
		&networking.Server{Port: port(443, "https", "HTTPS"), Hosts: []string{"ns/c.example"}, Tls: mutual},
	)
	vs := &index.Config{Kind: index.ConfigVirtualService, Key: index.ConfigKey{Namespace: syms.Intern("gw"), Name: syms.Intern("tls")},
		Hosts: []index.Sym{syms.Intern("p.example")}, // as ingest resolves them
		Spec: &networking.VirtualService{Hosts: []string{"p.example"}, Gateways: []string{"https"}, Tls: []*networking.TLSRoute{{
			Match: []*networking.TLSMatchAttributes{{SniHosts: []string{"p.example"}}},
			Route: []*networking.RouteDestination{{Destination: &networking.Destination{Host: "p.example", Port: &networking.PortSelector{Number: 443}}}},
		}}}}
	servers := func(c *index.Config, vss ...*index.Config) []GatewayServer {
		var out []GatewayServer
		for i, srv := range c.Spec.(*networking.Gateway).Servers {
			out = append(out, GatewayServer{Gateway: c, Index: i, RouteName: GatewayRouteName(index.NamesOf(syms, nil), c, srv, srv.GetPort().GetNumber()), VirtualServices: vss})
		}
		return out
	}
	ra := &index.Config{Kind: index.ConfigRequestAuthentication, Key: index.ConfigKey{Namespace: syms.Intern("gw"), Name: syms.Intern("jwt")},
		Spec: &security.RequestAuthentication{JwtRules: []*security.JWTRule{{Issuer: "https://a.example", Jwks: `{"keys":[]}`}}}}
	keys := map[string]*GatewayListenerKey{
		"http":          {Namespace: "gw", DomainSuffix: "cluster.local", Port: 80, Servers: append(servers(http1), servers(http2)...)},
		"grpc-web":      {Namespace: "gw", DomainSuffix: "cluster.local", Port: 80, Servers: append(servers(grpcWeb), servers(http1)...)},
		"http+security": {Namespace: "gw", DomainSuffix: "cluster.local", Port: 80, Servers: servers(http1), RequestAuthn: JWTRules{Policies: []*index.Config{ra}}},
		"https":         {Namespace: "gw", DomainSuffix: "cluster.local", Port: 443, Servers: servers(https, vs)},
		"https, IPv6":   {Namespace: "gw", DomainSuffix: "cluster.local", Port: 443, IPv6: true, Servers: servers(https, vs)[:2]},
		"no chain":      {Namespace: "gw", DomainSuffix: "cluster.local", Port: 443, Servers: servers(https)[2:3]},
	}
	for name, k := range keys {
		wantName, msg := GatewayListener(index.NamesOf(syms, nil), k)
		want, err := AppendAny(nil, ListenerType, msg)
		if err != nil {
			t.Fatal(err)
		}
		gotName, got := AppendGatewayListener(anyPrefix(ListenerType), index.NamesOf(syms, nil), k)
		if gotName != wantName || !bytes.Equal(got, want) {
			t.Errorf("%s: composed listener %q (%d bytes) differs from the marshaled %q (%d bytes)", name, gotName, len(got), wantName, len(want))
		}
		if name == "no chain" && gotName != "" {
			t.Errorf("no chain: listener %q", gotName)
		}
		if hfs := gatewayHCMFilterNames(t, msg.(*listener.Listener)); (name == "grpc-web") != slices.Contains(hfs, "envoy.filters.http.grpc_web") ||
			(name != "no chain" && !slices.Contains(hfs, "istio.alpn")) {
			t.Errorf("%s: HTTP filters %q", name, hfs)
		}
		if name == "https" && len(msg.(*listener.Listener).FilterChains) != 4 {
			t.Errorf("https: %d chains, want 4", len(msg.(*listener.Listener).FilterChains))
		}
	}
}

// gatewayHCMFilterNames are the HTTP filter names of every connection
// manager of l, in order.
func gatewayHCMFilterNames(t *testing.T, l *listener.Listener) []string {
	t.Helper()
	var out []string
	for _, fc := range l.GetFilterChains() {
		for _, f := range fc.GetFilters() {
			if f.GetName() != hcmFilterName {
				continue
			}
			var h hcm.HttpConnectionManager
			if err := f.GetTypedConfig().UnmarshalTo(&h); err != nil {
				t.Fatal(err)
			}
			for _, hf := range h.GetHttpFilters() {
				out = append(out, hf.GetName())
			}
		}
	}
	return out
}

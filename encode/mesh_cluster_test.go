package encode

import (
	"slices"
	"testing"

	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/pilotfish-mesh/pilotfish/index"
)

// The mesh-wide cluster and TLS settings against istiod's rules, case by
// case; engine's TestMeshClusterSettingsMatchIstiod and its siblings
// compare whole outputs with istiod's.

// TestMeshH2Upgrade is istiod's shouldH2Upgrade: the rule's policy first
// (useClientProtocol never upgrades), then the mesh's for HTTP ports only.
func TestMeshH2Upgrade(t *testing.T) {
	up := &Mesh{H2Upgrade: true}
	pool := func(p networking.ConnectionPoolSettings_HTTPSettings_H2UpgradePolicy, client bool) *networking.ConnectionPoolSettings {
		return &networking.ConnectionPoolSettings{Http: &networking.ConnectionPoolSettings_HTTPSettings{H2UpgradePolicy: p, UseClientProtocol: client}}
	}
	for _, tc := range []struct {
		name string
		cp   *networking.ConnectionPoolSettings
		p    index.Protocol
		m    *Mesh
		want bool
	}{
		{"mesh upgrade, HTTP", nil, index.ProtocolHTTP, up, true},
		{"mesh upgrade, TCP", nil, index.ProtocolTCP, up, false},
		{"mesh upgrade, sniffed", nil, index.ProtocolUnknown, up, false},
		{"mesh default", nil, index.ProtocolHTTP, DefaultMesh(), false},
		{"no mesh", nil, index.ProtocolHTTP, nil, false},
		{"rule DO_NOT_UPGRADE", pool(networking.ConnectionPoolSettings_HTTPSettings_DO_NOT_UPGRADE, false), index.ProtocolHTTP, up, false},
		{"rule DEFAULT", pool(networking.ConnectionPoolSettings_HTTPSettings_DEFAULT, false), index.ProtocolHTTP, up, true},
		{"rule UPGRADE, TCP", pool(networking.ConnectionPoolSettings_HTTPSettings_UPGRADE, false), index.ProtocolTCP, nil, true},
		{"useClientProtocol", pool(networking.ConnectionPoolSettings_HTTPSettings_UPGRADE, true), index.ProtocolHTTP, up, false},
	} {
		if got := clShouldH2Upgrade(tc.cp, tc.p, tc.m); got != tc.want {
			t.Errorf("%s: upgrade %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestMeshKeepalive is istiod's applyTCPKeepalive: the mesh's fields, each
// one the rule sets replacing the mesh's.
func TestMeshKeepalive(t *testing.T) {
	mesh := &TCPKeepalive{Probes: 4, Time: 600, HasTime: true, HasInterval: true}
	if clKeepalive(nil, nil) != nil {
		t.Error("keepalive without settings")
	}
	got := clKeepalive(mesh, &networking.ConnectionPoolSettings_TCPSettings_TcpKeepalive{Time: durationpb.New(30e9)}).GetTcpKeepalive()
	if got.GetKeepaliveProbes().GetValue() != 4 || got.GetKeepaliveTime().GetValue() != 30 || got.GetKeepaliveInterval() == nil || got.GetKeepaliveInterval().GetValue() != 0 {
		t.Errorf("merged keepalive %v", got)
	}
	if got := clKeepalive(&TCPKeepalive{}, nil).GetTcpKeepalive(); got == nil || got.KeepaliveProbes != nil || got.KeepaliveTime != nil {
		t.Errorf("an empty mesh keepalive sets SO_KEEPALIVE only, got %v", got)
	}
}

// TestMeshLocalitySetting: the mesh's setting as istiod's type, and a
// rule's own setting winning over it.
func TestMeshLocalitySetting(t *testing.T) {
	if s, ok := epEffectiveLocalityLB(nil, nil); !ok || s != epMeshLocalityLB {
		t.Error("no mesh setting is not istiod's default")
	}
	if _, ok := epEffectiveLocalityLB(nil, &LocalityLB{Disabled: true}); ok {
		t.Error("a disabled mesh setting applies")
	}
	l := &LocalityLB{Distribute: []LocalityDistribute{{From: "a/*", To: []LocalityWeight{{"a/*", 80}, {"b/*", 20}}}}}
	s, ok := epEffectiveLocalityLB(nil, l)
	if !ok || len(s.GetDistribute()) != 1 || s.GetDistribute()[0].GetTo()["b/*"] != 20 || s.GetDistribute()[0].GetFrom() != "a/*" {
		t.Errorf("mesh distribution %v", s)
	}
	rule := &networking.LoadBalancerSettings{LocalityLbSetting: &networking.LocalityLoadBalancerSetting{}}
	if s, _ := epEffectiveLocalityLB(rule, l); s != rule.LocalityLbSetting {
		t.Error("the rule's setting does not win over the mesh's")
	}
}

// TestMeshServerTLS: tlsDefaults on a gateway server under its own
// settings (istiod's applyDownstreamTLSDefaults, applyServerTLSSettings);
// meshMTLS on istio mTLS (BuildInboundTLS).
func TestMeshServerTLS(t *testing.T) {
	d := &TLSDefaults{EcdhCurves: []string{"P-256"}, CipherSuites: []string{"A"}, MinTLS13: true}
	for _, tc := range []struct {
		name string
		srv  *networking.ServerTLSSettings
		d    *TLSDefaults
		want *tlsv3.TlsParameters
	}{
		{"no settings", &networking.ServerTLSSettings{}, &TLSDefaults{}, nil},
		{"mesh defaults", &networking.ServerTLSSettings{}, d,
			&tlsv3.TlsParameters{EcdhCurves: []string{"P-256"}, CipherSuites: []string{"A"}, TlsMinimumProtocolVersion: tlsv3.TlsParameters_TLSv1_3}},
		{"mesh TLS 1.2", &networking.ServerTLSSettings{}, &TLSDefaults{MinTLS12: true},
			&tlsv3.TlsParameters{TlsMinimumProtocolVersion: tlsv3.TlsParameters_TLSv1_2}},
		{"server wins", &networking.ServerTLSSettings{MinProtocolVersion: networking.ServerTLSSettings_TLSV1_2, CipherSuites: []string{"B"},
			MaxProtocolVersion: networking.ServerTLSSettings_TLSV1_2}, d,
			&tlsv3.TlsParameters{EcdhCurves: []string{"P-256"}, CipherSuites: []string{"B"}, TlsMinimumProtocolVersion: tlsv3.TlsParameters_TLSv1_2,
				TlsMaximumProtocolVersion: tlsv3.TlsParameters_TLSv1_2}},
	} {
		cc := &tlsv3.CommonTlsContext{}
		gwTLSParams(cc, tc.srv, tc.d)
		if !proto.Equal(cc.TlsParams, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, cc.TlsParams, tc.want)
		}
	}
	ctx := &tlsv3.DownstreamTlsContext{}
	if err := lsInboundMTLS("td", nil, nil, &TLSDefaults{MinTLS13: true, CipherSuites: []string{"C"}}).GetTypedConfig().UnmarshalTo(ctx); err != nil {
		t.Fatal(err)
	}
	if p := ctx.GetCommonTlsContext().GetTlsParams(); p.GetTlsMinimumProtocolVersion() != tlsv3.TlsParameters_TLSv1_3 ||
		len(p.GetCipherSuites()) != 1 || p.GetCipherSuites()[0] != "C" {
		t.Errorf("istio mTLS with meshMTLS: %v", p)
	}
	if err := lsInboundMTLS("td", []string{"old.td", "td", "", "ca.td", "old.td"}, nil, &TLSDefaults{MinTLS12: true}).GetTypedConfig().UnmarshalTo(ctx); err != nil {
		t.Fatal(err)
	}
	if p := ctx.GetCommonTlsContext().GetTlsParams(); p.GetTlsMinimumProtocolVersion() != tlsv3.TlsParameters_TLSv1_2 || len(p.GetCipherSuites()) != len(lsCipherSuites) {
		t.Errorf("istio mTLS with TLS 1.2: %v", p)
	}
	// Peer trust domains: the mesh's first, each once.
	var prefixes []string
	for _, m := range ctx.GetCommonTlsContext().GetCombinedValidationContext().GetDefaultValidationContext().GetMatchSubjectAltNames() {
		prefixes = append(prefixes, m.GetPrefix())
	}
	if want := []string{"spiffe://td/", "spiffe://old.td/", "spiffe://ca.td/"}; !slices.Equal(prefixes, want) {
		t.Errorf("peer SAN prefixes %q, want %q", prefixes, want)
	}
}

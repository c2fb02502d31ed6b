package engine

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/wrapperspb"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/inject"
)

// meshFromYAML is what the mesh-config reader does: istiod's parse of a
// mesh config (defaults applied), then the cluster fields onto a default
// mesh.
func meshFromYAML(t testing.TB, y string) (*encode.Mesh, error) {
	t.Helper()
	cfg, err := inject.ParseMesh([]byte(y))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	m := encode.DefaultMesh()
	// What engine.MeshSettings copies besides (trust domain aliases: the
	// peers istio mTLS accepts).
	m.TrustDomainAliases = cfg.GetTrustDomainAliases()
	return m, applyClusterMesh(m, cfg)
}

// TestApplyClusterMesh: each field lands in encode.Mesh as the generators
// read it, and the defaults leave a mesh equal to encode.DefaultMesh.
func TestApplyClusterMesh(t *testing.T) {
	cases := []struct {
		name string
		yaml string
		want func(m *encode.Mesh)
	}{
		{"defaults", "", func(*encode.Mesh) {}},
		{"connectTimeout", "connectTimeout: 2.5s", func(m *encode.Mesh) { m.ConnectTimeout = 2500 * time.Millisecond }},
		{"enableAutoMtls", "enableAutoMtls: false", func(m *encode.Mesh) { m.EnableAutoMTLS = false }},
		{"h2UpgradePolicy", "h2UpgradePolicy: UPGRADE", func(m *encode.Mesh) { m.H2Upgrade = true }},
		{"tcpKeepalive", "tcpKeepalive: {probes: 4, time: 600.9s, interval: 0s}", func(m *encode.Mesh) {
			m.TCPKeepalive = &encode.TCPKeepalive{Probes: 4, Time: 600, HasTime: true, HasInterval: true}
		}},
		{"tcpKeepalive empty", "tcpKeepalive: {}", func(m *encode.Mesh) { m.TCPKeepalive = &encode.TCPKeepalive{} }},
		{"dnsRefreshRate", "dnsRefreshRate: 5s", func(m *encode.Mesh) { m.DNSRefreshRate = 5 * time.Second }},
		{"localityLbSetting disabled", "localityLbSetting: {enabled: false}", func(m *encode.Mesh) {
			m.LocalityLB = &encode.LocalityLB{Disabled: true}
		}},
		{"localityLbSetting enabled, no rules", "localityLbSetting: {enabled: true}", func(*encode.Mesh) {}},
		{"localityLbSetting failover", "localityLbSetting: {failover: [{from: us-east, to: eu-west}]}", func(m *encode.Mesh) {
			m.LocalityLB = &encode.LocalityLB{Failover: []encode.LocalityFailover{{From: "us-east", To: "eu-west"}}}
		}},
		{"localityLbSetting distribute", `localityLbSetting: {distribute: [{from: "us-east/*", to: {"us-east/b/*": 20, "us-east/a/*": 80}}]}`, func(m *encode.Mesh) {
			m.LocalityLB = &encode.LocalityLB{Distribute: []encode.LocalityDistribute{{From: "us-east/*",
				To: []encode.LocalityWeight{{Locality: "us-east/a/*", Weight: 80}, {Locality: "us-east/b/*", Weight: 20}}}}}
		}},
		{"tlsDefaults", "tlsDefaults: {ecdhCurves: [P-256], cipherSuites: [ECDHE-ECDSA-AES128-GCM-SHA256], minProtocolVersion: TLSV1_3}", func(m *encode.Mesh) {
			m.TLSDefaults = encode.TLSDefaults{EcdhCurves: []string{"P-256"}, CipherSuites: []string{"ECDHE-ECDSA-AES128-GCM-SHA256"}, MinTLS13: true}
		}},
		{"tlsDefaults TLS 1.2", "tlsDefaults: {minProtocolVersion: TLSV1_2}", func(m *encode.Mesh) {
			m.TLSDefaults = encode.TLSDefaults{MinTLS12: true}
		}},
		{"meshMTLS", "meshMTLS: {minProtocolVersion: TLSV1_3, cipherSuites: [ECDHE-RSA-AES256-GCM-SHA384]}", func(m *encode.Mesh) {
			m.MeshMTLS = encode.TLSDefaults{CipherSuites: []string{"ECDHE-RSA-AES256-GCM-SHA384"}, MinTLS13: true}
		}},
		{"defaultTrafficPolicy", "defaultTrafficPolicy: {connectionPool: {tcp: {maxConnections: 10}}, outlierDetection: {consecutive5xxErrors: 5}}", func(m *encode.Mesh) {
			m.DefaultTrafficPolicy, _ = encode.EncodeDefaultTrafficPolicy(
				&networking.ConnectionPoolSettings{Tcp: &networking.ConnectionPoolSettings_TCPSettings{MaxConnections: 10}},
				&networking.OutlierDetection{Consecutive_5XxErrors: wrapperspb.UInt32(5)})
		}},
		{"caCertificates", "caCertificates: [{pem: PEM, trustDomains: [a.example, b.example]}, {spiffeBundleUrl: 'https://b.example/bundle', trustDomains: [c.example]}]", func(m *encode.Mesh) {
			m.CATrustDomains = []string{"a.example", "b.example", "c.example"}
		}},
		{"serviceSettings", "serviceSettings: [{settings: {clusterLocal: true}, hosts: ['*.shop.svc.cluster.local', 'a.b']}]", func(*encode.Mesh) {}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := meshFromYAML(t, tc.yaml)
			if err != nil {
				t.Fatal(err)
			}
			want := encode.DefaultMesh()
			tc.want(want)
			if !reflect.DeepEqual(got.Clone(), want.Clone()) { // Clone: without the hash caches
				t.Errorf("got  %+v\nwant %+v", got.Clone(), want.Clone())
			}
		})
	}
}

// TestApplyClusterMeshRefuses: a bad or unimplemented value fails with the
// right sentinel, naming the field.
func TestApplyClusterMeshRefuses(t *testing.T) {
	cases := []struct {
		yaml, field string
		err         error
	}{
		{"connectTimeout: 0s", "connectTimeout", ErrBadMeshSetting},
		{"connectTimeout: 2h", "connectTimeout", ErrBadMeshSetting},
		{"connectTimeout: 1.0005s", "connectTimeout", ErrBadMeshSetting},
		{"h2UpgradePolicy: 7", "h2UpgradePolicy", ErrBadMeshSetting},
		{"tcpKeepalive: {time: -1s}", "tcpKeepalive.time", ErrBadMeshSetting},
		{"tcpKeepalive: {interval: 5000000000s}", "tcpKeepalive.interval", ErrBadMeshSetting},
		{"dnsRefreshRate: 1ms", "dnsRefreshRate", ErrBadMeshSetting},
		{"localityLbSetting: {failover: [{from: a, to: a}]}", "localityLbSetting.failover[0]", ErrBadMeshSetting},
		{"localityLbSetting: {failover: [{from: a/b, to: c}]}", "localityLbSetting.failover[0]", ErrBadMeshSetting},
		{"localityLbSetting: {failover: [{from: a, to: '*'}]}", "localityLbSetting.failover[0]", ErrBadMeshSetting},
		{"localityLbSetting: {distribute: [{from: a, to: {b: 50}}]}", "localityLbSetting.distribute[0]", ErrBadMeshSetting},
		{"localityLbSetting: {distribute: [{from: a, to: {b: 0, c: 100}}]}", "localityLbSetting.distribute[0]", ErrBadMeshSetting},
		{"localityLbSetting: {distribute: [{from: a, to: {b: 50, b/z: 50}}]}", "localityLbSetting.distribute[0].to", ErrBadMeshSetting},
		{"localityLbSetting: {distribute: [{from: 'a/*/c', to: {b: 100}}]}", "localityLbSetting.distribute.from", ErrBadMeshSetting},
		{"localityLbSetting: {distribute: [{from: a, to: {b: 100}}], failover: [{from: a, to: b}]}", "localityLbSetting", ErrBadMeshSetting},
		{"localityLbSetting: {failoverPriority: [topology.kubernetes.io/zone]}", "localityLbSetting.failoverPriority", ErrUnsupportedMeshSetting},
		{"zoneAwareLbSetting: {}", "zoneAwareLbSetting", ErrUnsupportedMeshSetting},
		{"tlsDefaults: {minProtocolVersion: 9}", "tlsDefaults.minProtocolVersion", ErrBadMeshSetting},
		{"tlsDefaults: {cipherSuites: ['']}", "tlsDefaults.cipherSuites[0]", ErrBadMeshSetting},
		{"meshMTLS: {ecdhCurves: [P-256]}", "meshMTLS.ecdhCurves", ErrBadMeshSetting},
		{"meshMTLS: {cipherSuites: [' ']}", "meshMTLS.cipherSuites[0]", ErrBadMeshSetting},
		{"serviceSettings: [{hosts: ['a..b']}]", "serviceSettings[0].hosts[0]", ErrBadMeshSetting},
		{"serviceSettings: [{hosts: ['a.*.b']}]", "serviceSettings[0].hosts[0]", ErrBadMeshSetting},
		{"inboundClusterStatName: '%SERVICE%'", "inboundClusterStatName", ErrUnsupportedMeshSetting},
		{"outboundClusterStatName: '%SERVICE%'", "outboundClusterStatName", ErrUnsupportedMeshSetting},
		{"defaultTrafficPolicy: {connectionPool: {}}", "defaultTrafficPolicy.connectionPool", ErrBadMeshSetting},
		{"defaultTrafficPolicy: {connectionPool: {tcp: {maxConnections: -1}}}", "defaultTrafficPolicy.connectionPool.tcp.maxConnections", ErrBadMeshSetting},
		{"defaultTrafficPolicy: {connectionPool: {tcp: {connectTimeout: 0.5ms}}}", "defaultTrafficPolicy.connectionPool.tcp.connectTimeout", ErrBadMeshSetting},
		{"defaultTrafficPolicy: {connectionPool: {http: {h2UpgradePolicy: UPGRADE, useClientProtocol: true}}}", "defaultTrafficPolicy.connectionPool.http", ErrBadMeshSetting},
		{"defaultTrafficPolicy: {outlierDetection: {maxEjectionPercent: 101}}", "defaultTrafficPolicy.outlierDetection.maxEjectionPercent", ErrBadMeshSetting},
		{"defaultTrafficPolicy: {outlierDetection: {consecutiveLocalOriginFailures: 3}}", "defaultTrafficPolicy.outlierDetection.consecutiveLocalOriginFailures", ErrBadMeshSetting},
	}
	for _, tc := range cases {
		t.Run(tc.yaml, func(t *testing.T) {
			if _, err := inject.ParseMesh([]byte(tc.yaml)); err != nil {
				// istiod's own validation (package meshconfig) refuses it
				// first: the mesh config is not applied either way.
				if top := strings.FieldsFunc(tc.field, func(r rune) bool { return r == '.' || r == '[' })[0]; !strings.Contains(err.Error(), top) {
					t.Errorf("parse error %q does not name %s", err, top)
				}
				return
			}
			_, err := meshFromYAML(t, tc.yaml)
			if !errors.Is(err, tc.err) {
				t.Fatalf("error %v, want %v", err, tc.err)
			}
			if !strings.Contains(err.Error(), tc.field) {
				t.Errorf("error %q does not name %s", err, tc.field)
			}
		})
	}
}

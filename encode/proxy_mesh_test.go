package encode

import (
	"reflect"
	"testing"
	"time"
)

// TestMeshClone: Clone copies every exported field (a field added to Mesh
// and forgotten in Clone fails here), and a clone changed before its first
// use hashes as its new fields, not as the mesh it came from.
func TestMeshClone(t *testing.T) {
	m := &Mesh{DomainSuffix: "a", TrustDomain: "b", RootNamespace: "c", ConnectTimeout: time.Second, OutboundAllowAny: true,
		EnableAutoMTLS: true, ProtocolDetectionTimeout: time.Minute, ClusterID: "d",
		TrustDomainAliases: []string{"old.example"}, JWKSFetchMode: JWKSFetchEnvoy,
		PathNormalization: PathNormalizeMergeSlashes, DefaultRetry: HTTPRetry{Set: true, Attempts: 3},
		InboundTrafficPolicy: InboundLocalhost, DefaultServiceExportTo: []string{"."},
		DefaultVirtualServiceExportTo: []string{"a"}, DefaultDestinationRuleExportTo: []string{"~"},
		H2Upgrade: true, TCPKeepalive: &TCPKeepalive{Probes: 3}, DNSRefreshRate: time.Second,
		LocalityLB:           &LocalityLB{Failover: []LocalityFailover{{From: "a", To: "b"}}, Distribute: []LocalityDistribute{{From: "a/*", To: []LocalityWeight{{"b/*", 100}}}}},
		TLSDefaults:          TLSDefaults{EcdhCurves: []string{"P-256"}, CipherSuites: []string{"ECDHE-RSA-AES128-GCM-SHA256"}},
		MeshMTLS:             TLSDefaults{CipherSuites: []string{"ECDHE-RSA-AES256-GCM-SHA384"}, MinTLS13: true},
		DefaultTrafficPolicy: "\x1a\x00", CATrustDomains: []string{"ca.example"}, Stats: true,
		ExtAuthz:      []ExtAuthzProvider{{Name: "authz", Kind: ExtAuthzHTTP, IncludeRequestHeaders: []string{"x-user"}, Body: &ExtAuthzBody{MaxRequestBytes: 1}}},
		Tracing:       &MeshTracing{Provider: &TraceProvider{Name: "z", Headers: []TraceHeader{{"a", "b"}}}, Sampling: 1, Tags: []TraceTag{{Tag: "t"}}},
		TraceDefaults: &MeshTracing{Sampling: 2, Tags: []TraceTag{{Tag: "d"}}},
		Telemetry:     StatsOnly, TelemetryProviders: []TelemetryProvider{{Name: "envoy", Log: &AccessLog{Path: "/dev/stdout"}}},
		DefaultMetrics: []string{"prometheus"}, DefaultLogging: []string{"envoy"}, MeshAccessLog: &AccessLog{Path: "/dev/stdout"}, NoListenerLogs: true}
	mv := reflect.ValueOf(m).Elem()
	for i := 0; i < mv.NumField(); i++ {
		if f := mv.Type().Field(i); f.IsExported() && mv.Field(i).IsZero() {
			t.Fatalf("set %s in this test", f.Name)
		}
	}
	var h Hasher
	m.hashInto(&h) // caches m's hash
	c := m.Clone()
	cv := reflect.ValueOf(c).Elem()
	for i := 0; i < mv.NumField(); i++ {
		if f := mv.Type().Field(i); f.IsExported() && !reflect.DeepEqual(mv.Field(i).Interface(), cv.Field(i).Interface()) {
			t.Errorf("Clone does not copy %s", f.Name)
		}
	}
	// The clone owns its lists and settings: changing them leaves m alone.
	c.TCPKeepalive.Probes++
	c.LocalityLB.Failover[0].To = "c"
	c.LocalityLB.Distribute[0].To[0].Weight = 1
	c.TLSDefaults.EcdhCurves[0] = "X25519"
	c.MeshMTLS.CipherSuites[0] = "x"
	c.ExtAuthz[0].IncludeRequestHeaders[0] = "y"
	c.ExtAuthz[0].Body.MaxRequestBytes++
	c.Tracing.Provider.Headers[0].Value = "c"
	c.Tracing.Tags[0].Tag = "u"
	c.TraceDefaults.Tags[0].Tag = "e"
	if m.TraceDefaults.Tags[0].Tag != "d" {
		t.Error("TraceDefaults' tags are shared with the clone")
	}
	if m.Tracing.Provider.Headers[0].Value != "b" || m.Tracing.Tags[0].Tag != "t" {
		t.Fatal("Clone shares tracing settings with the mesh it came from")
	}
	if m.ExtAuthz[0].IncludeRequestHeaders[0] != "x-user" || m.ExtAuthz[0].Body.MaxRequestBytes != 1 {
		t.Fatal("Clone shares an ext_authz provider with the mesh it came from")
	}
	if m.TCPKeepalive.Probes != 3 || m.LocalityLB.Failover[0].To != "b" || m.LocalityLB.Distribute[0].To[0].Weight != 100 ||
		m.TLSDefaults.EcdhCurves[0] != "P-256" || m.MeshMTLS.CipherSuites[0] != "ECDHE-RSA-AES256-GCM-SHA384" {
		t.Fatal("Clone shares a setting with the mesh it came from")
	}
	c.OutboundAllowAny = false
	if c.fieldsHash() == m.fieldsHash() {
		t.Fatal("OutboundAllowAny does not change the mesh's hash")
	}
	var hm, hc Hasher
	m.hashInto(&hm)
	c.hashInto(&hc)
	if hm.Sum() == hc.Sum() {
		t.Error("a changed clone hashes as the mesh it came from")
	}
}

// TestMeshListenerFieldsHash: each listener, route and visibility setting
// changes the mesh's hash, and an unset exportTo default hashes apart from
// an empty one.
func TestMeshListenerFieldsHash(t *testing.T) {
	base := DefaultMesh()
	for name, change := range map[string]func(m *Mesh){
		"PathNormalization":              func(m *Mesh) { m.PathNormalization = PathNormalizeNone },
		"DefaultRetry":                   func(m *Mesh) { m.DefaultRetry = HTTPRetry{Set: true, Attempts: 2} },
		"DefaultRetry.RetryOn":           func(m *Mesh) { m.DefaultRetry = HTTPRetry{Set: true, Attempts: 2, RetryOn: "5xx"} },
		"DefaultRetry.Backoff":           func(m *Mesh) { m.DefaultRetry = HTTPRetry{Set: true, Attempts: 2, HasBackoff: true} },
		"InboundTrafficPolicy":           func(m *Mesh) { m.InboundTrafficPolicy = InboundLocalhost },
		"DefaultServiceExportTo":         func(m *Mesh) { m.DefaultServiceExportTo = []string{"."} },
		"DefaultServiceExportTo empty":   func(m *Mesh) { m.DefaultServiceExportTo = []string{} },
		"DefaultVirtualServiceExportTo":  func(m *Mesh) { m.DefaultVirtualServiceExportTo = []string{"."} },
		"DefaultDestinationRuleExportTo": func(m *Mesh) { m.DefaultDestinationRuleExportTo = []string{"."} },
		"ProtocolDetectionTimeout":       func(m *Mesh) { m.ProtocolDetectionTimeout = time.Second },
		"Stats":                          func(m *Mesh) { m.Stats = true },
		"Telemetry":                      func(m *Mesh) { m.Telemetry = StatsOnly },
		"TelemetryProviders":             func(m *Mesh) { m.TelemetryProviders = []TelemetryProvider{{Name: "p", Prometheus: true}} },
		"DefaultMetrics":                 func(m *Mesh) { m.DefaultMetrics = []string{"prometheus"} },
		"DefaultLogging":                 func(m *Mesh) { m.DefaultLogging = []string{"envoy"} },
		"MeshAccessLog":                  func(m *Mesh) { m.MeshAccessLog = &AccessLog{Path: "/dev/stdout"} },
		"NoListenerLogs":                 func(m *Mesh) { m.NoListenerLogs = true },
		"MeshAccessLog.Text":             func(m *Mesh) { m.MeshAccessLog = &AccessLog{Path: "/dev/stdout", Text: "x\n"} },
	} {
		m := base.Clone()
		change(m)
		if m.fieldsHash() == base.fieldsHash() {
			t.Errorf("%s does not change the mesh's hash", name)
		}
	}
}

package encode

import (
	"sync/atomic"
	"time"

	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
	networking "istio.io/api/networking/v1alpha3"
)

// The MeshConfig fields that shape clusters and endpoints, as values a key
// can hold (engine/mesh_cluster.go copies them from a parsed MeshConfig;
// docs/mesh-config.md, "Clusters and endpoints"). A nil pointer or zero
// value is istiod's default, so a mesh built without them generates what
// it always did.

// TCPKeepalive is meshConfig.tcpKeepalive: SO_KEEPALIVE on every
// upstream connection, with the fields that are set (a DestinationRule's
// tcpKeepalive overrides them one by one, as istiod's applyTCPKeepalive).
type TCPKeepalive struct {
	// Probes is keepalive_probes (0: the OS default).
	Probes uint32
	// Time and Interval are keepalive_time and keepalive_interval, whole
	// seconds as istiod truncates them; HasTime and HasInterval say the
	// mesh config sets them (a set 0s is sent as 0).
	Time, Interval       uint32
	HasTime, HasInterval bool
}

func (ka *TCPKeepalive) hashInto(h *Hasher) {
	h.Bool(ka != nil)
	if ka == nil {
		return
	}
	h.U32(ka.Probes)
	h.U32(ka.Time)
	h.U32(ka.Interval)
	h.Bool(ka.HasTime)
	h.Bool(ka.HasInterval)
}

// LocalityLB is meshConfig.localityLbSetting, the locality load balancing
// of every cluster whose DestinationRule sets none. A nil *LocalityLB is
// istiod's default ({enabled: true}: locality priorities when outlier
// detection is on). failoverPriority is not supported at mesh level
// (engine refuses it): proxies would have to be classed by its labels.
type LocalityLB struct {
	// Disabled: enabled: false, or no setting at all.
	Disabled bool
	// Distribute are the weighted distributions, in order; each one's
	// destinations sorted by locality.
	Distribute []LocalityDistribute
	// Failover are the region failover rules, in order.
	Failover []LocalityFailover
}

// LocalityDistribute is one distribute entry: traffic from From is split
// over To by weight.
type LocalityDistribute struct {
	From string
	To   []LocalityWeight
}

// LocalityWeight is a destination locality (pattern) and its weight.
type LocalityWeight struct {
	Locality string
	Weight   uint32
}

// LocalityFailover is one failover rule: region From fails over to To.
type LocalityFailover struct {
	From, To string
}

func (l *LocalityLB) hashInto(h *Hasher) {
	h.Bool(l != nil)
	if l == nil {
		return
	}
	h.Bool(l.Disabled)
	h.Int(len(l.Distribute))
	for _, d := range l.Distribute {
		h.Str(d.From)
		h.Int(len(d.To))
		for _, w := range d.To {
			h.Str(w.Locality)
			h.U32(w.Weight)
		}
	}
	h.Int(len(l.Failover))
	for _, f := range l.Failover {
		h.Str(f.From)
		h.Str(f.To)
	}
}

// setting is the mesh's setting as istiod's type (nil, false: disabled).
// The default is shared; a configured one is built per call, which only
// clusters and assignments with locality load balancing pay.
func (l *LocalityLB) setting() (*networking.LocalityLoadBalancerSetting, bool) {
	if l == nil {
		return epMeshLocalityLB, true
	}
	if l.Disabled {
		return nil, false
	}
	s := &networking.LocalityLoadBalancerSetting{Enabled: wrapperspb.Bool(true)}
	for _, d := range l.Distribute {
		to := make(map[string]uint32, len(d.To))
		for _, w := range d.To {
			to[w.Locality] = w.Weight
		}
		s.Distribute = append(s.Distribute, &networking.LocalityLoadBalancerSetting_Distribute{From: d.From, To: to})
	}
	for _, f := range l.Failover {
		s.Failover = append(s.Failover, &networking.LocalityLoadBalancerSetting_Failover{From: f.From, To: f.To})
	}
	return s, true
}

// TLSDefaults is a MeshConfig TLSConfig: tlsDefaults (the ECDH curves and
// cipher suites of TLS a DestinationRule originates, as istiod's
// applyTLSDefaults; and all three fields for gateway SIMPLE, MUTUAL and
// OPTIONAL_MUTUAL servers, under the server's own settings, as its
// applyDownstreamTLSDefaults) or meshMTLS (the minimum version and suites
// of the sidecars' istio mTLS servers; no curves).
type TLSDefaults struct {
	EcdhCurves   []string
	CipherSuites []string
	// MinTLS13 is minProtocolVersion TLSV1_3; MinTLS12 is TLSV1_2 (istiod
	// maps every value but TLSV1_3 to TLS 1.2; TLS_AUTO sets nothing on
	// gateway servers).
	MinTLS12, MinTLS13 bool
}

func (t *TLSDefaults) hashInto(h *Hasher) {
	h.Strs(t.EcdhCurves)
	h.Strs(t.CipherSuites)
	h.Bool(t.MinTLS12)
	h.Bool(t.MinTLS13)
}

// clone copies t's lists.
func (t TLSDefaults) clone() TLSDefaults {
	t.EcdhCurves, t.CipherSuites = cloneStrs(t.EcdhCurves), cloneStrs(t.CipherSuites)
	return t
}

// minVersion is minProtocolVersion as Envoy's (ok false: TLS_AUTO).
func (t *TLSDefaults) minVersion() (tlsv3.TlsParameters_TlsProtocol, bool) {
	switch {
	case t.MinTLS13:
		return tlsv3.TlsParameters_TLSv1_3, true
	case t.MinTLS12:
		return tlsv3.TlsParameters_TLSv1_2, true
	}
	return 0, false
}

func cloneStrs(s []string) []string {
	if s == nil {
		return nil
	}
	return append([]string(nil), s...)
}

// tlsParams are the TLS parameters of an originated TLS context: istiod's
// defaults (TLS 1.2 to 1.3), with tlsDefaults' curves and suites.
func (m *Mesh) tlsParams() *tlsv3.TlsParameters {
	if m == nil || (len(m.TLSDefaults.EcdhCurves) == 0 && len(m.TLSDefaults.CipherSuites) == 0) {
		return clTLSParams
	}
	return &tlsv3.TlsParameters{
		TlsMinimumProtocolVersion: clTLSParams.TlsMinimumProtocolVersion,
		TlsMaximumProtocolVersion: clTLSParams.TlsMaximumProtocolVersion,
		EcdhCurves:                m.TLSDefaults.EcdhCurves,
		CipherSuites:              m.TLSDefaults.CipherSuites,
	}
}

// dnsRefreshRate is a DNS cluster's refresh rate: the mesh's, else
// istiod's default.
func (m *Mesh) dnsRefreshRate() time.Duration {
	if m == nil || m.DNSRefreshRate == 0 {
		return clDNSRefreshRate
	}
	return m.DNSRefreshRate
}

// h2Upgrade reports meshConfig.h2UpgradePolicy UPGRADE.
func (m *Mesh) h2Upgrade() bool { return m != nil && m.H2Upgrade }

// keepalive is the mesh's tcpKeepalive (nil: none).
func (m *Mesh) keepalive() *TCPKeepalive {
	if m == nil {
		return nil
	}
	return m.TCPKeepalive
}

// localityLB is the mesh's locality setting (nil: istiod's default).
func (m *Mesh) localityLB() *LocalityLB {
	if m == nil {
		return nil
	}
	return m.LocalityLB
}

// cloneClusterFields copies the cluster and endpoint fields of m into c.
func (m *Mesh) cloneClusterFields(c *Mesh) {
	c.H2Upgrade = m.H2Upgrade
	if m.TCPKeepalive != nil {
		ka := *m.TCPKeepalive
		c.TCPKeepalive = &ka
	}
	c.DNSRefreshRate = m.DNSRefreshRate
	if m.LocalityLB != nil {
		l := &LocalityLB{Disabled: m.LocalityLB.Disabled}
		for _, d := range m.LocalityLB.Distribute {
			l.Distribute = append(l.Distribute, LocalityDistribute{From: d.From, To: append([]LocalityWeight(nil), d.To...)})
		}
		l.Failover = append([]LocalityFailover(nil), m.LocalityLB.Failover...)
		c.LocalityLB = l
	}
	c.TLSDefaults = m.TLSDefaults.clone()
	c.MeshMTLS = m.MeshMTLS.clone()
	c.DefaultTrafficPolicy = m.DefaultTrafficPolicy
	c.CATrustDomains = cloneStrs(m.CATrustDomains)
}

// hashClusterFields feeds the cluster and endpoint fields of m.
func (m *Mesh) hashClusterFields(h *Hasher) {
	h.Bool(m.H2Upgrade)
	m.TCPKeepalive.hashInto(h)
	h.U64(uint64(m.DNSRefreshRate))
	m.LocalityLB.hashInto(h)
	m.TLSDefaults.hashInto(h)
	m.MeshMTLS.hashInto(h)
	h.Str(m.DefaultTrafficPolicy)
	h.Strs(m.CATrustDomains)
}

// PeerTrustDomains are the trust domains besides TrustDomain whose
// identities istio mTLS servers accept: the aliases, then the CA
// certificates' (VirtualInboundKey.PeerTrustDomains). nil for none.
func (m *Mesh) PeerTrustDomains() []string {
	if len(m.TrustDomainAliases) == 0 {
		return m.CATrustDomains
	}
	if len(m.CATrustDomains) == 0 {
		return m.TrustDomainAliases
	}
	return append(append([]string(nil), m.TrustDomainAliases...), m.CATrustDomains...)
}

// mpDecoded is the last Mesh.DefaultTrafficPolicy decoded: one mesh is in
// force at a time, so every cluster of a push finds it here and decoding
// happens once per mesh (a swap may decode twice; nothing else grows).
var mpDecoded atomic.Pointer[mpEntry]

type mpEntry struct {
	enc string
	tp  *networking.TrafficPolicy
}

// defaultPolicy is meshConfig.defaultTrafficPolicy as istiod's type (nil:
// none). It allocates only when it decodes.
func (m *Mesh) defaultPolicy() *networking.TrafficPolicy {
	if m == nil || m.DefaultTrafficPolicy == "" {
		return nil
	}
	if e := mpDecoded.Load(); e != nil && e.enc == m.DefaultTrafficPolicy {
		return e.tp
	}
	tp := &networking.TrafficPolicy{}
	if err := proto.Unmarshal([]byte(m.DefaultTrafficPolicy), tp); err != nil {
		panic("encode: Mesh.DefaultTrafficPolicy is not an encoded TrafficPolicy: " + err.Error())
	}
	mpDecoded.Store(&mpEntry{enc: m.DefaultTrafficPolicy, tp: tp})
	return tp
}

// EncodeDefaultTrafficPolicy is Mesh.DefaultTrafficPolicy for a mesh
// config's defaultTrafficPolicy (connectionPool, outlierDetection): their
// deterministic encoding, a value a key can hold; "" for none.
func EncodeDefaultTrafficPolicy(cp *networking.ConnectionPoolSettings, od *networking.OutlierDetection) (string, error) {
	if cp == nil && od == nil {
		return "", nil
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(&networking.TrafficPolicy{ConnectionPool: cp, OutlierDetection: od})
	return string(b), err
}

// withMeshDefault is istiod's applyDefaultTrafficPolicy on a resolved
// policy: the mesh's connection pool and outlier detection where p has
// none.
func (p clPolicy) withMeshDefault(def *networking.TrafficPolicy) clPolicy {
	if def == nil {
		return p
	}
	if p.connectionPool == nil {
		p.connectionPool = def.ConnectionPool
	}
	if p.outlierDetection == nil {
		p.outlierDetection = def.OutlierDetection
	}
	return p
}

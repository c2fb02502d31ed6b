package engine

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	meshv1alpha1 "istio.io/api/mesh/v1alpha1"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/pilotfish-mesh/pilotfish/encode"
)

// ErrUnsupportedMeshSetting: a mesh config field that changes what istiod
// generates is set to a value pilotfish does not implement. Refusing it
// keeps the last good mesh, where ignoring it would serve proxies config
// that differs from istiod's without a word.
var ErrUnsupportedMeshSetting = errors.New("unsupported mesh setting")

// applyClusterMesh copies into m the MeshConfig fields that shape clusters
// and endpoints (docs/mesh-config.md, "Clusters and endpoints"). cfg is a
// parsed mesh config with istiod's defaults already applied; m is a mesh
// not yet used (encode.DefaultMesh or a Clone). A value istiod refuses, or
// one Envoy would reject, fails naming the field; so does a value pilotfish
// does not implement (ErrUnsupportedMeshSetting). On error m is partly set:
// the caller drops it.
func applyClusterMesh(m *encode.Mesh, cfg *meshv1alpha1.MeshConfig) error {
	d, err := meshDuration("connectTimeout", cfg.GetConnectTimeout(), time.Millisecond, time.Hour)
	if err != nil {
		return err
	}
	if d%time.Millisecond != 0 {
		return fmt.Errorf("%w: connectTimeout %v: only whole milliseconds", ErrBadMeshSetting, d)
	}
	m.ConnectTimeout = d

	// istiod reads the wrapper's value; unset is its default, on.
	m.EnableAutoMTLS = cfg.GetEnableAutoMtls() == nil || cfg.GetEnableAutoMtls().GetValue()

	switch p := cfg.GetH2UpgradePolicy(); p {
	case meshv1alpha1.MeshConfig_DO_NOT_UPGRADE:
		m.H2Upgrade = false
	case meshv1alpha1.MeshConfig_UPGRADE:
		m.H2Upgrade = true
	default:
		return fmt.Errorf("%w: h2UpgradePolicy %d: want DO_NOT_UPGRADE or UPGRADE", ErrBadMeshSetting, p)
	}

	if m.TCPKeepalive, err = meshKeepalive(cfg.GetTcpKeepalive()); err != nil {
		return err
	}

	// Envoy refuses a refresh rate of 1ms or less; unset keeps istiod's
	// default (60s).
	m.DNSRefreshRate = 0
	if r := cfg.GetDnsRefreshRate(); r != nil {
		if m.DNSRefreshRate, err = meshDuration("dnsRefreshRate", r, time.Millisecond+time.Nanosecond, math.MaxInt64); err != nil {
			return err
		}
	}

	if cfg.GetZoneAwareLbSetting() != nil {
		return fmt.Errorf("%w: zoneAwareLbSetting (zone-aware load balancing is not implemented)", ErrUnsupportedMeshSetting)
	}
	if m.LocalityLB, err = meshLocalityLB(cfg.GetLocalityLbSetting()); err != nil {
		return err
	}

	if m.TLSDefaults, err = meshTLS("tlsDefaults", cfg.GetTlsDefaults()); err != nil {
		return err
	}
	// istiod refuses curves in meshMTLS (ValidateMeshTLSConfig).
	if cfg.GetMeshMTLS().GetEcdhCurves() != nil {
		return fmt.Errorf("%w: meshMTLS.ecdhCurves: mesh mTLS does not take ECDH curves", ErrBadMeshSetting)
	}
	if m.MeshMTLS, err = meshTLS("meshMTLS", cfg.GetMeshMTLS()); err != nil {
		return err
	}

	// caCertificates' trust domains join the peers istio mTLS accepts
	// (istiod's TrustDomainsForValidation); the rest of caCertificates is
	// the CA's and istio-agent's business.
	m.CATrustDomains = nil
	for _, c := range cfg.GetCaCertificates() {
		m.CATrustDomains = append(m.CATrustDomains, c.GetTrustDomains()...)
	}
	if err := checkServiceSettings(cfg.GetServiceSettings()); err != nil {
		return err
	}
	if cfg.GetInboundClusterStatName() != "" {
		return fmt.Errorf("%w: inboundClusterStatName %q (custom cluster stat names are not implemented)", ErrUnsupportedMeshSetting, cfg.GetInboundClusterStatName())
	}
	if cfg.GetOutboundClusterStatName() != "" {
		return fmt.Errorf("%w: outboundClusterStatName %q (custom cluster stat names are not implemented)", ErrUnsupportedMeshSetting, cfg.GetOutboundClusterStatName())
	}
	if err := checkDefaultTrafficPolicy(cfg.GetDefaultTrafficPolicy()); err != nil {
		return err
	}
	dtp := cfg.GetDefaultTrafficPolicy()
	if m.DefaultTrafficPolicy, err = encode.EncodeDefaultTrafficPolicy(dtp.GetConnectionPool(), dtp.GetOutlierDetection()); err != nil {
		return fmt.Errorf("%w: defaultTrafficPolicy: %v", ErrBadMeshSetting, err)
	}
	return nil
}

// checkDefaultTrafficPolicy is istiod's
// validateMeshConfigDefaultTrafficPolicy: the checks of a DestinationRule's
// connection pool and outlier detection.
func checkDefaultTrafficPolicy(d *meshv1alpha1.MeshConfig_DefaultTrafficPolicy) error {
	bad := func(field, why string) error {
		return fmt.Errorf("%w: defaultTrafficPolicy.%s: %s", ErrBadMeshSetting, field, why)
	}
	dur := func(field string, v *durationpb.Duration) error {
		if v == nil {
			return nil
		}
		if x := v.AsDuration(); !v.IsValid() || x < time.Millisecond || x%time.Millisecond != 0 {
			return bad(field, fmt.Sprintf("%v: want whole milliseconds, at least 1ms", x))
		}
		return nil
	}
	if cp := d.GetConnectionPool(); cp != nil {
		if cp.GetHttp() == nil && cp.GetTcp() == nil {
			return bad("connectionPool", "set http or tcp")
		}
		if h := cp.GetHttp(); h != nil {
			for _, f := range []struct {
				name string
				v    int32
			}{{"http1MaxPendingRequests", h.GetHttp1MaxPendingRequests()}, {"http2MaxRequests", h.GetHttp2MaxRequests()},
				{"maxRequestsPerConnection", h.GetMaxRequestsPerConnection()}, {"maxRetries", h.GetMaxRetries()}, {"maxConcurrentStreams", h.GetMaxConcurrentStreams()}} {
				if f.v < 0 {
					return bad("connectionPool.http."+f.name, fmt.Sprintf("%d is negative", f.v))
				}
			}
			if err := dur("connectionPool.http.idleTimeout", h.GetIdleTimeout()); err != nil {
				return err
			}
			if h.GetH2UpgradePolicy() == networking.ConnectionPoolSettings_HTTPSettings_UPGRADE && h.GetUseClientProtocol() {
				return bad("connectionPool.http", "useClientProtocol and h2UpgradePolicy UPGRADE contradict each other")
			}
		}
		if t := cp.GetTcp(); t != nil {
			if t.GetMaxConnections() < 0 {
				return bad("connectionPool.tcp.maxConnections", fmt.Sprintf("%d is negative", t.GetMaxConnections()))
			}
			for _, f := range []struct {
				name string
				v    *durationpb.Duration
			}{{"connectTimeout", t.GetConnectTimeout()}, {"maxConnectionDuration", t.GetMaxConnectionDuration()},
				{"tcpKeepalive.time", t.GetTcpKeepalive().GetTime()}, {"tcpKeepalive.interval", t.GetTcpKeepalive().GetInterval()}} {
				if err := dur("connectionPool.tcp."+f.name, f.v); err != nil {
					return err
				}
			}
			// 0s disables the idle timeout.
			if it := t.GetIdleTimeout(); it != nil && it.AsDuration().Milliseconds() != 0 {
				if err := dur("connectionPool.tcp.idleTimeout", it); err != nil {
					return err
				}
			}
		}
	}
	if od := d.GetOutlierDetection(); od != nil {
		if err := dur("outlierDetection.baseEjectionTime", od.GetBaseEjectionTime()); err != nil {
			return err
		}
		if err := dur("outlierDetection.interval", od.GetInterval()); err != nil {
			return err
		}
		if !od.GetSplitExternalLocalOriginErrors() && od.GetConsecutiveLocalOriginFailures().GetValue() > 0 {
			return bad("outlierDetection.consecutiveLocalOriginFailures", "set without splitExternalLocalOriginErrors")
		}
		for _, f := range []struct {
			name string
			v    int32
		}{{"maxEjectionPercent", od.GetMaxEjectionPercent()}, {"minHealthPercent", od.GetMinHealthPercent()}} {
			if f.v < 0 || f.v > 100 {
				return bad("outlierDetection."+f.name, fmt.Sprintf("%d: want 0 to 100", f.v))
			}
		}
	}
	return nil
}

// meshDuration checks a duration field: set, in [lo, hi], and exactly
// representable.
func meshDuration(field string, d *durationpb.Duration, lo, hi time.Duration) (time.Duration, error) {
	if d == nil {
		return 0, fmt.Errorf("%w: %s is unset", ErrBadMeshSetting, field)
	}
	if err := d.CheckValid(); err != nil {
		return 0, fmt.Errorf("%w: %s: %v", ErrBadMeshSetting, field, err)
	}
	v := d.AsDuration()
	if v < lo || v > hi {
		if hi == math.MaxInt64 {
			return 0, fmt.Errorf("%w: %s %v: want more than %v", ErrBadMeshSetting, field, v, lo-time.Nanosecond)
		}
		return 0, fmt.Errorf("%w: %s %v: want %v to %v", ErrBadMeshSetting, field, v, lo, hi)
	}
	return v, nil
}

// meshKeepalive is tcpKeepalive as encode holds it. Envoy takes whole
// seconds in 32 bits; istiod truncates.
func meshKeepalive(ka *networking.ConnectionPoolSettings_TCPSettings_TcpKeepalive) (*encode.TCPKeepalive, error) {
	if ka == nil {
		return nil, nil
	}
	out := &encode.TCPKeepalive{Probes: ka.GetProbes()}
	secs := func(field string, d *durationpb.Duration) (uint32, error) {
		if err := d.CheckValid(); err != nil {
			return 0, fmt.Errorf("%w: tcpKeepalive.%s: %v", ErrBadMeshSetting, field, err)
		}
		if d.GetSeconds() < 0 || d.GetSeconds() > math.MaxUint32 {
			return 0, fmt.Errorf("%w: tcpKeepalive.%s %v: want 0 to %ds", ErrBadMeshSetting, field, d.AsDuration(), uint32(math.MaxUint32))
		}
		return uint32(d.GetSeconds()), nil
	}
	var err error
	if ka.GetTime() != nil {
		out.HasTime = true
		if out.Time, err = secs("time", ka.GetTime()); err != nil {
			return nil, err
		}
	}
	if ka.GetInterval() != nil {
		out.HasInterval = true
		if out.Interval, err = secs("interval", ka.GetInterval()); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// meshLocalityLB is localityLbSetting as encode holds it (nil: istiod's
// default, enabled without rules), checked as istiod's
// ValidateLocalityLbSetting does.
func meshLocalityLB(s *networking.LocalityLoadBalancerSetting) (*encode.LocalityLB, error) {
	if s == nil || (s.GetEnabled() != nil && !s.GetEnabled().GetValue()) {
		return &encode.LocalityLB{Disabled: true}, nil
	}
	if len(s.GetFailoverPriority()) > 0 {
		return nil, fmt.Errorf("%w: localityLbSetting.failoverPriority (set it in DestinationRules; mesh-wide it is not implemented)", ErrUnsupportedMeshSetting)
	}
	if len(s.GetDistribute()) > 0 && len(s.GetFailover()) > 0 {
		return nil, fmt.Errorf("%w: localityLbSetting: distribute and failover cannot both be set", ErrBadMeshSetting)
	}
	if len(s.GetDistribute()) == 0 && len(s.GetFailover()) == 0 {
		return nil, nil // the default's behaviour; share its encoding
	}
	out := &encode.LocalityLB{}
	from := make([]string, 0, len(s.GetDistribute()))
	for i, d := range s.GetDistribute() {
		field := fmt.Sprintf("localityLbSetting.distribute[%d]", i)
		from = append(from, d.GetFrom())
		e := encode.LocalityDistribute{From: d.GetFrom()}
		var total uint32
		to := make([]string, 0, len(d.GetTo()))
		for loc, w := range d.GetTo() {
			if w < 1 || w > 100 {
				return nil, fmt.Errorf("%w: %s.to[%q]: weight %d: want 1 to 100", ErrBadMeshSetting, field, loc, w)
			}
			total += w
			to = append(to, loc)
			e.To = append(e.To, encode.LocalityWeight{Locality: loc, Weight: w})
		}
		if total != 100 {
			return nil, fmt.Errorf("%w: %s: weights total %d, want 100", ErrBadMeshSetting, field, total)
		}
		if err := checkLocalities(field+".to", to); err != nil {
			return nil, err
		}
		slices.SortFunc(e.To, func(a, b encode.LocalityWeight) int { return strings.Compare(a.Locality, b.Locality) })
		out.Distribute = append(out.Distribute, e)
	}
	if err := checkLocalities("localityLbSetting.distribute.from", from); err != nil {
		return nil, err
	}
	for i, f := range s.GetFailover() {
		field := fmt.Sprintf("localityLbSetting.failover[%d]", i)
		switch {
		case f.GetFrom() == f.GetTo():
			return nil, fmt.Errorf("%w: %s: from and to are the same region %q", ErrBadMeshSetting, field, f.GetFrom())
		case strings.Contains(f.GetFrom(), "/") || strings.Contains(f.GetTo(), "/"):
			return nil, fmt.Errorf("%w: %s: failover names regions only, not %q to %q", ErrBadMeshSetting, field, f.GetFrom(), f.GetTo())
		case strings.Contains(f.GetFrom(), "*") || strings.Contains(f.GetTo(), "*"):
			return nil, fmt.Errorf("%w: %s: a region has no '*' wildcard", ErrBadMeshSetting, field)
		}
		out.Failover = append(out.Failover, encode.LocalityFailover{From: f.GetFrom(), To: f.GetTo()})
	}
	return out, nil
}

// checkLocalities is istiod's validateLocalities: each locality is
// region[/zone[/subzone]] with at most one trailing '*', none empty, and
// none overlapping another of the list.
func checkLocalities(field string, locs []string) error {
	slices.Sort(locs) // map order; the error names the same pair each time
	for i, l := range locs {
		if n := strings.Count(l, "*"); n > 1 || (n == 1 && !strings.HasSuffix(l, "*")) {
			return fmt.Errorf("%w: %s: locality %q: one '*' at most, at the end", ErrBadMeshSetting, field, l)
		}
		parts := strings.Split(l, "/")
		if len(parts) > 3 || slices.Contains(parts, "") {
			return fmt.Errorf("%w: %s: locality %q: want region[/zone[/subzone]], none empty", ErrBadMeshSetting, field, l)
		}
		for _, o := range locs[:i] {
			if localityCovers(o, l) || localityCovers(l, o) {
				return fmt.Errorf("%w: %s: localities %q and %q overlap", ErrBadMeshSetting, field, o, l)
			}
		}
	}
	return nil
}

// localityCovers reports whether pattern a matches every locality b does.
func localityCovers(a, b string) bool {
	pa, pb := strings.Split(a, "/"), strings.Split(b, "/")
	for i, p := range pa {
		if p == "*" {
			return true
		}
		if i >= len(pb) || pb[i] != p {
			return false
		}
	}
	return len(pa) == len(pb) || len(pa) < len(pb)
}

// meshTLS is a TLSConfig (tlsDefaults, meshMTLS) as encode holds it.
func meshTLS(field string, t *meshv1alpha1.MeshConfig_TLSConfig) (encode.TLSDefaults, error) {
	var out encode.TLSDefaults
	if t == nil {
		return out, nil
	}
	switch v := t.GetMinProtocolVersion(); v {
	case meshv1alpha1.MeshConfig_TLSConfig_TLS_AUTO:
	case meshv1alpha1.MeshConfig_TLSConfig_TLSV1_2:
		out.MinTLS12 = true
	case meshv1alpha1.MeshConfig_TLSConfig_TLSV1_3:
		out.MinTLS13 = true
	default:
		return out, fmt.Errorf("%w: %s.minProtocolVersion %d: want TLS_AUTO, TLSV1_2 or TLSV1_3", ErrBadMeshSetting, field, v)
	}
	if err := checkTLSNames(field+".ecdhCurves", t.GetEcdhCurves()); err != nil {
		return out, err
	}
	if err := checkTLSNames(field+".cipherSuites", t.GetCipherSuites()); err != nil {
		return out, err
	}
	if len(t.GetEcdhCurves()) > 0 {
		out.EcdhCurves = slices.Clone(t.GetEcdhCurves())
	}
	if len(t.GetCipherSuites()) > 0 {
		out.CipherSuites = slices.Clone(t.GetCipherSuites())
	}
	return out, nil
}

// checkTLSNames refuses empty names (Envoy would refuse the context).
func checkTLSNames(field string, names []string) error {
	for i, n := range names {
		if strings.TrimSpace(n) == "" {
			return fmt.Errorf("%w: %s[%d] is empty", ErrBadMeshSetting, field, i)
		}
	}
	return nil
}

// checkServiceSettings checks serviceSettings' hosts as istiod does.
// Their one setting, clusterLocal, keeps a service's endpoints to the
// proxy's own cluster; pilotfish serves one cluster, whose endpoints all
// carry the registry's cluster ID, so it changes nothing (see
// docs/mesh-config.md).
func checkServiceSettings(ss []*meshv1alpha1.MeshConfig_ServiceSettings) error {
	for i, s := range ss {
		for j, h := range s.GetHosts() {
			if !validWildcardHost(h) {
				return fmt.Errorf("%w: serviceSettings[%d].hosts[%d] %q: want a DNS name, optionally starting with '*.'", ErrBadMeshSetting, i, j, h)
			}
		}
	}
	return nil
}

// validWildcardHost is istiod's ValidateWildcardDomain: DNS-1123 labels,
// the first of which may be "*" (or "*" alone), 255 bytes at most.
func validWildcardHost(h string) bool {
	if h == "" || len(h) > 255 {
		return false
	}
	for i, l := range strings.Split(h, ".") {
		if i == 0 && l == "*" {
			continue
		}
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for _, c := range l {
			if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
				return false
			}
		}
	}
	return true
}

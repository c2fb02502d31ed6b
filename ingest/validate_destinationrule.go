package ingest

import (
	"math"
	"strings"

	networking "istio.io/api/networking/v1alpha3"
)

func (v *validator) destinationRule(p *fieldPath, dr *networking.DestinationRule) {
	switch h := dr.GetHost(); {
	case h == "":
		v.errorf(p.f("host"), "required")
	default:
		if msg := hostError(h); msg != "" {
			v.errorf(p.f("host"), "invalid host %q: %s", h, msg)
		}
	}
	v.trafficPolicy(p.f("trafficPolicy"), dr.GetTrafficPolicy())
	seen := make(map[string]int, len(dr.GetSubsets()))
	for i, s := range dr.GetSubsets() {
		sp := p.f("subsets").i(i)
		if s == nil {
			v.errorf(sp, "must not be null")
			continue
		}
		switch name := s.GetName(); {
		case name == "":
			v.errorf(sp.f("name"), "required")
		case !isIstioLabel(name):
			v.errorf(sp.f("name"), "invalid subset name %q: must be a DNS-1123 label", name)
		default:
			if j, dup := seen[name]; dup {
				v.errorf(sp.f("name"), "duplicate subset name %q (also subsets[%d])", name, j)
			} else {
				seen[name] = i
			}
		}
		v.labels(sp.f("labels"), s.GetLabels())
		v.trafficPolicy(sp.f("trafficPolicy"), s.GetTrafficPolicy())
	}
	sel := dr.GetWorkloadSelector()
	v.exportTo(p.f("exportTo"), dr.GetExportTo(), false, sel != nil)
	if sel != nil {
		v.workloadSelector(p.f("workloadSelector").f("matchLabels"), sel.GetMatchLabels())
	}
}

func (v *validator) trafficPolicy(p *fieldPath, tp *networking.TrafficPolicy) {
	if tp == nil {
		return
	}
	if tp.GetOutlierDetection() == nil && tp.GetConnectionPool() == nil && tp.GetLoadBalancer() == nil &&
		tp.GetTls() == nil && tp.GetPortLevelSettings() == nil && tp.GetTunnel() == nil &&
		tp.GetProxyProtocol() == nil && tp.GetRetryBudget() == nil {
		v.errorf(p, "must set at least one field")
		return
	}
	if tp.GetTunnel() != nil && tp.GetProxyProtocol() != nil {
		v.errorf(p.f("tunnel"), "cannot be set together with proxyProtocol")
	}
	v.outlierDetection(p.f("outlierDetection"), tp.GetOutlierDetection())
	v.connectionPool(p.f("connectionPool"), tp.GetConnectionPool())
	v.loadBalancer(p.f("loadBalancer"), tp.GetLoadBalancer())
	v.clientTLS(p.f("tls"), tp.GetTls())
	for i, pl := range tp.GetPortLevelSettings() {
		pp := p.f("portLevelSettings").i(i)
		if pl == nil {
			v.errorf(pp, "must not be null")
			continue
		}
		if pl.GetPort() == nil {
			v.errorf(pp.f("port"), "required")
		} else {
			v.port(pp.f("port").f("number"), int64(pl.GetPort().GetNumber()))
		}
		if pl.GetOutlierDetection() == nil && pl.GetConnectionPool() == nil && pl.GetLoadBalancer() == nil && pl.GetTls() == nil {
			v.errorf(pp, "must set at least one of loadBalancer, connectionPool, outlierDetection or tls")
			continue
		}
		v.outlierDetection(pp.f("outlierDetection"), pl.GetOutlierDetection())
		v.connectionPool(pp.f("connectionPool"), pl.GetConnectionPool())
		v.loadBalancer(pp.f("loadBalancer"), pl.GetLoadBalancer())
		v.clientTLS(pp.f("tls"), pl.GetTls())
	}
	if t := tp.GetTunnel(); t != nil {
		tpp := p.f("tunnel")
		if proto := t.GetProtocol(); proto != "" && proto != "CONNECT" && proto != "POST" {
			v.errorf(tpp.f("protocol"), "must be \"CONNECT\" or \"POST\", not %q", proto)
		}
		if h := t.GetTargetHost(); fqdnError(h) != "" && !isIP(h) {
			v.errorf(tpp.f("targetHost"), "invalid host %q: must be an FQDN or an IP address", h)
		}
		v.port(tpp.f("targetPort"), int64(t.GetTargetPort()))
	}
	if b := tp.GetRetryBudget(); b != nil && b.GetPercent() != nil {
		if pc := b.GetPercent().GetValue(); pc < 0 || pc > 100 || pc != pc {
			v.errorf(p.f("retryBudget").f("percent"), "percentage must be between 0 and 100, not %v", pc)
		}
	}
	if b := tp.GetRetryBudget(); b != nil {
		v.duration(p.f("retryBudget").f("budgetInterval"), b.GetBudgetInterval())
	}
}

func (v *validator) outlierDetection(p *fieldPath, od *networking.OutlierDetection) {
	if od == nil {
		return
	}
	v.duration(p.f("baseEjectionTime"), od.GetBaseEjectionTime())
	v.duration(p.f("interval"), od.GetInterval())
	if !od.GetSplitExternalLocalOriginErrors() && od.GetConsecutiveLocalOriginFailures().GetValue() > 0 {
		v.errorf(p.f("consecutiveLocalOriginFailures"), "needs splitExternalLocalOriginErrors: true")
	}
	v.percent(p.f("maxEjectionPercent"), od.GetMaxEjectionPercent())
	v.percent(p.f("minHealthPercent"), od.GetMinHealthPercent())
	for i, c := range od.GetOutlierDetectionHttpErrorCodes() {
		if c < 100 || c > 599 {
			v.errorf(p.f("outlierDetectionHttpErrorCodes").i(i), "must be an HTTP status between 100 and 599, not %d", c)
		}
	}
}

// connectionPool checks limits (never negative) and timeouts (at least
// 1ms); a TCP idle timeout of 0 disables it and is allowed.
func (v *validator) connectionPool(p *fieldPath, cp *networking.ConnectionPoolSettings) {
	if cp == nil {
		return
	}
	if cp.GetHttp() == nil && cp.GetTcp() == nil {
		v.errorf(p, "must set tcp, http or both")
		return
	}
	nonNegative := func(p *fieldPath, n int32) {
		if n < 0 {
			v.errorf(p, "must not be negative, not %d", n)
		}
	}
	if h := cp.GetHttp(); h != nil {
		hp := p.f("http")
		nonNegative(hp.f("http1MaxPendingRequests"), h.GetHttp1MaxPendingRequests())
		nonNegative(hp.f("http2MaxRequests"), h.GetHttp2MaxRequests())
		nonNegative(hp.f("maxRequestsPerConnection"), h.GetMaxRequestsPerConnection())
		nonNegative(hp.f("maxRetries"), h.GetMaxRetries())
		nonNegative(hp.f("maxConcurrentStreams"), h.GetMaxConcurrentStreams())
		v.duration(hp.f("idleTimeout"), h.GetIdleTimeout())
		if h.GetH2UpgradePolicy() == networking.ConnectionPoolSettings_HTTPSettings_UPGRADE && h.GetUseClientProtocol() {
			v.errorf(hp.f("useClientProtocol"), "cannot be true when h2UpgradePolicy is UPGRADE")
		}
		if ka := h.GetHttp2KeepAlive(); ka != nil {
			kp := hp.f("http2KeepAlive")
			if ka.GetInterval() == nil {
				v.errorf(kp.f("interval"), "required")
			}
			if ka.GetTimeout() == nil {
				v.errorf(kp.f("timeout"), "required")
			}
			v.duration(kp.f("interval"), ka.GetInterval())
			v.duration(kp.f("timeout"), ka.GetTimeout())
		}
	}
	if t := cp.GetTcp(); t != nil {
		tp := p.f("tcp")
		nonNegative(tp.f("maxConnections"), t.GetMaxConnections())
		v.duration(tp.f("connectTimeout"), t.GetConnectTimeout())
		v.duration(tp.f("maxConnectionDuration"), t.GetMaxConnectionDuration())
		if it := t.GetIdleTimeout(); it != nil && it.AsDuration().Milliseconds() != 0 {
			v.duration(tp.f("idleTimeout"), it)
		}
		if ka := t.GetTcpKeepalive(); ka != nil {
			v.duration(tp.f("tcpKeepalive").f("time"), ka.GetTime())
			v.duration(tp.f("tcpKeepalive").f("interval"), ka.GetInterval())
		}
	}
}

func (v *validator) loadBalancer(p *fieldPath, lb *networking.LoadBalancerSettings) {
	if lb == nil {
		return
	}
	if ch := lb.GetConsistentHash(); ch != nil {
		cp := p.f("consistentHash")
		if c := ch.GetHttpCookie(); c != nil {
			if c.GetName() == "" {
				v.errorf(cp.f("httpCookie").f("name"), "required")
			}
			if c.GetTtl().AsDuration() < 0 {
				v.errorf(cp.f("httpCookie").f("ttl"), "must not be negative")
			}
			names := map[string]bool{}
			for i, a := range c.GetAttributes() {
				ap := cp.f("httpCookie").f("attributes").i(i)
				switch {
				case a.GetName() == "":
					v.errorf(ap.f("name"), "required")
				case names[a.GetName()]:
					v.errorf(ap.f("name"), "duplicate cookie attribute %q", a.GetName())
				}
				names[a.GetName()] = true
			}
		}
		if ch.GetHttpHeaderName() == "" {
			if _, isHeader := ch.GetHashKey().(*networking.LoadBalancerSettings_ConsistentHashLB_HttpHeaderName); isHeader {
				v.errorf(cp.f("httpHeaderName"), "must not be empty")
			}
		}
		if ch.GetMinimumRingSize() != 0 && ch.GetHashAlgorithm() != nil { //nolint:staticcheck // still accepted
			v.errorf(cp.f("minimumRingSize"), "cannot be combined with ringHash or maglev")
		}
		if ml := ch.GetMaglev(); ml != nil {
			switch ts := ml.GetTableSize(); {
			case ts == 0:
				v.errorf(cp.f("maglev").f("tableSize"), "required")
			case ts >= 5000011:
				v.errorf(cp.f("maglev").f("tableSize"), "must be less than 5000011, not %d", ts)
			case !isPrime(ts):
				v.errorf(cp.f("maglev").f("tableSize"), "must be a prime number, not %d", ts)
			}
		}
	}
	if lb.GetLocalityLbSetting() != nil && lb.GetZoneAwareLbSetting() != nil {
		v.errorf(p.f("zoneAwareLbSetting"), "cannot be set together with localityLbSetting")
	}
	v.localityLB(p.f("localityLbSetting"), lb.GetLocalityLbSetting())
	v.duration(p.f("warmupDurationSecs"), lb.GetWarmupDurationSecs())
	if w := lb.GetWarmup(); w != nil {
		wp := p.f("warmup")
		if w.GetDuration() == nil {
			v.errorf(wp.f("duration"), "required")
		}
		v.duration(wp.f("duration"), w.GetDuration())
		if mp := w.GetMinimumPercent(); mp != nil && (mp.GetValue() < 0 || mp.GetValue() > 100) {
			v.errorf(wp.f("minimumPercent"), "percentage must be between 0 and 100, not %v", mp.GetValue())
		}
		if a := w.GetAggression(); a != nil && !(a.GetValue() > 0) {
			v.errorf(wp.f("aggression"), "must be greater than 0, not %v", a.GetValue())
		}
	}
}

// isPrime is trial division; Maglev table sizes are below 5,000,011.
func isPrime(x uint64) bool {
	if x < 2 {
		return false
	}
	if x < 4 {
		return true
	}
	if x%2 == 0 {
		return false
	}
	for f := uint64(3); f <= uint64(math.Sqrt(float64(x))); f += 2 {
		if x%f == 0 {
			return false
		}
	}
	return true
}

func (v *validator) localityLB(p *fieldPath, l *networking.LocalityLoadBalancerSetting) {
	if l == nil {
		return
	}
	if len(l.GetDistribute()) > 0 && len(l.GetFailover()) > 0 {
		v.errorf(p, "cannot set both distribute and failover")
		return
	}
	if len(l.GetFailover()) > 0 {
		for i, label := range l.GetFailoverPriority() {
			switch label {
			case "topology.kubernetes.io/region", "topology.kubernetes.io/zone", "topology.istio.io/subzone":
				v.errorf(p.f("failoverPriority").i(i), "cannot use topology label %q together with failover", label)
			}
		}
	}
	for i, d := range l.GetDistribute() {
		dp := p.f("distribute").i(i)
		v.locality(dp.f("from"), d.GetFrom())
		var total uint64
		for _, to := range sortedMapKeys(d.GetTo()) {
			w := d.GetTo()[to]
			if w == 0 || w > 100 {
				v.errorf(dp.f("to").k(to), "weight must be between 1 and 100, not %d", w)
			}
			total += uint64(w)
			v.locality(dp.f("to").k(to), to)
		}
		if total != 100 {
			v.errorf(dp.f("to"), "weights must add up to 100, not %d", total)
		}
	}
	for i, f := range l.GetFailover() {
		fp := p.f("failover").i(i)
		switch {
		case f.GetFrom() == f.GetTo():
			v.errorf(fp, "from and to must be different regions")
		case strings.Contains(f.GetFrom(), "/") || strings.Contains(f.GetTo(), "/"):
			v.errorf(fp, "from and to must be regions, not zones")
		case strings.Contains(f.GetFrom(), "*") || strings.Contains(f.GetTo(), "*"):
			v.errorf(fp, "from and to must not contain wildcards")
		}
	}
}

// locality checks "region/zone/subzone", where a "*" may only end it.
func (v *validator) locality(p *fieldPath, loc string) {
	if loc == "" || loc == "*" {
		if loc == "" {
			v.errorf(p, "locality must not be empty")
		}
		return
	}
	parts := strings.Split(loc, "/")
	if len(parts) > 3 {
		v.errorf(p, "invalid locality %q: at most region/zone/subzone", loc)
		return
	}
	for i, part := range parts {
		switch {
		case part == "":
			v.errorf(p, "invalid locality %q: empty part", loc)
			return
		case part == "*" && i != len(parts)-1:
			v.errorf(p, "invalid locality %q: \"*\" may only be the last part", loc)
			return
		case part != "*" && strings.Contains(part, "*"):
			v.errorf(p, "invalid locality %q: \"*\" must be a whole part", loc)
			return
		}
	}
}

// clientTLS checks a DestinationRule's TLS settings: MUTUAL needs a client
// certificate and key, unless credentialName fetches them from a secret.
func (v *validator) clientTLS(p *fieldPath, t *networking.ClientTLSSettings) {
	if t == nil {
		return
	}
	mode := t.GetMode()
	if t.GetInsecureSkipVerify().GetValue() {
		switch {
		case mode == networking.ClientTLSSettings_SIMPLE && (t.GetCaCertificates() != "" || t.GetCredentialName() != "" || t.GetSubjectAltNames() != nil):
			v.errorf(p.f("insecureSkipVerify"), "cannot be combined with caCertificates, credentialName or subjectAltNames")
		case mode == networking.ClientTLSSettings_MUTUAL && (t.GetCaCertificates() != "" || t.GetSubjectAltNames() != nil):
			v.errorf(p.f("insecureSkipVerify"), "cannot be combined with caCertificates or subjectAltNames")
		}
	}
	simpleOrMutual := mode == networking.ClientTLSSettings_SIMPLE || mode == networking.ClientTLSSettings_MUTUAL
	if simpleOrMutual && t.GetCredentialName() != "" {
		if t.GetClientCertificate() != "" || t.GetCaCertificates() != "" || t.GetPrivateKey() != "" || t.GetCaCrl() != "" {
			v.errorf(p.f("credentialName"), "cannot be combined with clientCertificate, privateKey, caCertificates or caCrl")
		}
		return
	}
	if mode == networking.ClientTLSSettings_MUTUAL {
		if t.GetClientCertificate() == "" {
			v.errorf(p.f("clientCertificate"), "required for MUTUAL mode (or set credentialName)")
		}
		if t.GetPrivateKey() == "" {
			v.errorf(p.f("privateKey"), "required for MUTUAL mode (or set credentialName)")
		}
	}
}

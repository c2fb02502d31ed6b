package meshconfig

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"k8s.io/apimachinery/pkg/util/validation"

	meshv1 "istio.io/api/mesh/v1alpha1"
)

// Validate checks a mesh config (defaults applied) as istiod's
// ValidateMeshConfig does, for what pilotfish reads or forwards: ports,
// timeouts, defaultConfig's required fields and addresses, the trust
// domains, serviceSettings hosts, localityLbSetting, meshMTLS,
// defaultTrafficPolicy's bounds and discoverySelectors. (istiod also
// checks tracing and extension providers' settings; pilotfish does not
// honour those fields, and reports them unsupported instead.) Each
// problem names its field; Line is left for the caller.
func Validate(mc *meshv1.MeshConfig) []*Problem {
	var v validator
	v.port("proxyListenPort", mc.ProxyListenPort)
	if d := mc.ConnectTimeout; d != nil {
		if err := checkDuration(d); err != nil {
			v.add("connectTimeout", err.Error())
		} else if x := d.AsDuration(); x < time.Millisecond || x > time.Hour {
			v.add("connectTimeout", fmt.Sprintf("%v must be between 1ms and 1h", x))
		}
	}
	if d := mc.ProtocolDetectionTimeout.AsDuration(); d != 0 && d%time.Millisecond != 0 {
		v.add("protocolDetectionTimeout", "only durations to ms precision are supported")
	}
	if mc.DefaultConfig == nil {
		v.add("defaultConfig", "missing default config")
	} else {
		v.proxyConfig(mc.DefaultConfig)
	}
	v.localityLb(mc)
	for i, s := range mc.ServiceSettings {
		for j, h := range s.Hosts {
			if err := checkWildcardDomain(h); err != nil {
				v.add(fmt.Sprintf("serviceSettings[%d].hosts[%d]", i, j), err.Error())
			}
		}
	}
	if err := checkTrustDomain(mc.TrustDomain); err != nil {
		v.add("trustDomain", err.Error())
	}
	for i, a := range mc.TrustDomainAliases {
		if err := checkTrustDomain(a); err != nil {
			// Sorted by the merge: the line is found by value (Parse).
			v.add(fmt.Sprintf("trustDomainAliases[%d]", i), err.Error())
			v.probs[len(v.probs)-1].value = a
		}
	}
	if mc.MeshMTLS != nil && mc.MeshMTLS.EcdhCurves != nil {
		v.add("meshMTLS.ecdhCurves", "mesh TLS does not support ECDH curves configuration")
	}
	v.trafficPolicy(mc.DefaultTrafficPolicy)
	for i, s := range mc.DiscoverySelectors {
		if _, err := Selector(s); err != nil {
			v.add(fmt.Sprintf("discoverySelectors[%d]", i), err.Error())
		}
	}
	return v.probs
}

type validator struct{ probs []*Problem }

func (v *validator) add(field, msg string) {
	v.probs = append(v.probs, &Problem{Field: field, Message: msg, cause: ErrInvalid})
}

func (v *validator) port(field string, p int32) {
	if p < 1 || p > 65535 {
		v.add(field, fmt.Sprintf("port number %d must be in the range 1..65535", p))
	}
}

func (v *validator) address(field, addr string) {
	if err := checkProxyAddress(addr); err != nil {
		v.add(field, err.Error())
	}
}

func (v *validator) proxyConfig(pc *meshv1.ProxyConfig) {
	const p = "defaultConfig."
	if pc.ConfigPath == "" {
		v.add(p+"configPath", "config path must be set")
	}
	if pc.BinaryPath == "" {
		v.add(p+"binaryPath", "binary path must be set")
	}
	switch n := pc.ClusterName.(type) {
	case *meshv1.ProxyConfig_ServiceCluster:
		if n.ServiceCluster == "" {
			v.add(p+"serviceCluster", "service cluster must be specified")
		}
	case *meshv1.ProxyConfig_TracingServiceName_:
	default:
		v.add(p+"serviceCluster", "oneof service cluster or tracing service name must be specified")
	}
	if err := checkDuration(pc.DrainDuration); err != nil {
		v.add(p+"drainDuration", "invalid drain duration: "+err.Error())
	} else if pc.DrainDuration.AsDuration()%time.Second != 0 {
		v.add(p+"drainDuration", "drain time only supports durations to seconds precision")
	}
	if pc.DiscoveryAddress == "" {
		v.add(p+"discoveryAddress", "discovery address must be set to the proxy discovery service")
	} else {
		v.address(p+"discoveryAddress", pc.DiscoveryAddress)
	}
	if pc.StatsdUdpAddress != "" {
		v.address(p+"statsdUdpAddress", pc.StatsdUdpAddress)
	}
	if a := pc.GetEnvoyMetricsService().GetAddress(); a != "" {
		v.address(p+"envoyMetricsService.address", a)
	}
	if a := pc.GetEnvoyAccessLogService().GetAddress(); a != "" {
		v.address(p+"envoyAccessLogService.address", a)
	}
	v.port(p+"proxyAdminPort", pc.ProxyAdminPort)
	v.port(p+"statusPort", pc.StatusPort)
	if a := pc.ControlPlaneAuthPolicy; a != meshv1.AuthenticationPolicy_NONE && a != meshv1.AuthenticationPolicy_MUTUAL_TLS {
		v.add(p+"controlPlaneAuthPolicy", fmt.Sprintf("unrecognized control plane auth policy %q", a))
	}
}

func (v *validator) localityLb(mc *meshv1.MeshConfig) {
	lb := mc.LocalityLbSetting
	if lb == nil {
		return
	}
	const p = "localityLbSetting."
	if len(lb.Distribute) > 0 && len(lb.Failover) > 0 {
		v.add("localityLbSetting", "can not simultaneously specify 'distribute' and 'failover'")
		return
	}
	if len(lb.Failover) > 0 {
		for _, l := range lb.FailoverPriority {
			switch l {
			case "topology.kubernetes.io/region", "topology.kubernetes.io/zone", "topology.istio.io/subzone":
				v.add(p+"failoverPriority", fmt.Sprintf("can not simultaneously set 'failover' and topology label '%s' in 'failover_priority'", l))
				return
			}
		}
	}
	for i, d := range lb.Distribute {
		var total uint32
		for _, w := range d.To {
			if w == 0 || w > 100 {
				v.add(fmt.Sprintf(p+"distribute[%d].to", i), "locality weight must be in range [1, 100]")
				return
			}
			total += w
		}
		if total != 100 {
			v.add(fmt.Sprintf(p+"distribute[%d].to", i), fmt.Sprintf("total locality weight %v != 100", total))
			return
		}
	}
	for i, f := range lb.Failover {
		field := fmt.Sprintf(p+"failover[%d]", i)
		if f.From == f.To {
			v.add(field, "locality lb failover settings must specify different regions")
		}
		if strings.Contains(f.From, "/") || strings.Contains(f.To, "/") {
			v.add(field, "locality lb failover only specify region")
		}
		if strings.Contains(f.From, "*") || strings.Contains(f.To, "*") {
			v.add(field, "locality lb failover region should not contain '*' wildcard")
		}
	}
}

func (v *validator) trafficPolicy(dtp *meshv1.MeshConfig_DefaultTrafficPolicy) {
	const p = "defaultTrafficPolicy."
	cp := dtp.GetConnectionPool()
	if cp != nil {
		if cp.Http == nil && cp.Tcp == nil {
			v.add(p+"connectionPool", "connection pool must have at least one field")
		}
		if h := cp.Http; h != nil {
			for name, n := range map[string]int32{"http1MaxPendingRequests": h.Http1MaxPendingRequests, "http2MaxRequests": h.Http2MaxRequests,
				"maxRequestsPerConnection": h.MaxRequestsPerConnection, "maxRetries": h.MaxRetries, "maxConcurrentStreams": h.MaxConcurrentStreams} {
				if n < 0 {
					v.add(p+"connectionPool.http."+name, "must be non-negative")
				}
			}
			v.optDuration(p+"connectionPool.http.idleTimeout", h.IdleTimeout)
		}
		if t := cp.Tcp; t != nil {
			if t.MaxConnections < 0 {
				v.add(p+"connectionPool.tcp.maxConnections", "must be non-negative")
			}
			v.optDuration(p+"connectionPool.tcp.connectTimeout", t.ConnectTimeout)
			v.optDuration(p+"connectionPool.tcp.maxConnectionDuration", t.MaxConnectionDuration)
			if ka := t.TcpKeepalive; ka != nil {
				v.optDuration(p+"connectionPool.tcp.tcpKeepalive.time", ka.Time)
				v.optDuration(p+"connectionPool.tcp.tcpKeepalive.interval", ka.Interval)
			}
		}
	}
	if od := dtp.GetOutlierDetection(); od != nil {
		v.optDuration(p+"outlierDetection.baseEjectionTime", od.BaseEjectionTime)
		v.optDuration(p+"outlierDetection.interval", od.Interval)
		if !od.SplitExternalLocalOriginErrors && od.ConsecutiveLocalOriginFailures.GetValue() > 0 {
			v.add(p+"outlierDetection.consecutiveLocalOriginFailures", "specified, but split external local origin errors is set to false")
		}
		if od.MaxEjectionPercent < 0 || od.MaxEjectionPercent > 100 {
			v.add(p+"outlierDetection.maxEjectionPercent", "percentage must be in range [0, 100]")
		}
		if od.MinHealthPercent < 0 || od.MinHealthPercent > 100 {
			v.add(p+"outlierDetection.minHealthPercent", "percentage must be in range [0, 100]")
		}
	}
}

func (v *validator) optDuration(field string, d *durationpb.Duration) {
	if d == nil {
		return
	}
	if err := checkDuration(d); err != nil {
		v.add(field, err.Error())
	}
}

// checkDuration is istiod's ValidateDuration: at least 1ms, ms precision.
func checkDuration(d *durationpb.Duration) error {
	x := d.AsDuration()
	if x < time.Millisecond {
		return fmt.Errorf("duration must be greater than 1ms")
	}
	if x%time.Millisecond != 0 {
		return fmt.Errorf("only durations to ms precision are supported")
	}
	return nil
}

// checkTrustDomain is istiod's ValidateTrustDomain.
func checkTrustDomain(d string) error {
	if d == "" {
		return fmt.Errorf("empty domain name not allowed")
	}
	parts := strings.Split(d, ".")
	for i, l := range parts {
		if i == len(parts)-1 && l == "" {
			return nil
		}
		if len(validation.IsDNS1123Label(l)) > 0 {
			return fmt.Errorf("trust domain name %q invalid", d)
		}
	}
	return nil
}

// checkWildcardDomain is istiod's ValidateWildcardDomain.
func checkWildcardDomain(d string) error {
	if len(d) > 255 {
		return fmt.Errorf("domain name %q too long (max 255)", d)
	}
	if d == "" {
		return fmt.Errorf("empty domain name not allowed")
	}
	first, rest, more := strings.Cut(d, ".")
	if first != "*" && !(strings.HasPrefix(first, "*") && len(validation.IsDNS1123Label(first[1:])) == 0) &&
		len(validation.IsDNS1123Label(first)) > 0 {
		return fmt.Errorf("domain name %q invalid (label %q invalid)", d, first)
	}
	if more {
		return checkDNSLabels(rest)
	}
	return nil
}

func checkDNSLabels(d string) error {
	parts := strings.Split(d, ".")
	if _, err := strconv.Atoi(parts[len(parts)-1]); err == nil {
		return fmt.Errorf("domain name %q invalid (top level domain %q cannot be all-numeric)", d, parts[len(parts)-1])
	}
	for i, l := range parts {
		if i == len(parts)-1 && l == "" {
			return nil
		}
		if len(validation.IsDNS1123Label(l)) > 0 {
			return fmt.Errorf("domain name %q invalid (label %q invalid)", d, l)
		}
	}
	return nil
}

// checkProxyAddress is istiod's ValidateProxyAddress: host:port with a
// valid port and an FQDN or IP host.
func checkProxyAddress(addr string) error {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("unable to split %q: %v", addr, err)
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return fmt.Errorf("port (%s) is not a number: %v", p, err)
	}
	if port < 1 || port > 65535 {
		return fmt.Errorf("port number %d must be in the range 1..65535", port)
	}
	if host == "" || len(host) > 255 || checkDNSLabels(host) != nil {
		if _, err := netip.ParseAddr(host); err != nil {
			return fmt.Errorf("%q is not a valid hostname or an IP address", host)
		}
	}
	return nil
}

package encode

import (
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tcp "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/pilotfish-mesh/pilotfish/index"
)

func parsePrefixOrAddr(s string) (netip.Prefix, error) {
	if p, err := netip.ParsePrefix(s); err == nil {
		return p, nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// lsIsTLS: TLS and HTTPS ports carry TLS the sidecar does not terminate.
func lsIsTLS(p index.Protocol) bool { return p == index.ProtocolTLS || p == index.ProtocolHTTPS }

// serviceCIDRs returns the destination CIDRs of a service on a wildcard
// listener: its addresses when the first one is a CIDR (istiod falls back
// to 0.0.0.0 with a prefix match), else none.
func (k olIn) serviceCIDRs(svc *index.Service) []string {
	if !k.wildcard() || len(svc.Addresses) == 0 || svc.Addresses[0].IsSingleIP() {
		return nil
	}
	out := make([]string, 0, len(svc.Addresses))
	for _, a := range svc.Addresses {
		out = append(out, a.String())
	}
	return out
}

// hasVIP reports whether a service has a single-address VIP.
func hasVIP(svc *index.Service) bool {
	return len(svc.Addresses) > 0 && svc.Addresses[0].IsSingleIP() && !svc.Addresses[0].Addr().IsUnspecified()
}

// tcpChains is istiod's buildSidecarOutboundTCPListenerOpts: TLS chains
// for TLS ports, TCP chains otherwise.
func (k olIn) tcpChains(ls *ListenerService) []*lsChain {
	if lsIsTLS(k.protocolOf(ls.Service)) {
		return k.tlsChains(ls)
	}
	return k.plainTCPChains(ls)
}

// lsMatches is istiod's matchTCP and matchTLS for a sidecar: gateways
// (if any) name "mesh", the sourceLabels are among the proxy's (the
// service's SourceLabels), the port is the listener's, the
// sourceNamespace the proxy's.
func (k olIn) lsMatches(ls *ListenerService, gateways []string, labels map[string]string, port uint32, sourceNS string) bool {
	if len(gateways) > 0 && !slices.Contains(gateways, meshGatewayName) {
		return false
	}
	if !labelsHold(ls.SourceLabels, labels) {
		return false
	}
	if port != 0 && port != k.Port {
		return false
	}
	return sourceNS == "" || sourceNS == k.Namespace
}

// tlsChains is istiod's buildSidecarOutboundTLSFilterChainOpts.
func (k olIn) tlsChains(ls *ListenerService) []*lsChain {
	cidrs := k.serviceCIDRs(ls.Service)
	var out []*lsChain
	var handled []string
	for _, c := range ls.VirtualServices {
		vs, _ := c.Spec.(*networking.VirtualService)
		for _, tr := range vs.GetTls() {
			if len(tr.GetRoute()) == 0 {
				continue
			}
			for _, m := range tr.GetMatch() {
				if !k.lsMatches(ls, m.GetGateways(), m.GetSourceLabels(), m.GetPort(), m.GetSourceNamespace()) {
					continue
				}
				chainCIDRs := cidrs
				if len(m.GetDestinationSubnets()) > 0 {
					chainCIDRs = m.GetDestinationSubnets()
				}
				h := strings.Join(m.GetSniHosts(), ",") + "|" + strings.Join(m.GetDestinationSubnets(), ",")
				if !slices.Contains(handled, h) {
					out = append(out, &lsChain{
						metadata: rtConfigMetadata("virtual-service", k.names.String(c.Key.Namespace), k.names.String(c.Key.Name)),
						sni:      m.GetSniHosts(),
						cidrs:    chainCIDRs,
						filters:  k.routeFilters(ls, c, tr.GetRoute()),
					})
					handled = append(handled, h)
				}
			}
		}
	}
	if len(out) > 0 {
		return out
	}
	host := k.names.String(ls.Service.Key.Host)
	var sni []string
	if len(cidrs) > 0 || (!hasVIP(ls.Service) && k.wildcard()) {
		sni = []string{host}
	}
	cluster := outboundClusterName(k.servicePort(ls.Service), "", host)
	return []*lsChain{{sni: sni, cidrs: cidrs, filters: []*listener.Filter{ls.tcpProxy(cluster, cluster, host, "")}}}
}

// servicePort is the port a route without one goes to: the service's only
// port, else the listener's.
func (k olIn) servicePort(svc *index.Service) uint32 {
	if svc != nil && len(svc.Ports) == 1 {
		return svc.Ports[0].Number
	}
	return k.Port
}

// plainTCPChains is istiod's buildSidecarOutboundTCPFilterChainOpts.
func (k olIn) plainTCPChains(ls *ListenerService) []*lsChain {
	cidrs := k.serviceCIDRs(ls.Service)
	var out []*lsChain
	defaultAdded := false
loop:
	for _, c := range ls.VirtualServices {
		vs, _ := c.Spec.(*networking.VirtualService)
		meta := rtConfigMetadata("virtual-service", k.names.String(c.Key.Namespace), k.names.String(c.Key.Name))
		for _, tr := range vs.GetTcp() {
			if len(tr.GetRoute()) == 0 {
				continue
			}
			if len(tr.GetMatch()) == 0 {
				out = append(out, &lsChain{metadata: meta, cidrs: cidrs, filters: k.routeFilters(ls, c, tr.GetRoute())})
				defaultAdded = true
				break loop
			}
			var subnets []string
			for _, m := range tr.GetMatch() {
				if !k.lsMatches(ls, m.GetGateways(), m.GetSourceLabels(), m.GetPort(), m.GetSourceNamespace()) {
					continue
				}
				if len(m.GetDestinationSubnets()) == 0 {
					out = append(out, &lsChain{metadata: meta, cidrs: cidrs, filters: k.routeFilters(ls, c, tr.GetRoute())})
					defaultAdded = true
					break loop
				}
				subnets = append(subnets, m.GetDestinationSubnets()...)
			}
			if len(subnets) > 0 {
				out = append(out, &lsChain{cidrs: subnets, filters: k.routeFilters(ls, c, tr.GetRoute())})
				if lsSameSet(subnets, cidrs, "") {
					defaultAdded = true
				}
			}
		}
	}
	if !defaultAdded {
		host := k.names.String(ls.Service.Key.Host)
		cluster := outboundClusterName(k.servicePort(ls.Service), "", host)
		out = append(out, &lsChain{cidrs: cidrs, filters: []*listener.Filter{ls.tcpProxy(cluster, cluster, host, "")}})
	}
	return out
}

// routeFilters is istiod's buildOutboundNetworkFilters: a TCP proxy to one
// destination, or weighted over several.
func (k olIn) routeFilters(ls *ListenerService, c *index.Config, routes []*networking.RouteDestination) []*listener.Filter {
	ns := k.names.String(c.Key.Namespace)
	// istiod applies the rule of the first destination's host.
	first := rtResolveHost(routes[0].GetDestination().GetHost(), ns, k.DomainSuffix)
	if len(routes) == 1 {
		cluster := k.destinationCluster(ls, routes[0].GetDestination(), ns)
		return []*listener.Filter{ls.tcpProxy(cluster, cluster, first, routes[0].GetDestination().GetSubset())}
	}
	w := &tcp.TcpProxy_WeightedCluster{}
	for _, r := range routes {
		if r.GetWeight() > 0 {
			w.Clusters = append(w.Clusters, &tcp.TcpProxy_WeightedCluster_ClusterWeight{
				Name:   k.destinationCluster(ls, r.GetDestination(), ns),
				Weight: uint32(r.GetWeight()),
			})
		}
	}
	p := &tcp.TcpProxy{
		StatPrefix:       k.names.String(c.Key.Name) + "." + ns,
		ClusterSpecifier: &tcp.TcpProxy_WeightedClusters{WeightedClusters: w},
	}
	ls.applyRule(p, first, "")
	return []*listener.Filter{lsTCPProxyFilter(p)}
}

// tcpProxy is a TCP proxy to one cluster with the TCP settings of host's
// DestinationRule.
func (ls *ListenerService) tcpProxy(statPrefix, cluster, host, subset string) *listener.Filter {
	p := &tcp.TcpProxy{StatPrefix: statPrefix, ClusterSpecifier: &tcp.TcpProxy_Cluster{Cluster: cluster}}
	ls.applyRule(p, host, subset)
	return lsTCPProxyFilter(p)
}

// applyRule sets what istiod takes from a DestinationRule on a TCP proxy:
// the connection pool's idle timeout and maximum connection duration,
// source IP hashing (maybeSetHashPolicy) and the tunnel.
func (ls *ListenerService) applyRule(p *tcp.TcpProxy, host, subset string) {
	var dr *networking.DestinationRule
	for i := range ls.DestinationRules {
		if ls.DestinationRules[i].Host == host {
			dr, _ = ls.DestinationRules[i].Rule.Spec.(*networking.DestinationRule)
			break
		}
	}
	if dr == nil {
		return
	}
	tcpPool := dr.GetTrafficPolicy().GetConnectionPool().GetTcp()
	p.IdleTimeout = tcpPool.GetIdleTimeout()
	p.MaxDownstreamConnectionDuration = tcpPool.GetMaxConnectionDuration()
	sourceIP := dr.GetTrafficPolicy().GetLoadBalancer().GetConsistentHash().GetUseSourceIp()
	for _, s := range dr.GetSubsets() {
		if s.GetName() != subset {
			continue
		}
		if lb := s.GetTrafficPolicy().GetLoadBalancer(); lb != nil {
			sourceIP = lb.GetConsistentHash().GetUseSourceIp()
		}
		break
	}
	if sourceIP {
		p.HashPolicy = []*typev3.HashPolicy{{PolicySpecifier: &typev3.HashPolicy_SourceIp_{SourceIp: &typev3.HashPolicy_SourceIp{}}}}
	}
	applyTunnel(p, dr, subset)
}

// applyTunnel is istiod's tunnelingconfig.Apply: the traffic policy's
// tunnel (a subset's for a route to a subset, not falling back to the
// rule's) makes the proxy tunnel the connection over HTTP CONNECT, or
// POST, to targetHost:targetPort. A weighted route takes the rule's.
func applyTunnel(p *tcp.TcpProxy, dr *networking.DestinationRule, subset string) {
	var t *networking.TrafficPolicy_TunnelSettings
	if subset != "" {
		for _, s := range dr.GetSubsets() {
			if s.GetName() == subset {
				t = s.GetTrafficPolicy().GetTunnel()
				break
			}
		}
	} else {
		t = dr.GetTrafficPolicy().GetTunnel()
	}
	if t == nil {
		return
	}
	p.TunnelingConfig = &tcp.TcpProxy_TunnelingConfig{
		Hostname: net.JoinHostPort(t.GetTargetHost(), strconv.FormatUint(uint64(t.GetTargetPort()), 10)),
		UsePost:  t.GetProtocol() == "POST",
	}
}

// destinationCluster is istiod's GetDestinationCluster for TCP routes: the
// destination's port, else the destination service's only port, else the
// listener's.
func (k olIn) destinationCluster(ls *ListenerService, d *networking.Destination, ns string) string {
	if d.GetHost() == "" {
		return "UnknownService"
	}
	host := rtResolveHost(d.GetHost(), ns, k.DomainSuffix)
	var svc *index.Service
	for _, s := range ls.Destinations {
		if k.names.String(s.Key.Host) == host {
			svc = s
			break
		}
	}
	port := k.Port
	switch {
	case d.GetPort() != nil:
		port = d.GetPort().GetNumber()
	case svc != nil && len(svc.Ports) == 1:
		port = svc.Ports[0].Number
	}
	return outboundClusterName(port, d.GetSubset(), host)
}

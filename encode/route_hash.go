package encode

import (
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	networking "istio.io/api/networking/v1alpha3"
)

// destinationRule returns the DestinationRule of host from the key, or nil.
func (k *VirtualHostKey) destinationRule(host string) *networking.DestinationRule {
	for i := range k.DestinationRules {
		if k.DestinationRules[i].Host == host {
			dr, _ := k.DestinationRules[i].Rule.Spec.(*networking.DestinationRule)
			return dr
		}
	}
	return nil
}

// serviceConsistentHash is istiod's hashForService: the rule's consistent
// hash, or its port-level one for the route's port.
func (k *VirtualHostKey) serviceConsistentHash(host string) *networking.LoadBalancerSettings_ConsistentHashLB {
	dr := k.destinationRule(host)
	if dr == nil {
		return nil
	}
	ch := dr.GetTrafficPolicy().GetLoadBalancer().GetConsistentHash()
	for _, pls := range dr.GetTrafficPolicy().GetPortLevelSettings() {
		if pls.GetPort().GetNumber() == k.Port {
			if c := pls.GetLoadBalancer().GetConsistentHash(); c != nil {
				ch = c
			}
			break
		}
	}
	return ch
}

// destinationConsistentHash is istiod's HashForHTTPDestination: the most
// specific of the subset's port-level, the subset's, the rule's port-level
// (for a destination with a port) and the rule's consistent hash.
func (rc *routeCtx) destinationConsistentHash(d *networking.Destination) *networking.LoadBalancerSettings_ConsistentHashLB {
	if d.GetHost() == "" {
		return nil
	}
	dr := rc.k.destinationRule(rtResolveHost(d.GetHost(), rc.vsNamespace(), rc.k.DomainSuffix))
	if dr == nil {
		return nil
	}
	portLevel := func(pls []*networking.TrafficPolicy_PortTrafficPolicy) *networking.LoadBalancerSettings_ConsistentHashLB {
		if d.GetPort() == nil {
			return nil
		}
		for _, s := range pls {
			if s.GetPort().GetNumber() == d.GetPort().GetNumber() {
				return s.GetLoadBalancer().GetConsistentHash()
			}
		}
		return nil
	}
	ch := dr.GetTrafficPolicy().GetLoadBalancer().GetConsistentHash()
	pls := portLevel(dr.GetTrafficPolicy().GetPortLevelSettings())
	var subset, subsetPLS *networking.LoadBalancerSettings_ConsistentHashLB
	for _, s := range dr.GetSubsets() {
		if s.GetName() == d.GetSubset() {
			subset = s.GetTrafficPolicy().GetLoadBalancer().GetConsistentHash()
			subsetPLS = portLevel(s.GetTrafficPolicy().GetPortLevelSettings())
			break
		}
	}
	switch {
	case subsetPLS != nil:
		return subsetPLS
	case subset != nil:
		return subset
	case pls != nil:
		return pls
	}
	return ch
}

// rtHashPolicy is istiod's ConsistentHashToHashPolicy; nil for none (and
// for ring-hash settings without a hash key).
func rtHashPolicy(ch *networking.LoadBalancerSettings_ConsistentHashLB) *route.RouteAction_HashPolicy {
	switch key := ch.GetHashKey().(type) {
	case *networking.LoadBalancerSettings_ConsistentHashLB_HttpHeaderName:
		return &route.RouteAction_HashPolicy{PolicySpecifier: &route.RouteAction_HashPolicy_Header_{
			Header: &route.RouteAction_HashPolicy_Header{HeaderName: key.HttpHeaderName},
		}}
	case *networking.LoadBalancerSettings_ConsistentHashLB_HttpCookie:
		c := key.HttpCookie
		cookie := &route.RouteAction_HashPolicy_Cookie{Name: c.GetName(), Ttl: c.GetTtl(), Path: c.GetPath()}
		for _, a := range c.GetAttributes() {
			cookie.Attributes = append(cookie.Attributes, &route.RouteAction_HashPolicy_CookieAttribute{Name: a.GetName(), Value: a.GetValue()})
		}
		return &route.RouteAction_HashPolicy{PolicySpecifier: &route.RouteAction_HashPolicy_Cookie_{Cookie: cookie}}
	case *networking.LoadBalancerSettings_ConsistentHashLB_UseSourceIp:
		return &route.RouteAction_HashPolicy{PolicySpecifier: &route.RouteAction_HashPolicy_ConnectionProperties_{
			ConnectionProperties: &route.RouteAction_HashPolicy_ConnectionProperties{SourceIp: key.UseSourceIp},
		}}
	case *networking.LoadBalancerSettings_ConsistentHashLB_HttpQueryParameterName:
		return &route.RouteAction_HashPolicy{PolicySpecifier: &route.RouteAction_HashPolicy_QueryParameter_{
			QueryParameter: &route.RouteAction_HashPolicy_QueryParameter{Name: key.HttpQueryParameterName},
		}}
	}
	return nil
}

package encode

import (
	"math"
	"slices"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
	networking "istio.io/api/networking/v1alpha3"
)

// epMeshLocalityLB is istiod's default meshConfig.localityLbSetting
// ({enabled: true}): with outlier detection on, endpoints get priorities by
// locality distance from the proxy.
var epMeshLocalityLB = &networking.LocalityLoadBalancerSetting{Enabled: wrapperspb.Bool(true)}

// epEffectiveLocalityLB is istiod's GetEffectiveLbSetting restricted to
// locality settings: the DestinationRule's localityLbSetting (unless
// disabled), else the mesh's (meshConfig.localityLbSetting; nil: istiod's
// default). Zone-aware settings are not supported.
func epEffectiveLocalityLB(lb *networking.LoadBalancerSettings, mesh *LocalityLB) (*networking.LocalityLoadBalancerSetting, bool) {
	if s := lb.GetLocalityLbSetting(); s != nil {
		if s.GetEnabled() != nil && !s.GetEnabled().GetValue() {
			return nil, false
		}
		return s, true
	}
	return mesh.setting()
}

// epParseLocality splits "region/zone/subzone" into an Envoy locality. The
// result is never nil: gRPC clients NACK endpoints without one.
func epParseLocality(s string) *corev3.Locality {
	l := &corev3.Locality{}
	if s == "" {
		return l
	}
	region, rest, _ := strings.Cut(s, "/")
	zone, subzone, _ := strings.Cut(rest, "/")
	l.Region, l.Zone, l.SubZone = region, zone, subzone
	return l
}

// epLocalityMatch is istiod's LocalityMatch: rule is "region/zone/subzone"
// with "*" wildcards; missing trailing parts match anything.
func epLocalityMatch(l *corev3.Locality, rule string) bool {
	if rule == "*" {
		return true
	}
	region, rest, _ := strings.Cut(rule, "/")
	zone, subzone, _ := strings.Cut(rest, "/")
	if region != "*" && region != l.GetRegion() {
		return false
	}
	if zone != "" && zone != "*" && zone != l.GetZone() {
		return false
	}
	if subzone != "" && subzone != "*" && subzone != l.GetSubZone() {
		return false
	}
	return true
}

// epLbPriority is istiod's LbPriority: 0 same subzone, 1 same zone, 2 same
// region, 3 elsewhere.
func epLbPriority(proxy, ep *corev3.Locality) int {
	if proxy.GetRegion() == ep.GetRegion() {
		if proxy.GetZone() == ep.GetZone() {
			if proxy.GetSubZone() == ep.GetSubZone() {
				return 0
			}
			return 1
		}
		return 2
	}
	return 3
}

// epApplyLocalityLB is istiod's ApplyLocalityLoadBalancer: distribute
// weights, or with failover on, priorities relative to the proxy's
// locality. With a failoverPriority list, the caller has already split the
// localities by label priority (epSplitFailoverPriority, or its wire form);
// locality priorities then apply on top only when failover rules are
// listed too, as istiod does.
//
// It sets the localities' priorities and weights; a distribution rule that
// leaves localities unmatched reports them in dropped (their endpoints are
// not sent).
func epApplyLocalityLB(eps []*endpointv3.LocalityLbEndpoints, proxyLocality string, s *networking.LocalityLoadBalancerSetting, failover bool) (dropped []bool) {
	if s == nil || len(eps) == 0 {
		return nil
	}
	proxy := epParseLocality(proxyLocality)
	if d := s.GetDistribute(); d != nil {
		return epApplyLocalityWeights(eps, proxy, d)
	}
	if failover && (len(s.GetFailoverPriority()) == 0 || len(s.GetFailover()) != 0) {
		epApplyLocalityFailover(eps, proxy, s.GetFailover())
	}
	return nil
}

func epApplyLocalityFailover(eps []*endpointv3.LocalityLbEndpoints, proxy *corev3.Locality, failover []*networking.LocalityLoadBalancerSetting_Failover) {
	prios := make([]uint32, len(eps))
	for i, le := range eps {
		p := epLbPriority(proxy, le.Locality)
		if p == 3 {
			for _, f := range failover {
				if f.From == proxy.Region {
					if le.Locality == nil || le.Locality.Region != f.To {
						p = 4
					}
					break
				}
			}
		}
		prios[i] = le.Priority*5 + uint32(p)
	}
	// Compact the priorities to 0..n-1, keeping their order.
	epRankPriorities(prios)
	for i := range eps {
		eps[i].Priority = prios[i]
	}
}

func epApplyLocalityWeights(eps []*endpointv3.LocalityLbEndpoints, proxy *corev3.Locality, distribute []*networking.LocalityLoadBalancerSetting_Distribute) []bool {
	for _, d := range distribute {
		if d == nil || !epLocalityMatch(proxy, d.From) {
			continue
		}
		unmatched := make([]bool, len(eps))
		for i := range unmatched {
			unmatched[i] = true
		}
		// Iterate the destinations in a fixed order: the first rule that
		// matches an endpoint group claims it.
		tos := make([]string, 0, len(d.To))
		for to := range d.To {
			tos = append(tos, to)
		}
		slices.Sort(tos)
		for _, to := range tos {
			weight := d.To[to]
			var total uint32
			var idx []int
			for i, le := range eps {
				if unmatched[i] && epLocalityMatch(le.Locality, to) {
					unmatched[i] = false
					idx = append(idx, i)
					total += le.GetLoadBalancingWeight().GetValue()
				}
			}
			for _, i := range idx {
				orig := eps[i].GetLoadBalancingWeight().GetValue()
				if w := float64(orig*weight) / float64(total); w > 0 {
					eps[i].LoadBalancingWeight = clU32(uint32(math.Ceil(w)))
				}
			}
		}
		return unmatched
	}
	return nil
}

package encode

import (
	"slices"
	"strings"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/pilotfish-mesh/pilotfish/index"
)

// localityLbSetting.failoverPriority (istiod's applyFailoverPriorities):
// with failover on, each locality's endpoints are split by how many of the
// listed labels, in order, they share with the proxy. An endpoint whose
// first mismatch is at position j of n labels gets priority n-j (0 when all
// match); a mismatch of topology.istio.io/network, when it comes first, is
// not a stop but adds n. Priorities are then ranked 0..m-1 across the
// assignment. An entry "key=value" compares the endpoints' key with value
// instead of the proxy's.
//
// Both sides' labels are istiod's augmented labels: an endpoint's labels
// plus its locality's region, zone and subzone, its network (unless a
// label sets it) and the registry's cluster; the proxy's likewise, which
// the engine resolves into EndpointsKey.FailoverLabels.

// The topology label keys istiod adds to endpoint and proxy labels.
const (
	LabelTopologyNetwork = "topology.istio.io/network"
	LabelTopologyRegion  = "topology.kubernetes.io/region"
	LabelTopologyZone    = "topology.kubernetes.io/zone"
	LabelTopologySubzone = "topology.istio.io/subzone"
	LabelTopologyCluster = "topology.istio.io/cluster"
)

// FailoverPriorityKey is the label key a failoverPriority entry compares:
// the entry up to "=" (istiod: "key=value" overrides the proxy's value;
// an entry with more than one "=" names its first part, without override).
func FailoverPriorityKey(entry string) string {
	k, _, _ := strings.Cut(entry, "=")
	return k
}

// FailoverPriority returns the failoverPriority list that applies to k's
// assignment after ApplyDestinationRule: outlier detection on, locality
// load balancing enabled, no distribution. nil otherwise. It allocates
// nothing.
func (k *EndpointsKey) FailoverPriority() []string {
	if !k.Failover || k.LocalityDR == nil {
		return nil
	}
	setting, ok := epEffectiveLocalityLB(k.loadBalancer(), k.MeshLocality)
	if !ok || setting.GetDistribute() != nil {
		return nil
	}
	return setting.GetFailoverPriority()
}

// loadBalancer is the load balancer settings of LocalityDR for k's port and
// subset (nil without a rule).
func (k *EndpointsKey) loadBalancer() *networking.LoadBalancerSettings {
	dr := clDestinationRule(k.LocalityDR)
	if dr == nil {
		return nil
	}
	var subset *networking.Subset
	if k.Subset != "" {
		subset = clFindSubset(dr, k.Subset)
	}
	return clResolvePolicy(dr, k.Port.Number, subset, nil).loadBalancer
}

// epFailover is a failoverPriority list resolved against the proxy's
// labels: the label each entry compares and the value it must have.
type epFailover struct {
	keys, values []string
	// network: the first entry is topology.istio.io/network, whose
	// mismatch lowers the priority without ending the comparison.
	network   bool
	clusterID string
}

// epNewFailover resolves the key's failoverPriority, or returns nil when
// none applies or the proxy has no labels (istiod then leaves priorities
// alone).
func epNewFailover(k *EndpointsKey) *epFailover {
	entries := k.FailoverPriority()
	if len(entries) == 0 || k.FailoverLabels == "" {
		return nil
	}
	f := &epFailover{
		keys: make([]string, len(entries)), values: make([]string, len(entries)),
		network: entries[0] == LabelTopologyNetwork, clusterID: k.ClusterID,
	}
	proxy := k.FailoverLabels
	for i, e := range entries {
		// FailoverLabels holds the proxy's value of each entry's key, in
		// order, each ended by a newline.
		v, rest, _ := strings.Cut(proxy, "\n")
		proxy = rest
		parts := strings.Split(e, "=")
		f.keys[i], f.values[i] = parts[0], v
		if len(parts) == 2 {
			f.values[i] = parts[1]
		}
	}
	return f
}

// priority is the endpoint's priority before ranking.
func (f *epFailover) priority(n index.Names, e *index.Endpoint) int32 {
	var prio, adjust int32
	for j, key := range f.keys {
		if f.values[j] == epFailoverLabel(n, e, key, f.clusterID) {
			continue
		}
		if j == 0 && f.network {
			adjust = int32(len(f.keys))
			continue
		}
		prio = int32(len(f.keys) - j)
		break
	}
	return prio + adjust
}

// epFailoverLabel is the value of the endpoint's label key as istiod's
// augmented endpoint labels have it.
func epFailoverLabel(n index.Names, e *index.Endpoint, key, clusterID string) string {
	switch key {
	case LabelTopologyRegion, LabelTopologyZone, LabelTopologySubzone:
		if v := LocalityPart(n.String(e.Locality), key); v != "" {
			return v
		}
	case LabelTopologyCluster:
		if clusterID != "" {
			return clusterID
		}
	case LabelTopologyNetwork:
		if v := epLabel(n, e.Labels, key); v != "" {
			return v
		}
		return n.String(e.Network)
	}
	return epLabel(n, e.Labels, key)
}

// LocalityPart is the part of "region/zone/subzone" a topology label key
// names ("" for another key).
func LocalityPart(locality, key string) string {
	region, rest, _ := strings.Cut(locality, "/")
	zone, subzone, _ := strings.Cut(rest, "/")
	switch key {
	case LabelTopologyRegion:
		return region
	case LabelTopologyZone:
		return zone
	case LabelTopologySubzone:
		return subzone
	}
	return ""
}

// epLabel is the value of label key in the set ("" when absent).
func epLabel(n index.Names, id index.LabelSetID, key string) string {
	if id == 0 {
		return ""
	}
	for _, l := range n.Labels(id) {
		if n.String(l.Key) == key {
			return n.String(l.Value)
		}
	}
	return ""
}

// epRankPriorities replaces each priority by its rank among the distinct
// values: priorities run from 0 without gaps, in the same order.
func epRankPriorities(p []uint32) {
	uniq := slices.Clone(p)
	slices.Sort(uniq)
	uniq = slices.Compact(uniq)
	for i := range p {
		r, _ := slices.BinarySearch(uniq, p[i])
		p[i] = uint32(r)
	}
}

// epSplitFailoverPriority is the reference form of the split: each
// locality group of eps (whose LbEndpoints are the candidates cands, in
// order) becomes one group per priority, in increasing priority order, its
// endpoints in their order and its weight their sum; then priorities are
// ranked across the assignment.
func epSplitFailoverPriority(n index.Names, f *epFailover, eps []*endpointv3.LocalityLbEndpoints, cands []epCandidate) []*endpointv3.LocalityLbEndpoints {
	var out []*endpointv3.LocalityLbEndpoints
	next := 0
	for _, le := range eps {
		byPrio := map[int32][]*endpointv3.LbEndpoint{}
		var prios []int32
		for _, lbe := range le.LbEndpoints {
			p := f.priority(n, cands[next].ep)
			next++
			if _, ok := byPrio[p]; !ok {
				prios = append(prios, p)
			}
			byPrio[p] = append(byPrio[p], lbe)
		}
		slices.Sort(prios)
		for _, p := range prios {
			var w uint32
			for _, lbe := range byPrio[p] {
				w = epAddWeight(w, lbe.GetLoadBalancingWeight().GetValue())
			}
			out = append(out, &endpointv3.LocalityLbEndpoints{
				Locality: le.Locality, LbEndpoints: byPrio[p],
				LoadBalancingWeight: clU32(w), Priority: uint32(p),
			})
		}
	}
	ranks := make([]uint32, len(out))
	for i, le := range out {
		ranks[i] = le.Priority
	}
	epRankPriorities(ranks)
	for i, le := range out {
		le.Priority = ranks[i]
	}
	return out
}

// epAddWeight adds endpoint weights as the locality groups do, saturating.
// (istiod's split wraps around instead; a sum past 2^32 needs 65,537
// endpoints of the largest weight, which no shard holds.)
func epAddWeight(sum, w uint32) uint32 {
	if s := sum + w; s >= sum {
		return s
	}
	return 1<<32 - 1
}

package rules

import (
	"slices"
	"strings"
	"sync/atomic"
	"weak"

	networking "istio.io/api/networking/v1alpha3"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/index"
)

// DestinationRule localityLbSetting.failoverPriority orders a proxy's
// endpoints by the labels they share with it (encode/endpoint_failover.go).
// The proxy's side of that comparison is its labels, so a class keeps the
// label keys some rule's failoverPriority lists (securityLabels folds
// FailoverLabelKeys in, and the engine re-keys classes when that set
// changes), and EDS keys carry the proxy's values of the keys their rule
// lists (EndpointsKey.FailoverLabels): proxies that agree on them share
// the assignments.

// proxyLabels are the labels of the scope's proxies (those its class keeps,
// or its workload's when the class knows none), and whether the proxies
// have any label at all once istiod adds the topology ones (locality,
// cluster, network): without any, istiod assigns no priority by label.
func proxyLabels(sc *Scope) (map[string]string, bool) {
	labels := scopeLabels(sc)
	cl := sc.Class
	has := labels != nil || cl.ClusterID != "" || cl.Network != "" || strings.Trim(cl.Locality, "/") != ""
	return labels, has
}

// failoverLabels is EndpointsKey.FailoverLabels: the proxy's value of each
// entry's label key, in order, each ended by a newline ("" without labels).
func failoverLabels(cl *encode.ProxyClass, labels map[string]string, has bool, entries []string) string {
	if !has {
		return ""
	}
	var b strings.Builder
	for _, e := range entries {
		b.WriteString(proxyLabel(cl, labels, encode.FailoverPriorityKey(e)))
		b.WriteByte('\n')
	}
	return b.String()
}

// proxyLabel is the value of the proxy's label key as istiod's augmented
// proxy labels have it: topology keys from the proxy's locality and
// cluster, the network label or else its network. kubernetes.io/hostname
// (the proxy's node) is read from its labels only: pilotfish keeps no node
// name for proxies nor endpoints.
func proxyLabel(cl *encode.ProxyClass, labels map[string]string, key string) string {
	switch key {
	case encode.LabelTopologyRegion, encode.LabelTopologyZone, encode.LabelTopologySubzone:
		if v := encode.LocalityPart(cl.Locality, key); v != "" {
			return v
		}
	case encode.LabelTopologyCluster:
		if cl.ClusterID != "" {
			return cl.ClusterID
		}
	case encode.LabelTopologyNetwork:
		if v := labels[key]; v != "" {
			return v
		}
		return cl.Network
	}
	return labels[key]
}

// failoverKeysMemo caches FailoverLabelKeys for the last snapshot asked
// (weakly: it keeps no snapshot alive).
type failoverKeysMemo struct {
	snap weak.Pointer[index.Snapshot]
	keys []string
}

var lastFailoverKeys atomic.Pointer[failoverKeysMemo]

// FailoverLabelKeys returns the label keys the failoverPriority lists of
// the snapshot's DestinationRules name (top level, port level and
// subsets), sorted and unique; nil when none does. It is memoized for the
// last snapshot asked; the result is shared and must not be modified.
func FailoverLabelKeys(snap *index.Snapshot) []string {
	if snap.NumConfigs(index.ConfigDestinationRule) == 0 {
		return nil
	}
	if m := lastFailoverKeys.Load(); m != nil && m.snap.Value() == snap {
		return m.keys
	}
	var keys []string
	add := func(tp *networking.TrafficPolicy) {
		for _, e := range tp.GetLoadBalancer().GetLocalityLbSetting().GetFailoverPriority() {
			keys = append(keys, encode.FailoverPriorityKey(e))
		}
		for _, p := range tp.GetPortLevelSettings() {
			for _, e := range p.GetLoadBalancer().GetLocalityLbSetting().GetFailoverPriority() {
				keys = append(keys, encode.FailoverPriorityKey(e))
			}
		}
	}
	snap.Configs(index.ConfigDestinationRule, func(c *index.Config) bool {
		spec := drSpec(c)
		add(spec.GetTrafficPolicy())
		for _, ss := range spec.GetSubsets() {
			add(ss.GetTrafficPolicy())
		}
		return true
	})
	slices.Sort(keys)
	keys = slices.Compact(keys)
	if len(keys) == 0 {
		keys = nil
	}
	lastFailoverKeys.Store(&failoverKeysMemo{snap: weak.Make(snap), keys: keys})
	return keys
}

package rules

import (
	"fmt"
	"slices"
	"strings"

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

// failoverLabelKeys is FailoverLabelKeys memoized in the config version's
// view (checked against a fresh scan in verify mode); without views, a
// scan.
func (vs *Views) failoverLabelKeys(snap *index.Snapshot) []string {
	if vs == nil || snap.NumConfigs(index.ConfigDestinationRule) == 0 {
		return FailoverLabelKeys(snap)
	}
	v := vs.Of(snap)
	if p := v.failoverKeys.Load(); p != nil {
		if v.verify {
			if fresh := FailoverLabelKeys(snap); !slices.Equal(fresh, *p) {
				panic(fmt.Sprintf("engine: verify: failoverPriority keys of config version %d memoized as %q, now %q", v.version, *p, fresh))
			}
		}
		return *p
	}
	keys := FailoverLabelKeys(snap)
	v.failoverKeys.Store(&keys)
	return keys
}

// FailoverLabelKeys returns the label keys the failoverPriority lists of
// the snapshot's DestinationRules name (top level, port level and
// subsets), sorted and unique; nil when none does. It scans every rule:
// ClassOfIn reads it memoized per config version.
func FailoverLabelKeys(snap *index.Snapshot) []string {
	if snap.NumConfigs(index.ConfigDestinationRule) == 0 {
		return nil
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
	return keys
}

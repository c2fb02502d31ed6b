package rules

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	networking "istio.io/api/networking/v1alpha3"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/index"
)

// istiod's DestinationRule pools (PushContext.setDestinationRules) and the
// consolidation of several rules of one host in one pool
// (mergeDestinationRule, with ENABLE_ENHANCED_DESTINATIONRULE_MERGE on, its
// default). A rule's exportTo set is its exportTo list, or {"."} for a rule
// with a workloadSelector (never exported). In a rule's namespace:
//
//   - the local pool holds it when the set is empty or holds "*", "." or
//     the namespace;
//   - the exported pool holds it unless the set is private only ({"."} or
//     {the namespace}); the root namespace's private-only rules form the
//     root pool.
//
// The rules of one host in one pool are taken with selector rules first,
// then oldest first (creationTimestamp, name, namespace). Each is merged
// into every consolidated rule before it whose exportTo set is equal (or,
// when not empty, a subset of its own) and whose selector situation allows
// it: both without selector, both with equal selectors, or one of each.
// Merging appends the subsets whose names are new and adopts the top-level
// traffic policy when the consolidated rule has none; name, namespace,
// exportTo and selector stay the first rule's. The rule stands as a
// consolidated rule of its own too unless the last comparison merged it
// with both rules without selector or with equal selectors (istiod's
// appendSeparately flag, set at each comparison).

type drPool uint8

const (
	drPoolLocal drPool = iota
	drPoolExported
	drPoolRootLocal
)

type drPoolKey struct {
	pool     drPool
	ns, host index.Sym
}

// drEntry is a consolidated rule: a rule row, or a merged row synthesized
// from several (a fresh *index.Config of its own, with the first rule's
// key, the merged spec and subset labels, and a hash over its parts).
type drEntry struct {
	rule     *index.Config
	selector bool
}

// drInPool reports whether c belongs to pool (in its own namespace);
// defPrivate: the mesh's default exportTo for rules without one holds "."
// (meshExports.drPrivate).
func drInPool(snap *index.Snapshot, c *index.Config, pool drPool, root index.Sym, defPrivate bool) bool {
	spec := drSpec(c)
	if spec == nil {
		return false
	}
	ns := snap.String(c.Key.Namespace)
	switch pool {
	case drPoolLocal:
		if c.HasSelector {
			return true
		}
		list := spec.ExportTo
		if len(list) == 0 {
			return true
		}
		for _, x := range list {
			if x == "*" || x == "." || x == ns {
				return true
			}
		}
		return false
	case drPoolExported:
		return !drPrivateOnly(c, spec, ns, defPrivate)
	default:
		return c.Key.Namespace == root && drPrivateOnly(c, spec, ns, defPrivate)
	}
}

// drPrivateOnly: the exportTo set is {"."} or {the rule's namespace}, or
// empty when the mesh's default holds "." (istiod's isPrivateOnly).
func drPrivateOnly(c *index.Config, spec *networking.DestinationRule, ns string, defPrivate bool) bool {
	if c.HasSelector {
		return true
	}
	list := spec.ExportTo
	if len(list) == 0 {
		return defPrivate
	}
	for _, x := range list {
		if x != list[0] {
			return false
		}
	}
	return list[0] == "." || list[0] == ns
}

// mergedDestinationRules returns the consolidated rules of a pool and host,
// built once per config version.
func (v *configView) mergedDestinationRules(snap *index.Snapshot, k drPoolKey, root index.Sym) []drEntry {
	v.drMu.Lock()
	got, ok := v.destRules[k]
	v.drMu.Unlock()
	if !ok {
		fresh := consolidateDestinationRules(snap, k, root, v.exports.drPrivate)
		v.drMu.Lock()
		defer v.drMu.Unlock()
		if got, ok = v.destRules[k]; ok {
			return got
		}
		if v.destRules == nil {
			v.destRules = map[drPoolKey][]drEntry{}
		}
		v.destRules[k] = fresh
		return fresh
	}
	if v.verify {
		fresh := consolidateDestinationRules(snap, k, root, v.exports.drPrivate)
		if !sameDREntries(got, fresh) {
			panic(fmt.Sprintf("engine: verify: the merged DestinationRules of %s (config version %d) differ from fresh ones: a memo misses an input",
				snap.String(k.host), v.version))
		}
	}
	return got
}

func sameDREntries(a, b []drEntry) bool {
	return slices.EqualFunc(a, b, func(x, y drEntry) bool {
		return x.selector == y.selector && x.rule.Key == y.rule.Key && x.rule.Hash == y.rule.Hash
	})
}

// consolidateDestinationRules is istiod's mergeDestinationRule applied to
// the pool's rules of one host, in istiod's order.
func consolidateDestinationRules(snap *index.Snapshot, k drPoolKey, root index.Sym, defPrivate bool) []drEntry {
	var rules []*index.Config
	snap.ConfigsByHost(index.ConfigDestinationRule, k.host, func(c *index.Config) bool {
		if c.Key.Namespace == k.ns && drInPool(snap, c, k.pool, root, defPrivate) {
			rules = append(rules, c)
		}
		return true
	})
	slices.SortFunc(rules, func(a, b *index.Config) int {
		if a.HasSelector != b.HasSelector {
			if a.HasSelector {
				return -1
			}
			return 1
		}
		if r := cmp.Compare(a.CreationTime, b.CreationTime); r != 0 {
			return r
		}
		if r := strings.Compare(snap.String(a.Key.Name), snap.String(b.Key.Name)); r != 0 {
			return r
		}
		return strings.Compare(snap.String(a.Key.Namespace), snap.String(b.Key.Namespace))
	})
	var out []drEntry
	for _, c := range rules {
		set := drExportSet(c)
		separate := true
		for i := range out {
			m := &out[i]
			mset := drExportSet(m.rule)
			switch {
			case slices.Equal(set, mset):
				separate = false
			case len(mset) > 0 && drSuperset(set, mset):
				separate = true
			default:
				separate = true
				continue
			}
			bothWithout := !c.HasSelector && !m.selector
			bothWith := c.HasSelector && m.selector
			if bothWith && c.Selector != m.rule.Selector { // interned: equal sets, equal IDs
				separate = true
				continue
			}
			if bothWithout || bothWith {
				separate = false
			}
			m.rule = mergeDestinationRule(m.rule, c)
		}
		if separate {
			out = append(out, drEntry{rule: c, selector: c.HasSelector})
		}
	}
	return out
}

// drExportSet is a rule's exportTo set, sorted and without duplicates.
func drExportSet(c *index.Config) []string {
	if c.HasSelector {
		return []string{"."}
	}
	set := slices.Clone(drSpec(c).GetExportTo())
	slices.Sort(set)
	return slices.Compact(set)
}

func drSuperset(set, sub []string) bool {
	for _, x := range sub {
		if _, ok := slices.BinarySearch(set, x); !ok {
			return false
		}
	}
	return true
}

// mergeDestinationRule returns into with c merged in: a new row (rows and
// specs are shared and never modified).
func mergeDestinationRule(into, c *index.Config) *index.Config {
	base, add := drSpec(into), drSpec(c)
	spec := &networking.DestinationRule{
		Host:             base.Host,
		TrafficPolicy:    base.TrafficPolicy,
		Subsets:          slices.Clip(base.Subsets),
		ExportTo:         base.ExportTo,
		WorkloadSelector: base.WorkloadSelector,
	}
	out := *into
	out.Spec = spec
	out.SubsetLabels = slices.Clip(into.SubsetLabels)
	for i, ss := range add.GetSubsets() {
		dup := slices.ContainsFunc(spec.Subsets, func(x *networking.Subset) bool { return x.GetName() == ss.GetName() })
		if dup {
			continue
		}
		spec.Subsets = append(spec.Subsets, ss)
		var l index.LabelSetID
		if i < len(c.SubsetLabels) {
			l = c.SubsetLabels[i]
		}
		out.SubsetLabels = append(out.SubsetLabels, l)
	}
	if spec.TrafficPolicy == nil && add.TrafficPolicy != nil {
		spec.TrafficPolicy = add.TrafficPolicy
	}
	// The merged row's hash covers its parts, in order: the keys of
	// generators that hold it change when any part does.
	h := encode.NewHasher("dr-merge")
	h.U64(into.Hash)
	h.U64(c.Hash)
	h.U32(uint32(c.Key.Namespace))
	h.U32(uint32(c.Key.Name))
	out.Hash = h.Sum()
	return &out
}

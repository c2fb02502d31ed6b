package rules

import (
	"slices"
	"unsafe"

	networking "istio.io/api/networking/v1alpha3"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/index"
)

// DestinationRule lookup, as istiod's PushContext.destinationRule does it
// for a proxy in namespace proxyNS and a service:
//
//  1. rules in the proxy's namespace that are visible there (exportTo
//     empty, "*", "." or naming the namespace); for a proxy in the root
//     namespace, the root namespace's private rules;
//  2. rules in the service's namespace exported to the proxy's namespace;
//  3. rules in the root namespace exported to the proxy's namespace.
//
// Within each step the most specific host wins: the exact host, else the
// longest matching wildcard ("*.ns.svc.cluster.local" before "*.local"
// before "*"). Among several rules for the same host the oldest (lowest
// row ID) is taken; istiod merges their subsets instead (a known
// difference). Rules with a workloadSelector apply to selected workloads
// only, which a proxy class cannot tell, so they are skipped.
func destinationRule(snap *index.Snapshot, mesh *encode.Mesh, proxyNS index.Sym, svc *index.Service) *index.Config {
	if svc == nil || snap.NumConfigs(index.ConfigDestinationRule) == 0 {
		return nil
	}
	root, _ := snap.Symbols.Lookup(mesh.RootNamespace)
	svcNS := svc.Key.Namespace
	if proxyNS != root || root == 0 {
		if c := mostSpecificDR(snap, svc.Key.Host, func(c *index.Config) bool {
			return c.Key.Namespace == proxyNS && drLocal(c)
		}); c != nil {
			return c
		}
	} else {
		if c := mostSpecificDR(snap, svc.Key.Host, func(c *index.Config) bool {
			return c.Key.Namespace == root && drPrivate(c)
		}); c != nil {
			return c
		}
	}
	exported := func(ns index.Sym) func(*index.Config) bool {
		return func(c *index.Config) bool {
			return c.Key.Namespace == ns && !drPrivate(c) && c.ExportTo.VisibleTo(c.Key.Namespace, proxyNS)
		}
	}
	if c := mostSpecificDR(snap, svc.Key.Host, exported(svcNS)); c != nil {
		return c
	}
	if root != 0 {
		return mostSpecificDR(snap, svc.Key.Host, exported(root))
	}
	return nil
}

// drLocal: the rule applies in its own namespace.
func drLocal(c *index.Config) bool {
	e := &c.ExportTo
	if e.None {
		return false
	}
	return e.Private || len(e.Namespaces) == 0 || slices.Contains(e.Namespaces, c.Key.Namespace)
}

// drPrivate: exported to its own namespace only ("." or the namespace).
func drPrivate(c *index.Config) bool {
	e := &c.ExportTo
	if e.None {
		return true
	}
	if e.Private {
		return len(e.Namespaces) == 0 || (len(e.Namespaces) == 1 && e.Namespaces[0] == c.Key.Namespace)
	}
	return len(e.Namespaces) == 1 && e.Namespaces[0] == c.Key.Namespace
}

// mostSpecificDR returns the first usable rule for host itself, else for
// the longest wildcard that matches it.
func mostSpecificDR(snap *index.Snapshot, host index.Sym, ok func(*index.Config) bool) *index.Config {
	if c := firstDR(snap, host, ok); c != nil {
		return c
	}
	h := snap.String(host)
	var buf [256]byte
	for i := 0; i < len(h); i++ {
		if h[i] != '.' {
			continue
		}
		// "*" + h[i:] without allocating: the lookup does not retain it.
		if 1+len(h)-i > len(buf) {
			continue
		}
		buf[0] = '*'
		n := 1 + copy(buf[1:], h[i:])
		cand := unsafe.String(&buf[0], n)
		if cand == h {
			continue
		}
		if s, found := snap.Symbols.Lookup(cand); found {
			if c := firstDR(snap, s, ok); c != nil {
				return c
			}
		}
	}
	if s, found := snap.Symbols.Lookup("*"); found && h != "*" {
		return firstDR(snap, s, ok)
	}
	return nil
}

func firstDR(snap *index.Snapshot, host index.Sym, ok func(*index.Config) bool) *index.Config {
	var out *index.Config
	snap.ConfigsByHost(index.ConfigDestinationRule, host, func(c *index.Config) bool {
		if c.HasSelector || !ok(c) {
			return true
		}
		if _, isDR := c.Spec.(*networking.DestinationRule); !isDR {
			return true
		}
		out = c
		return false
	})
	return out
}

// subsetLabels returns the labels of the subset named name of the rule (0
// when the rule has no such subset or it has no labels), interned by ingest
// (index.Config.SubsetLabels): the engine only reads.
func subsetLabels(dr *index.Config, name string) index.LabelSetID {
	spec, _ := dr.Spec.(*networking.DestinationRule)
	for i, ss := range spec.GetSubsets() {
		if ss.GetName() != name {
			continue
		}
		if len(dr.SubsetLabels) != len(spec.GetSubsets()) {
			panic("engine: DestinationRule row without its subsets' labels (ingest interns them)")
		}
		return dr.SubsetLabels[i]
	}
	return 0
}

package rules

import (
	"github.com/pilotfish-mesh/pilotfish/index"
)

// VirtualService matches with sourceLabels apply to the proxies whose
// labels hold them (istiod's sourceMatchHTTP, matchTCP, matchTLS, checked
// when it generates a proxy's config). A class keeps the labels whose keys
// such a match names (addSourceLabelKeys, folded into ProxyClass.Labels
// as security selectors' keys are), so proxies that differ only in other
// labels still share a class, and a mesh without sourceLabels has no more
// classes than before. A key gets the class's labels cut down to the keys
// its VirtualServices name (sourceLabelsFor): proxies that agree on those
// share the cached parts.

// addSourceLabelKeys adds to keys the label keys the match sourceLabels of
// the VirtualServices a proxy in ns may read name: those visible to ns, and
// every delegate (a VirtualService without hosts, read through a root of
// any namespace). Listing a key a proxy's routes turn out not to read only
// splits a class.
func addSourceLabelKeys(snap *index.Snapshot, ns index.Sym, keys map[string]bool) map[string]bool {
	snap.ConfigsWithSourceLabels(index.ConfigVirtualService, func(c *index.Config) bool {
		if len(c.Hosts) > 0 && !c.ExportTo.VisibleTo(c.Key.Namespace, ns) {
			return true
		}
		for _, k := range c.SourceLabelKeys {
			if keys == nil {
				keys = map[string]bool{}
			}
			keys[snap.String(k)] = true
		}
		return true
	})
	return keys
}

// sourceLabelsFor returns labels cut down to the keys of the VirtualServices
// cs name in sourceLabels, encoded as ProxyClass.Labels is ("" when they
// name none or the proxy has none of them).
func sourceLabelsFor(snap *index.Snapshot, labels map[string]string, cs ...*index.Config) string {
	var kept map[string]string
	for _, c := range cs {
		for _, k := range c.SourceLabelKeys {
			ks := snap.String(k)
			if v, ok := labels[ks]; ok {
				if kept == nil {
					kept = map[string]string{}
				}
				kept[ks] = v
			}
		}
	}
	return encodeLabels(kept)
}

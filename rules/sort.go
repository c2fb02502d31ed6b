package rules

import (
	"cmp"
	"slices"

	"github.com/pilotfish-mesh/pilotfish/index"
)

// sortServicesByHost orders services by hostname string, then namespace
// string, so generated output is deterministic and matches istiod's order.
func sortServicesByHost(snap *index.Snapshot, ids []index.ServiceID) {
	slices.SortFunc(ids, func(a, b index.ServiceID) int {
		sa, sb := snap.ServiceByID(a), snap.ServiceByID(b)
		if c := cmp.Compare(snap.String(sa.Key.Host), snap.String(sb.Key.Host)); c != 0 {
			return c
		}
		return cmp.Compare(snap.String(sa.Key.Namespace), snap.String(sb.Key.Namespace))
	})
}

// byCreationTime is istiod's configCompareByCreationTime: the oldest first,
// then by name, then by namespace. Objects without a creation time (a
// config directory's, unless it writes one) sort as the oldest.
func byCreationTime(snap *index.Snapshot) func(a, b *index.Config) int {
	return func(a, b *index.Config) int {
		if c := cmp.Compare(a.CreationTime, b.CreationTime); c != 0 {
			return c
		}
		if c := cmp.Compare(snap.String(a.Key.Name), snap.String(b.Key.Name)); c != 0 {
			return c
		}
		return cmp.Compare(snap.String(a.Key.Namespace), snap.String(b.Key.Namespace))
	}
}

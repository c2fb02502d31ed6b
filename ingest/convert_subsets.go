package ingest

import (
	networking "istio.io/api/networking/v1alpha3"

	"github.com/pilotfish-mesh/pilotfish/index"
)

// subsetLabels interns a DestinationRule's subsets' labels, in the order of
// its subsets, for index.Config.SubsetLabels: the engine reads them and
// never interns (nil for a rule without subsets).
func (c *Converter) subsetLabels(dr *networking.DestinationRule) []index.LabelSetID {
	if len(dr.GetSubsets()) == 0 {
		return nil
	}
	out := make([]index.LabelSetID, len(dr.Subsets))
	for i, ss := range dr.Subsets {
		out[i] = c.labelSet(ss.GetLabels())
	}
	return out
}

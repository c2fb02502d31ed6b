package ingest

import (
	networking "istio.io/api/networking/v1alpha3"

	"github.com/pilotfish-mesh/pilotfish/index"
)

// virtualService fills the VirtualService-specific fields of its config
// row and returns the hosts the row is indexed by (made fully qualified by
// the caller).
func (c *Converter) virtualService(row *index.Config, s *networking.VirtualService) []string {
	row.ExportTo = c.exportTo(s.ExportTo)
	return s.Hosts
}

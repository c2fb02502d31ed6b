package rules

import (
	"testing"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/internal/xdstest"
)

// nameTableHosts decodes a NameTable resource into host → IPs.
func nameTableHosts(t *testing.T, r Resource) map[string][]string {
	return xdstest.NameTableHosts(t, r.Any, encode.NameTableDescriptor())
}

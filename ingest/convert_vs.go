package ingest

import (
	"slices"

	networking "istio.io/api/networking/v1alpha3"

	"github.com/pilotfish-mesh/pilotfish/index"
)

// virtualService fills the VirtualService-specific fields of its config
// row and returns the hosts the row is indexed by (made fully qualified by
// the caller).
func (c *Converter) virtualService(row *index.Config, s *networking.VirtualService) []string {
	row.ExportTo = c.exportTo(s.ExportTo)
	row.SourceLabelKeys = c.sourceLabelKeys(s)
	for _, r := range s.Http {
		if d := r.Delegate; d != nil {
			ns := d.Namespace
			if ns == "" {
				ns = c.syms.String(row.Key.Namespace)
			}
			row.Delegates = append(row.Delegates, index.ConfigKey{Namespace: c.sym(ns), Name: c.sym(d.Name)})
		}
	}
	return s.Hosts
}

// sourceLabelKeys interns the label keys the VirtualService's matches'
// sourceLabels name, sorted and without repeats (nil for none, as for
// nearly every VirtualService).
func (c *Converter) sourceLabelKeys(s *networking.VirtualService) []index.Sym {
	var keys []index.Sym
	add := func(m map[string]string) {
		for k := range m {
			if sym := c.sym(k); !slices.Contains(keys, sym) {
				keys = append(keys, sym)
			}
		}
	}
	for _, r := range s.Http {
		for _, m := range r.Match {
			add(m.SourceLabels)
		}
	}
	for _, r := range s.Tcp {
		for _, m := range r.Match {
			add(m.SourceLabels)
		}
	}
	for _, r := range s.Tls {
		for _, m := range r.Match {
			add(m.SourceLabels)
		}
	}
	slices.Sort(keys)
	return keys
}

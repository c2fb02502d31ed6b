package rules

import (
	"slices"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/index"
)

// The mesh's exportTo defaults (meshConfig defaultServiceExportTo,
// defaultVirtualServiceExportTo, defaultDestinationRuleExportTo) apply to
// objects that set no exportTo (index.ExportTo.Unset). They are resolved
// here, at lookup time, with the mesh of the scope's view, so that a mesh
// change rebuilds scopes but no index rows. Default lists name namespaces
// as strings: they are compared with the namespace's name only for an
// object without exportTo of a mesh that lists namespaces, and never
// depend on which names a snapshot has interned.

// meshExport is one default exportTo list, parsed.
type meshExport struct {
	all, none, private bool
	names              []string
}

// parseMeshExport reads a list as istiod does: "*" anywhere makes it
// public, else "~" anywhere makes it hidden; nil (unset) is "*".
func parseMeshExport(list []string) meshExport {
	var e meshExport
	if len(list) == 0 || slices.Contains(list, "*") {
		e.all = true
		return e
	}
	if slices.Contains(list, "~") {
		e.none = true
		return e
	}
	for _, x := range list {
		if x == "." {
			e.private = true
		} else {
			e.names = append(e.names, x)
		}
	}
	return e
}

// visible reports whether an object of namespace home is visible from ns.
func (e *meshExport) visible(snap *index.Snapshot, home, ns index.Sym) bool {
	switch {
	case e.all:
		return true
	case e.none:
		return false
	case e.private && home == ns:
		return true
	case len(e.names) == 0 || ns == 0:
		return false
	}
	return slices.Contains(e.names, snap.String(ns))
}

// meshExports are a mesh's three defaults.
type meshExports struct {
	service, virtualService meshExport
	// drPrivate: the DestinationRule default holds "." (istiod honours only
	// "." and "*" there: a rule without exportTo is then private to its
	// namespace, else exported everywhere).
	drPrivate bool
}

func newMeshExports(m *encode.Mesh) meshExports {
	if m == nil {
		return meshExports{service: meshExport{all: true}, virtualService: meshExport{all: true}}
	}
	return meshExports{
		service:        parseMeshExport(m.DefaultServiceExportTo),
		virtualService: parseMeshExport(m.DefaultVirtualServiceExportTo),
		drPrivate:      slices.Contains(m.DefaultDestinationRuleExportTo, "."),
	}
}

// serviceVisible: service svc is visible from namespace ns.
func (v *configView) serviceVisible(snap *index.Snapshot, svc *index.Service, ns index.Sym) bool {
	if svc.ExportTo.Unset {
		return v.exports.service.visible(snap, svc.Key.Namespace, ns)
	}
	return svc.ExportTo.VisibleTo(svc.Key.Namespace, ns)
}

// vsVisible: VirtualService c is visible from namespace ns.
func (v *configView) vsVisible(snap *index.Snapshot, c *index.Config, ns index.Sym) bool {
	if c.ExportTo.Unset {
		return v.exports.virtualService.visible(snap, c.Key.Namespace, ns)
	}
	return c.ExportTo.VisibleTo(c.Key.Namespace, ns)
}

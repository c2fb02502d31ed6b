package rules

import (
	"testing"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/index"
	"github.com/pilotfish-mesh/pilotfish/internal/istiodref"
)

// TestExportToDefaultsFollowTheMesh: the same snapshot (no re-ingest) seen
// through views of two meshes: rows without exportTo are Unset, and each
// view decides their visibility with its mesh's defaults.
func TestExportToDefaultsFollowTheMesh(t *testing.T) {
	c, err := istiodref.LoadCase("mesh-exportto")
	if err != nil {
		t.Fatal(err)
	}
	snap := lrLoad(t, map[string][]byte{"config.yaml": c.Config})
	host := func(h string) index.Sym {
		s, ok := snap.Symbols.Lookup(h)
		if !ok {
			t.Fatalf("no symbol %s", h)
		}
		return s
	}
	hidden, shared := host("hidden.exa.svc.cluster.local"), host("shared.exa.svc.cluster.local")
	var unset, set int
	snap.Services(func(_ index.ServiceID, s *index.Service) bool {
		switch s.Key.Host {
		case hidden:
			unset += boolInt(s.ExportTo.Unset)
		case shared:
			set += boolInt(!s.ExportTo.Unset)
		}
		return true
	})
	if unset != 1 || set != 1 {
		t.Fatalf("rows: hidden Unset %d, shared set %d; want 1 and 1", unset, set)
	}
	class := encode.ProxyClass{Type: encode.ProxySidecar, Namespace: "exb"}
	var views Views
	for _, tc := range []struct {
		mesh       *encode.Mesh
		seesHidden bool
	}{{nil, true}, {meshExportToCase(), false}, {encode.DefaultMesh(), true}} {
		views.SetMesh(tc.mesh)
		sc := NewScopeIn(views.Of(snap), snap, &class)
		if _, got := sc.ByHost[hidden]; got != tc.seesHidden {
			t.Errorf("mesh %v: exb sees hidden.exa %v, want %v", tc.mesh != nil, got, tc.seesHidden)
		}
		if _, got := sc.ByHost[shared]; !got {
			t.Errorf("mesh %v: exb does not see shared.exa (exported \"*\")", tc.mesh != nil)
		}
	}
}

// TestMeshExportParse: istiod's reading of a default list.
func TestMeshExportParse(t *testing.T) {
	for _, tc := range []struct {
		list []string
		want meshExport
	}{
		{nil, meshExport{all: true}},
		{[]string{".", "*"}, meshExport{all: true}},
		{[]string{"~", "a"}, meshExport{none: true}},
		{[]string{"*", "~"}, meshExport{all: true}},
		{[]string{".", "a"}, meshExport{private: true, names: []string{"a"}}},
	} {
		got := parseMeshExport(tc.list)
		if got.all != tc.want.all || got.none != tc.want.none || got.private != tc.want.private || len(got.names) != len(tc.want.names) {
			t.Errorf("%q: got %+v, want %+v", tc.list, got, tc.want)
		}
	}
}

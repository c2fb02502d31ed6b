package rules

import (
	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/index"
)

// testEngine stands in for engine.Engine in rules' tests that need only
// what an engine derives for a proxy: its class (ClassOf with the mesh's
// root namespace) and a scope's mesh (Meshes.For), as engine computes
// them. engine imports rules, so rules' tests cannot import engine.
type testEngine struct {
	mesh   *encode.Mesh
	meshes Meshes
}

// testOptions are the engine options those tests set.
type testOptions struct{ Mesh *encode.Mesh }

// newTestEngine is engine.New for those tests: the index is not read.
func newTestEngine(_ any, o testOptions) *testEngine {
	if o.Mesh == nil {
		o.Mesh = encode.DefaultMesh()
	}
	return &testEngine{mesh: o.Mesh, meshes: NewMeshes(o.Mesh)}
}

func (e *testEngine) classOf(snap *index.Snapshot, node *Node) encode.ProxyClass {
	return ClassOf(snap, e.mesh.RootNamespace, node)
}

func (e *testEngine) meshFor(sc *Scope) *encode.Mesh { return e.meshes.For(sc) }

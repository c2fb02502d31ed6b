package engine

import (
	"time"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/rules"
)

// meshState is the mesh the engine builds from. It is replaced whole
// (SetMesh), never mutated: a build that loaded one finishes with it.
type meshState struct {
	mesh   *encode.Mesh
	meshes rules.Meshes
	// gen numbers the meshes: memoized responses are per (snapshot, gen).
	gen uint64
}

func (e *Engine) meshNow() *meshState { return e.meshState.Load() }

// Mesh returns the mesh the engine builds from now.
func (e *Engine) Mesh() *encode.Mesh { return e.meshNow().mesh }

// ProviderProblems are the mesh's extension providers whose service the
// current snapshot does not hold (rules.ProviderLookupFailures), for
// /debug/config_errors.
func (e *Engine) ProviderProblems() []string {
	return rules.ProviderLookupFailures(e.Snapshot(), e.Mesh())
}

// SetMesh makes m (which must not be changed after) the mesh of the next
// push, and reports whether it differs from the current one. A mesh whose
// fields are all equal (Digest) changes nothing and pushes nothing.
// Otherwise every class gets a full push through the debounce, like a
// config change: proxies are sent only the types whose bytes changed
// (their resources' versions are content hashes), so a field that alters
// only sidecars' listeners reaches only those. A new root namespace
// re-selects the classes first (a root-namespace Sidecar or policy may
// now apply).
func (e *Engine) SetMesh(m *encode.Mesh) bool {
	e.meshMu.Lock()
	defer e.meshMu.Unlock()
	cur := e.meshState.Load()
	if cur.mesh == m || cur.mesh.Digest() == m.Digest() {
		return false
	}
	// The views first: a scope made between the two stores is of the new
	// mesh under the old generation, and is made again once gen moves.
	e.views.SetMesh(m)
	e.meshState.Store(&meshState{mesh: m, meshes: rules.NewMeshes(m), gen: cur.gen + 1})
	root := cur.mesh.RootNamespace != m.RootNamespace
	// Tracing turned on or off adds or drops the classes' tracing
	// identity: reclassify as for a new root namespace.
	tracing := mayTrace(cur.mesh) != mayTrace(m)
	e.log.Info("mesh settings changed: pushing", "rootNamespaceChanged", root, "tracingToggled", tracing)
	e.changes.addMesh(root || tracing)
	return true
}

// addMesh records a mesh change: full, to every class (scoped nil), and
// reclassifying when the root namespace moved.
func (a *changeAccumulator) addMesh(rootChanged bool) {
	now := time.Now()
	a.mu.Lock()
	p := &a.pending
	if p.events == 0 {
		p.first = now
	}
	p.last = now
	p.events++
	p.full = true
	p.scoped = nil
	if rootChanged {
		p.instances = true
	}
	a.mu.Unlock()
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

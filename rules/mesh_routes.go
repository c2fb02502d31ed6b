package rules

import "github.com/pilotfish-mesh/pilotfish/encode"

// withRouteMesh folds into a merged gateway's digest the mesh settings its
// route keys hold (defaultHttpRetryPolicy), so that a merged gateway of
// another mesh is not reused for this one (gateway_reuse.go).
func withRouteMesh(digest uint64, mesh *encode.Mesh) uint64 {
	if !mesh.DefaultRetry.Set {
		return digest
	}
	h := encode.NewHasher("gateway-mesh")
	h.U64(digest)
	h.U64(mesh.DefaultRetry.Hash())
	return h.Sum()
}

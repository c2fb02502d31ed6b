package rules

import (
	"fmt"

	"github.com/pilotfish-mesh/pilotfish/encode"
)

// builder is the signature of the per-type key builders in build_*.go.
type builder func(sc *Scope, mesh *encode.Mesh, cache *encode.Cache, names []string, wildcard bool, dst []Resource) ([]Resource, error)

// builders maps each served type URL to its builder: the only table.
var builders = map[string]builder{
	TypeCluster:   buildClusters,
	TypeEndpoint:  buildEndpoints,
	TypeListener:  buildListeners,
	TypeRoute:     buildRoutes,
	TypeSecret:    buildSecrets,
	TypeNameTable: buildNameTable,
	// ECDS: EnvoyFilter EXTENSION_CONFIG patches' extension configs
	// (envoyfilter_ecds.go) and WasmPlugins' (wasm.go).
	TypeExtensionConfig: buildExtensionConfigs,
}

// build appends typeURL's resources for the scope sc to dst, built with
// mesh (the scope's: meshes.Meshes.For) through cache.
func Build(typeURL string, sc *Scope, mesh *encode.Mesh, cache *encode.Cache, names []string, wildcard bool, dst []Resource) ([]Resource, error) {
	b, ok := builders[typeURL]
	if !ok {
		return dst, fmt.Errorf("%w: %s", ErrUnknownType, typeURL)
	}
	return b(sc, mesh, cache, names, wildcard, dst)
}

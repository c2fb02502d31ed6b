package rules

import (
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/proto"

	"github.com/pilotfish-mesh/pilotfish/encode"
)

// envoyFilterExtension answers an ECDS name one of the class's EnvoyFilter
// EXTENSION_CONFIG ADD patches defines (istiod's
// InsertedExtensionConfigurations: the patches of the proxy's filters,
// their match and context not applied). Several patches of one name: the
// last in the class's patch order answers (istiod sends them all, and
// Envoy keeps the last). A name no patch defines is left to the next
// source.
func envoyFilterExtension(sc *Scope, mesh *encode.Mesh, cache *encode.Cache, n string, dst []Resource) ([]Resource, bool, error) {
	set := sc.Patches(mesh)
	if set == nil {
		return dst, false, nil
	}
	var found *core.TypedExtensionConfig
	for _, c := range set.ExtensionConfigs() {
		if c.GetName() == n {
			found = c
		}
	}
	if found == nil {
		return dst, false, nil
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(found)
	if err != nil {
		return dst, true, err
	}
	out, err := appendResource(dst, cache, sc.Snapshot.Names(), &encode.PatchExtensionConfigKey{Name: n, Config: string(b)}, encode.PatchExtensionConfigGen)
	return out, true, err
}

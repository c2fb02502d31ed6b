package encode

import (
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/proto"

	"github.com/pilotfish-mesh/pilotfish/index"
)

// PatchExtensionConfigKey is the extension config an EnvoyFilter
// EXTENSION_CONFIG ADD patch defines (docs/envoyfilter-design.md): its
// name and its value, marshaled deterministically. The key holds the value
// itself, so every class with the same patch shares one entry and its
// bytes.
type PatchExtensionConfigKey struct {
	Name   string
	Config string // a core.TypedExtensionConfig, deterministic wire bytes
}

// Hash feeds every field.
func (k *PatchExtensionConfigKey) Hash() uint64 {
	h := NewHasher("PatchExtensionConfigKey")
	h.Str(k.Name)
	h.Str(k.Config)
	return h.Sum()
}

// PatchExtensionConfigGen generates PatchExtensionConfigKey's config.
var PatchExtensionConfigGen = resourceGen(KindExtension, ExtensionConfigType, PatchExtensionConfig)

// PatchExtensionConfig is the patch's value as istiod sends it over ECDS.
// The bytes come from rules' marshal of a valid message; ones that do not
// parse give a config with only the name (Envoy refuses it, naming it).
func PatchExtensionConfig(_ index.Names, k *PatchExtensionConfigKey) (string, proto.Message) {
	c := &core.TypedExtensionConfig{}
	if err := proto.Unmarshal([]byte(k.Config), c); err != nil {
		c = &core.TypedExtensionConfig{}
	}
	c.Name = k.Name
	return k.Name, c
}

func (*PatchExtensionConfigKey) key() {}

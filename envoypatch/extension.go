package envoypatch

import (
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/proto"
	networking "istio.io/api/networking/v1alpha3"
)

// ExtensionConfigs are fresh copies of the set's EXTENSION_CONFIG ADD
// values, in order (istiod's InsertedExtensionConfigurations, before it
// keeps those a proxy asked for by name, which the caller does; several
// of one name are all returned, as istiod returns them). Context and
// matches do not apply, as in istiod.
func (s *Set) ExtensionConfigs() []*core.TypedExtensionConfig {
	if s == nil {
		return nil
	}
	var out []*core.TypedExtensionConfig
	for _, p := range s.by[networking.EnvoyFilter_EXTENSION_CONFIG] {
		if p.Operation == networking.EnvoyFilter_Patch_ADD {
			out = append(out, proto.Clone(p.Value).(*core.TypedExtensionConfig))
		}
	}
	return out
}

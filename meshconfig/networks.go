package meshconfig

import (
	"fmt"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"

	meshv1 "istio.io/api/mesh/v1alpha1"
)

// ParseNetworks reads the `meshNetworks` key as istiod's
// ParseMeshNetworks does (an empty document is no networks). pilotfish
// serves one network: a document naming networks parses, and the error
// ErrNetworksUnsupported (a *Problem naming them) says they are ignored.
func ParseNetworks(data []byte) (*meshv1.MeshNetworks, error) {
	out := &meshv1.MeshNetworks{Networks: map[string]*meshv1.Network{}}
	if len(data) > MaxSize {
		return nil, &Problem{Message: fmt.Sprintf("meshNetworks: %d bytes, over the %d-byte limit", len(data), MaxSize), cause: ErrInvalid}
	}
	root, err := parseTree(data)
	if err != nil || root == nil {
		return out, err
	}
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, &Problem{Field: "meshNetworks", Message: err.Error(), cause: ErrInvalid}
	}
	if err := applyJSON(js, out); err != nil {
		return nil, &Problem{Field: "meshNetworks", Message: err.Error(), cause: ErrInvalid}
	}
	if len(out.Networks) > 0 {
		names := slices.Sorted(func(yield func(string) bool) {
			for n := range out.Networks {
				if !yield(n) {
					return
				}
			}
		})
		return out, &Problem{Field: "meshNetworks.networks", Line: lineOf(root, "networks"), cause: ErrNetworksUnsupported,
			Message: "networks " + strings.Join(names, ", ") + ": multi-network meshes are not supported by pilotfish; the networks are ignored"}
	}
	return out, nil
}

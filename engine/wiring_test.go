package engine

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/pilotfish-mesh/pilotfish/internal/scenario"
)

// TestMeshOutboundTrafficPolicy runs a scenario under the mesh-wide
// REGISTRY_ONLY policy, and checks that MeshSettings rejects modes it
// does not implement.
func TestMeshOutboundTrafficPolicy(t *testing.T) {
	mesh, err := MeshSettings{OutboundTrafficPolicy: "REGISTRY_ONLY"}.Mesh()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"outbound-policy-registry-only.txtar", "istiod-outbound-policy.txtar"} {
		t.Run(f, func(t *testing.T) {
			m := scenario.NewMesh()
			scenario.Run(t, filepath.Join("testdata", f), &engineTarget{m: m, e: New(m.W, Options{Mesh: mesh})})
		})
	}

	for _, mode := range []string{"", "ALLOW_ANY"} {
		if m, err := (MeshSettings{OutboundTrafficPolicy: mode}).Mesh(); err != nil || !m.OutboundAllowAny {
			t.Errorf("mode %q: allow any %v, %v; want true", mode, m != nil && m.OutboundAllowAny, err)
		}
	}
	for _, mode := range []string{"ALLOW_ANY_DYNAMIC_DNS", "allow_any", "BLOCK"} {
		if _, err := (MeshSettings{OutboundTrafficPolicy: mode}).Mesh(); !errors.Is(err, ErrBadMeshSetting) {
			t.Errorf("mode %q: err %v, want ErrBadMeshSetting", mode, err)
		}
	}
}

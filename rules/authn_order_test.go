package rules

import (
	"slices"
	"testing"

	"github.com/pilotfish-mesh/pilotfish/encode"
)

// Policies listed newest first, with names that sort against their age:
// istiod orders by creation time (sortConfigByCreationTime), so the
// order the files, the watch or the names give must not matter.
const policyAgeMesh = `apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: a-new, namespace: age, creationTimestamp: "2025-06-01T00:00:00Z"}
spec: {mtls: {mode: STRICT}}
---
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: z-old, namespace: age, creationTimestamp: "2020-01-01T00:00:00Z"}
spec: {mtls: {mode: DISABLE}}
---
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: a-new-db, namespace: age, creationTimestamp: "2025-06-01T00:00:00Z"}
spec:
  selector: {matchLabels: {app: db}}
  mtls: {mode: STRICT}
---
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: z-old-db, namespace: age, creationTimestamp: "2020-01-01T00:00:00Z"}
spec:
  selector: {matchLabels: {app: db}}
  mtls: {mode: PERMISSIVE}
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: a-newest, namespace: age, creationTimestamp: "2025-06-01T00:00:00Z"}
spec: {rules: [{}]}
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: m-same-age, namespace: age, creationTimestamp: "2022-01-01T00:00:00Z"}
spec: {rules: [{}]}
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: b-same-age, namespace: age, creationTimestamp: "2022-01-01T00:00:00Z"}
spec: {rules: [{}]}
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: z-oldest, namespace: age, creationTimestamp: "2020-01-01T00:00:00Z"}
spec: {rules: [{}]}
---
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: a-new, namespace: age, creationTimestamp: "2025-06-01T00:00:00Z"}
spec:
  workloadSelector: {labels: {app: db}}
  egress: [{hosts: ["./*"]}]
---
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: z-old, namespace: age, creationTimestamp: "2020-01-01T00:00:00Z"}
spec:
  workloadSelector: {labels: {app: db}}
  egress: [{hosts: ["./*"]}]
---
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: b-ns-new, namespace: age, creationTimestamp: "2025-06-01T00:00:00Z"}
spec:
  egress: [{hosts: ["./*"]}]
---
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: c-ns-old, namespace: age, creationTimestamp: "2020-01-01T00:00:00Z"}
spec:
  egress: [{hosts: ["./*"]}]
`

// TestPoliciesByCreationTime: where istiod takes the oldest object (two
// namespace-wide or two workload PeerAuthentications, Sidecars selecting
// one workload, the namespace's Sidecars without selector) pilotfish takes
// it too, and AuthorizationPolicies of a namespace are listed oldest
// first, equal times by name, whatever order the objects came in.
func TestPoliciesByCreationTime(t *testing.T) {
	snap := lrLoad(t, map[string][]byte{"mesh.yaml": []byte(policyAgeMesh)})
	mesh := encode.DefaultMesh()
	t.Run("PeerAuthentication", func(t *testing.T) {
		for _, tc := range []struct {
			labels map[string]string
			want   encode.ServiceMTLS
		}{
			{map[string]string{"app": "web"}, encode.ServiceMTLSDisable},   // z-old
			{map[string]string{"app": "db"}, encode.ServiceMTLSPermissive}, // z-old-db
		} {
			class := sidecarClass("age")
			class.Labels = encodeLabels(tc.labels)
			if got := securityOf(NewScope(snap, class), mesh).mtls; got != tc.want {
				t.Errorf("%v: mode %d, want %d (the oldest policy's)", tc.labels, got, tc.want)
			}
		}
	})
	t.Run("AuthorizationPolicy order", func(t *testing.T) {
		class := sidecarClass("age")
		w := securityOf(NewScope(snap, class), mesh)
		var got []string
		for _, c := range w.authz.Allow {
			got = append(got, snap.String(c.Key.Name))
		}
		if want := []string{"z-oldest", "b-same-age", "m-same-age", "a-newest"}; !slices.Equal(got, want) {
			t.Errorf("ALLOW policies %v, want %v", got, want)
		}
	})
	t.Run("Sidecar", func(t *testing.T) {
		if got := SelectSidecar(snap, "istio-system", "age", map[string]string{"app": "db"}); got != "age/z-old" {
			t.Errorf("selected Sidecar %q, want age/z-old (the oldest selecting the workload)", got)
		}
		if got := SelectSidecar(snap, "istio-system", "age", map[string]string{"app": "web"}); got != "age/c-ns-old" {
			t.Errorf("namespace Sidecar %q, want age/c-ns-old (the oldest)", got)
		}
	})
}

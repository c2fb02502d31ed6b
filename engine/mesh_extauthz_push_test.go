package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/pilotfish-mesh/pilotfish/engine"
)

// extAuthzPushConfig adds a CUSTOM policy on shop and the namespace of its
// provider's service.
const extAuthzPushConfig = scopedReviews + `---
apiVersion: v1
kind: Namespace
metadata: {name: authz-ext}
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: ext, namespace: shop}
spec:
  action: CUSTOM
  provider: {name: grpc-authz}
  rules:
  - to:
    - operation: {paths: [/admin]}
`

const extAuthzPushService = `apiVersion: v1
kind: Service
metadata: {name: ext-authz, namespace: authz-ext}
spec:
  clusterIP: 10.96.0.41
  ports: [{name: grpc, port: 9000, targetPort: 9000, protocol: TCP}]
`

// TestExtAuthzServicePushes runs a real ADS client for a sidecar whose
// Sidecar resource sees only its own namespace: its CUSTOM policy's
// provider service, in another namespace, is missing at first (the
// policy's rules deny); when the service appears, the sidecar is pushed
// the ext_authz filter, though its scope does not hold the service (istiod
// looks the provider's service up in the whole registry); when it goes,
// the rules deny again.
func TestExtAuthzServicePushes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sm, addr := startConfigServer(t, "extensionProviders:\n- {name: grpc-authz, envoyExtAuthzGrpc: {service: ext-authz.authz-ext.svc.cluster.local, port: 9000}}\n", extAuthzPushConfig)

	c := newMeshClient(t, ctx, addr, reviewsSidecar, "shop")
	const deny, extAuthz = "-deny-due-to-bad-CUSTOM-action", "envoy.filters.http.ext_authz"
	c.waitFor(t, ctx, "deny rules while the provider's service is missing", func() bool { return c.has(engine.TypeListener, deny) })
	if c.has(engine.TypeListener, extAuthz) {
		t.Fatal("an ext_authz filter without the provider's service")
	}
	applyFile(t, sm, "ext.yaml", extAuthzPushService)
	c.waitFor(t, ctx, "ext_authz once the service exists", func() bool {
		return c.has(engine.TypeListener, extAuthz) && !c.has(engine.TypeListener, deny)
	})
	if c.has(engine.TypeCluster, "ext-authz.authz-ext") {
		t.Error("the sidecar's scope holds the provider's service: the test does not test what it means to")
	}
	deleteFile(t, sm, "ext.yaml")
	c.waitFor(t, ctx, "deny rules once the service is gone", func() bool {
		return c.has(engine.TypeListener, deny) && !c.has(engine.TypeListener, extAuthz)
	})
}

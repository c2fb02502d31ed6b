package engine_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/pilotfish-mesh/pilotfish/engine"
	"github.com/pilotfish-mesh/pilotfish/internal/scenario"
)

// envoyFilterECDS is an EnvoyFilter for shop's reviews pods defining the
// ECDS config "shop-lua" (a Lua filter running code).
func envoyFilterECDS(code string) string {
	return `apiVersion: networking.istio.io/v1alpha3
kind: EnvoyFilter
metadata: {name: lua-ext, namespace: shop}
spec:
  workloadSelector: {labels: {app: reviews}}
  configPatches:
  - applyTo: EXTENSION_CONFIG
    patch:
      operation: ADD
      value:
        name: shop-lua
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua
          default_source_code: {inline_string: "` + code + `"}
`
}

// TestEnvoyFilterExtensionConfigOverECDS runs real ADS clients, SotW and
// Delta, for two pods of reviews (the EnvoyFilter selects them) and one
// of ratings: subscribing to "shop-lua" over ECDS, the reviews pods get
// the patch's Lua config, the same bytes on both streams; a change of the
// patch pushes the new config; ratings, whose class has no such patch,
// never gets it; deleting the filter leaves the reviews pods without it.
func TestEnvoyFilterExtensionConfigOverECDS(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sm := scenario.NewMesh()
	applyFile(t, sm, "config.yaml", wasmPushConfig)
	applyFile(t, sm, "filter.yaml", envoyFilterECDS("-- v1"))
	_, addr := startMeshServer(t, sm.W, nil)
	const name = "shop-lua"
	sotw := newWasmClient(t, ctx, addr, "sidecar~10.1.0.50~reviews-1.shop~shop.svc.cluster.local", "reviews", false)
	delta := newWasmClient(t, ctx, addr, "sidecar~10.1.0.51~reviews-2.shop~shop.svc.cluster.local", "reviews", true)
	other := newWasmClient(t, ctx, addr, "sidecar~10.1.0.52~ratings-1.shop~shop.svc.cluster.local", "ratings", false)
	for _, c := range []*meshClient{sotw, delta, other} {
		c.waitFor(t, ctx, "LDS", func() bool { return c.count(engine.TypeListener) > 0 })
		c.subscribe(t, engine.TypeExtensionConfig, name)
	}
	for _, c := range []*meshClient{sotw, delta} {
		c.waitFor(t, ctx, "the patch's extension config over ECDS", func() bool {
			return c.has(engine.TypeExtensionConfig, "-- v1") && c.has(engine.TypeExtensionConfig, "envoy.extensions.filters.http.lua.v3.Lua")
		})
	}
	sotw.mu.Lock()
	delta.mu.Lock()
	same := bytes.Equal(sotw.last[engine.TypeExtensionConfig], delta.last[engine.TypeExtensionConfig])
	delta.mu.Unlock()
	sotw.mu.Unlock()
	if !same {
		t.Error("the two pods of reviews got different extension config bytes")
	}

	applyFile(t, sm, "filter.yaml", envoyFilterECDS("-- v2"))
	for _, c := range []*meshClient{sotw, delta} {
		c.waitFor(t, ctx, "the changed patch over ECDS", func() bool { return c.has(engine.TypeExtensionConfig, "-- v2") })
	}
	// A marker service bounds what the changes sent to ratings.
	applyFile(t, sm, "marker.yaml", shopMarker)
	other.waitFor(t, ctx, "the marker's CDS", func() bool { return other.has(engine.TypeCluster, "marker.shop") })
	if other.has(engine.TypeExtensionConfig, "lua") {
		t.Error("ratings, which no EnvoyFilter selects, got the patch's extension config")
	}

	deleteFile(t, sm, "filter.yaml")
	for _, c := range []*meshClient{sotw, delta} {
		c.waitFor(t, ctx, "no extension config once the filter is gone", func() bool { return !c.has(engine.TypeExtensionConfig, "lua") })
	}
}

package debug_test

import (
	"fmt"
	"strings"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/engine"
)

// badMerge is an EnvoyFilter istiod accepts but whose patch it skips with
// an error at generation: a MERGE of a Lua config onto the router filter.
const badMerge = `apiVersion: networking.istio.io/v1alpha3
kind: EnvoyFilter
metadata: {name: bad-merge, namespace: shop}
spec:
  configPatches:
  - applyTo: HTTP_FILTER
    match:
      context: SIDECAR_OUTBOUND
      listener: {filterChain: {filter: {name: envoy.filters.network.http_connection_manager, subFilter: {name: envoy.filters.http.router}}}}
    patch:
      operation: MERGE
      value:
        name: envoy.filters.http.router
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua
          defaultSourceCode: {inlineString: "function envoy_on_request(h) end"}
`

// TestConfigErrorsListPatchFailures: an EnvoyFilter patch that fails to
// apply is listed by /debug/config_errors, naming the filter and the
// patch, once a proxy's listeners were generated (not before: the failure
// happens at generation), and once however many generations failed.
func TestConfigErrorsListPatchFailures(t *testing.T) {
	s := startWith(t, badMerge)
	var errs []string
	if getJSON(t, s.http+"/debug/config_errors", &errs); len(errs) != 0 {
		t.Fatalf("config_errors before any generation = %v, want none", errs)
	}
	for i, pod := range []string{"ratings-0", "ratings-1"} {
		ads := stream(t, s.grpc)
		if err := ads.Send(&discoveryv3.DiscoveryRequest{Node: sidecarNode(t, pod, "shop", fmt.Sprintf("10.244.0.%d", 7+i)), TypeUrl: engine.TypeListener}); err != nil {
			t.Fatal(err)
		}
		if r, err := ads.Recv(); err != nil || len(r.GetResources()) == 0 {
			t.Fatalf("listeners: %v, %v", r, err)
		}
	}
	getJSON(t, s.http+"/debug/config_errors", &errs)
	const want = "EnvoyFilter shop/bad-merge: spec.configPatches[0]: not applied at a recent generation: "
	if len(errs) != 1 || !strings.HasPrefix(errs[0], want) || len(errs[0]) == len(want) {
		t.Errorf("config_errors = %q, want one entry %q with the error", errs, want+"…")
	}
}

// TestConfigErrorsListProviderLookups: an extension provider whose service
// the registry lacks is listed by /debug/config_errors (istiod logs its
// LookupCluster failure); one whose service exists is not.
func TestConfigErrorsListProviderLookups(t *testing.T) {
	als := encode.AccessLog{Kind: encode.AccessLogHTTPGRPC}
	mesh := encode.DefaultMesh()
	mesh.TelemetryProviders = []encode.TelemetryProvider{
		{Name: "als", Log: &als, Service: "shop/reviews.shop.svc.cluster.local"},
		{Name: "als-typo", Log: &als, Service: "shop/reveiws.shop.svc.cluster.local"},
	}
	s := startMesh(t, "", mesh)
	var errs []string
	getJSON(t, s.http+"/debug/config_errors", &errs)
	const want = "warning: MeshConfig: mesh.extensionProviders[als-typo]: could not find service shop/reveiws.shop.svc.cluster.local in the service registry: its access logger is left out"
	if len(errs) != 1 || !strings.HasPrefix(errs[0], want) {
		t.Errorf("config_errors = %q, want one entry %q…", errs, want)
	}
}

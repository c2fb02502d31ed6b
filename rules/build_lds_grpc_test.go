package rules

import (
	"os"
	"path/filepath"
	"testing"

	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/pilotfish-mesh/pilotfish/encode"
)

// istiodGRPCResponses reads the DiscoveryResponses istiod sent a proxyless
// gRPC client (istiod-output/http.s10.grpc.responses.json), by type URL.
func istiodGRPCResponses(t testing.TB) map[string]*discovery.DiscoveryResponse {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(istiodOutputDir, "http.s10.grpc.responses.json"))
	if err != nil {
		t.Skipf("istiod reference output not available: %v", err)
	}
	var raw []any
	unmarshalJSONBytes(t, b, &raw)
	out := map[string]*discovery.DiscoveryResponse{}
	for _, r := range raw {
		dr := &discovery.DiscoveryResponse{}
		unmarshalJSON(t, r, dr)
		out[dr.TypeUrl] = dr
	}
	return out
}

// TestGRPCMatchesIstiod: the listener and route configuration a proxyless
// gRPC client gets for xds:///random-0.host.example:80 are istiod's, field
// for field.
func TestGRPCMatchesIstiod(t *testing.T) {
	resp := istiodGRPCResponses(t)
	snap := httpBench(t, 10)
	sc := NewScope(snap, grpcClass("default"))

	wantL := &listener.Listener{}
	if err := resp[TypeListener].Resources[0].UnmarshalTo(wantL); err != nil {
		t.Fatal(err)
	}
	ls, err := buildListeners(sc, encode.DefaultMesh(), verifyCache(), []string{"random-0.host.example:80"}, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(ls) != 1 {
		t.Fatalf("got %d listeners", len(ls))
	}
	gotL := decodeListeners(t, ls)[0]
	validate(t, gotL)
	normalize(t, gotL)
	normalize(t, wantL)
	if d := protoDiff(t, wantL, gotL); d != "" {
		t.Errorf("listener differs from istiod's (-istiod +pilotfish):\n%s", d)
	}

	wantR := &route.RouteConfiguration{}
	if err := resp[TypeRoute].Resources[0].UnmarshalTo(wantR); err != nil {
		t.Fatal(err)
	}
	gotR := buildRoutesFor(t, snap, grpcClass("default"), "outbound|80||random-0.host.example")
	if len(gotR) != 1 {
		t.Fatalf("got %d route configurations", len(gotR))
	}
	if d := protoDiff(t, wantR, gotR[0]); d != "" {
		t.Errorf("route configuration differs from istiod's (-istiod +pilotfish):\n%s", d)
	}
}

func unmarshalJSONBytes(t testing.TB, b []byte, v any) {
	t.Helper()
	if err := jsonUnmarshal(b, v); err != nil {
		t.Fatal(err)
	}
}

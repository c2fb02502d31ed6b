package engine

import (
	"context"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	luav3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/lua/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/internal/scenario"
	"github.com/pilotfish-mesh/pilotfish/internal/xdstest"
)

const ecdsShareConfig = `apiVersion: v1
kind: Namespace
metadata: {name: shop}
---
apiVersion: networking.istio.io/v1alpha3
kind: EnvoyFilter
metadata: {name: lua-ext, namespace: shop}
spec:
  configPatches:
  - applyTo: EXTENSION_CONFIG
    patch:
      operation: ADD
      value:
        name: shop-lua
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua
          default_source_code: {inline_string: "-- shared"}
`

// TestEnvoyFilterExtensionConfigShared: a namespace-wide EnvoyFilter's
// EXTENSION_CONFIG patch is one cache entry for two proxy classes (two
// workloads): the second class's ECDS answer is a cache hit with the same
// bytes; the config is the patch's value, named as the patch names it,
// and passes Envoy's validation; a name no patch defines gets nothing.
func TestEnvoyFilterExtensionConfigShared(t *testing.T) {
	sm := scenario.NewMesh()
	if err := sm.Apply("config.yaml", []byte(ecdsShareConfig)); err != nil {
		t.Fatal(err)
	}
	cache := encode.NewCache()
	e := New(sm.W, Options{Mesh: encode.DefaultMesh(), Cache: cache})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stats := func() encode.Stats {
		for _, s := range cache.Stats() {
			if s.Kind == "extension" {
				return s
			}
		}
		return encode.Stats{}
	}
	gen := func(ip, app string, names ...string) []string {
		t.Helper()
		md, err := structpb.NewStruct(map[string]any{"NAMESPACE": "shop", "INSTANCE_IPS": ip, "LABELS": map[string]any{"app": app}})
		if err != nil {
			t.Fatal(err)
		}
		conn, err := e.Connect(ctx, &corev3.Node{Id: "sidecar~" + ip + "~" + app + "-1.shop~shop.svc.cluster.local", Metadata: md}, "")
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		rs, err := conn.Generate(encode.ExtensionConfigType, names, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range rs {
			out = append(out, string(r.Any))
		}
		return out
	}
	first := gen("10.1.0.60", "reviews", "shop-lua", "not-defined")
	s1 := stats()
	second := gen("10.1.0.61", "ratings", "shop-lua")
	s2 := stats()
	if len(first) != 1 || len(second) != 1 {
		t.Fatalf("answers: %d and %d resources, want 1 each (the undefined name left out)", len(first), len(second))
	}
	if first[0] != second[0] {
		t.Error("two classes with the same patch got different bytes")
	}
	if s2.Misses != s1.Misses || s2.Hits != s1.Hits+1 {
		t.Errorf("second class: %d misses and %d hits more, want 0 and 1", s2.Misses-s1.Misses, s2.Hits-s1.Hits)
	}
	var a anypb.Any
	var tc corev3.TypedExtensionConfig
	if err := proto.Unmarshal([]byte(first[0]), &a); err != nil {
		t.Fatal(err)
	}
	if err := a.UnmarshalTo(&tc); err != nil {
		t.Fatal(err)
	}
	if err := xdstest.Validate(&tc); err != nil {
		t.Error(err)
	}
	var lua luav3.Lua
	if err := tc.GetTypedConfig().UnmarshalTo(&lua); err != nil {
		t.Fatal(err)
	}
	if tc.GetName() != "shop-lua" || !strings.Contains(lua.GetDefaultSourceCode().GetInlineString(), "-- shared") {
		t.Errorf("config %v", &tc)
	}
}

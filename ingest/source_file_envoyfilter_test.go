package ingest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pilotfish-mesh/pilotfish/index"
)

const testEnvoyFilter = `apiVersion: networking.istio.io/v1alpha3
kind: EnvoyFilter
metadata: {name: lua, namespace: shop}
spec:
  priority: 4
  configPatches:
  - applyTo: HTTP_FILTER
    match: {context: SIDECAR_INBOUND, listener: {filterChain: {filter: {name: envoy.filters.network.http_connection_manager}}}}
    patch:
      operation: INSERT_BEFORE
      value: {name: envoy.lua, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua, defaultSourceCode: {inlineString: x}}}
`

// TestFileSourceEnvoyFilter checks that the file source reads an
// EnvoyFilter into a row without a problem, keeps the last good row when an edit is invalid, and deletes the
// row when the file goes.
func TestFileSourceEnvoyFilter(t *testing.T) {
	f := newSourceFixture(t)
	f.write("shop/lua.yaml", testEnvoyFilter)
	f.sync()
	row := func() *index.Config {
		snap := f.w.Snapshot()
		ns, _ := snap.Symbols.Lookup("shop")
		n, _ := snap.Symbols.Lookup("lua")
		c, _ := snap.Config(index.ConfigEnvoyFilter, index.ConfigKey{Namespace: ns, Name: n})
		return c
	}
	if r := row(); r == nil || r.Priority != 4 || r.SourceLine != 1 {
		t.Fatalf("row %+v", r)
	}
	// Its patches are applied: no warning (TestEnvoyFilterWarning).
	if errs := f.src.Errors(); len(errs) != 0 {
		t.Fatalf("problems: %v", errs)
	}
	f.write("shop/lua.yaml", strings.Replace(strings.Replace(testEnvoyFilter, "INSERT_BEFORE", "INVALID", 1), "priority: 4", "priority: 5", 1))
	f.sync()
	if r := row(); r == nil || r.Priority != 4 {
		t.Errorf("after an invalid edit: %+v, want the last good row", r)
	}
	found := false
	for _, e := range f.src.Errors() {
		found = found || strings.Contains(e.Error(), "spec.configPatches[0].patch.operation: required")
	}
	if !found {
		t.Errorf("no error naming the operation: %v", f.src.Errors())
	}
	if err := os.Remove(filepath.Join(f.dir, "shop/lua.yaml")); err != nil {
		t.Fatal(err)
	}
	f.sync()
	if r := row(); r != nil {
		t.Errorf("row after the file's removal: %+v", r)
	}
}

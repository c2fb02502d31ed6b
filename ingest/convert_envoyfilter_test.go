package ingest

import (
	"math"
	"testing"
	"time"

	networking "istio.io/api/networking/v1alpha3"

	"github.com/pilotfish-mesh/pilotfish/envoypatch"
	"github.com/pilotfish-mesh/pilotfish/index"
)

// TestEnvoyFilterRow checks an EnvoyFilter's config row: kind, priority,
// workload selector, creation time (istiod's order), targetRefs kept in
// the Spec; its compiled patches in Derived; and that deleting it retires the row.
func TestEnvoyFilterRow(t *testing.T) {
	w := index.NewWriter()
	c := NewConverter(w, "cluster.local")
	created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	apply(t, w, c, `apiVersion: networking.istio.io/v1alpha3
kind: EnvoyFilter
metadata: {name: lua, namespace: shop, creationTimestamp: "`+created.Format(time.RFC3339)+`"}
spec:
  workloadSelector: {labels: {app: reviews}}
  priority: -5
  configPatches: [{applyTo: CLUSTER, patch: {operation: REMOVE}}]
---
apiVersion: networking.istio.io/v1alpha3
kind: EnvoyFilter
metadata: {name: refs, namespace: shop}
spec:
  targetRefs: [{kind: Service, group: "", name: reviews}]
`)
	snap := w.Snapshot()
	syms := w.Symbols()
	if n := snap.NumConfigs(index.ConfigEnvoyFilter); n != 2 {
		t.Fatalf("%d EnvoyFilter rows, want 2", n)
	}
	row, ok := snap.Config(index.ConfigEnvoyFilter, index.ConfigKey{Namespace: syms.Intern("shop"), Name: syms.Intern("lua")})
	if !ok {
		t.Fatal("no row for shop/lua")
	}
	if row.Kind != index.ConfigEnvoyFilter || row.Kind.String() != "EnvoyFilter" {
		t.Errorf("kind %v", row.Kind)
	}
	if row.Priority != -5 {
		t.Errorf("priority %d, want -5", row.Priority)
	}
	if row.CreationTime != created.UnixNano() {
		t.Errorf("creation time %d, want %d", row.CreationTime, created.UnixNano())
	}
	n := 0
	snap.ConfigsBySelector(index.ConfigEnvoyFilter, syms.Intern("shop"), c.labelSet(map[string]string{"app": "reviews"}), func(c *index.Config) bool {
		n++
		return true
	})
	if !row.HasSelector || n != 1 {
		t.Errorf("selector: HasSelector %v, %d rows by selector, want 1", row.HasSelector, n)
	}
	f, ok := row.Derived.(*envoypatch.Filter)
	if !ok || f.Source != "shop/lua" || len(f.Patches) != 1 || f.Patches[0].ApplyTo != networking.EnvoyFilter_CLUSTER ||
		f.Patches[0].Operation != networking.EnvoyFilter_Patch_REMOVE || f.Patches[0].Match.GetContext() != networking.EnvoyFilter_ANY {
		t.Errorf("Derived %#v, want shop/lua's compiled CLUSTER REMOVE with match {context: ANY}", row.Derived)
	}
	refs, _ := snap.Config(index.ConfigEnvoyFilter, index.ConfigKey{Namespace: syms.Intern("shop"), Name: syms.Intern("refs")})
	if refs == nil || refs.HasSelector || len(refs.Spec.(*networking.EnvoyFilter).GetTargetRefs()) != 1 {
		t.Errorf("targetRefs row: %+v", refs)
	}
	if f, ok := refs.Derived.(*envoypatch.Filter); !ok || f == nil || len(f.Patches) != 0 {
		t.Errorf("targetRefs row: %+v", refs)
	}
}

// TestWasmPluginRow: a WasmPlugin is a ConfigWasmPlugin row with its
// selector, its priority (math.MinInt32 when unset: istiod sorts such a
// plugin last in its phase) and its creation time.
func TestWasmPluginRow(t *testing.T) {
	w := index.NewWriter()
	c := NewConverter(w, "cluster.local")
	created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	apply(t, w, c, `apiVersion: extensions.istio.io/v1alpha1
kind: WasmPlugin
metadata: {name: authn, namespace: shop, creationTimestamp: "`+created.Format(time.RFC3339)+`"}
spec:
  selector: {matchLabels: {app: reviews}}
  url: oci://ghcr.io/example/authn:v1
  priority: -5
---
apiVersion: extensions.istio.io/v1alpha1
kind: WasmPlugin
metadata: {name: all, namespace: shop}
spec:
  url: oci://ghcr.io/example/all:v1
`)
	snap := w.Snapshot()
	syms := w.Symbols()
	if n := snap.NumConfigs(index.ConfigWasmPlugin); n != 2 {
		t.Fatalf("%d WasmPlugin rows, want 2", n)
	}
	row, ok := snap.Config(index.ConfigWasmPlugin, index.ConfigKey{Namespace: syms.Intern("shop"), Name: syms.Intern("authn")})
	if !ok {
		t.Fatal("no row for shop/authn")
	}
	if row.Kind.String() != "WasmPlugin" || row.Priority != -5 || row.CreationTime != created.UnixNano() || !row.HasSelector {
		t.Errorf("row: kind %v priority %d created %d selector %v", row.Kind, row.Priority, row.CreationTime, row.HasSelector)
	}
	n := 0
	snap.ConfigsBySelector(index.ConfigWasmPlugin, syms.Intern("shop"), c.labelSet(map[string]string{"app": "reviews"}), func(*index.Config) bool {
		n++
		return true
	})
	if n != 1 {
		t.Errorf("%d rows by selector, want 1", n)
	}
	all, _ := snap.Config(index.ConfigWasmPlugin, index.ConfigKey{Namespace: syms.Intern("shop"), Name: syms.Intern("all")})
	if all == nil || all.HasSelector || all.Priority != math.MinInt32 {
		t.Errorf("namespace-wide row: %+v", all)
	}
}

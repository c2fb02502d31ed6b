package ingest

import (
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

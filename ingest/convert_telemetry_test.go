package ingest

import (
	"testing"

	telemetry "istio.io/api/telemetry/v1alpha1"

	"github.com/pilotfish-mesh/pilotfish/index"
)

// TestTelemetryRow: a Telemetry (v1 and v1alpha1) becomes a
// ConfigTelemetry row with its selector; one without is namespace-wide;
// targetRefs stay in the Spec.
func TestTelemetryRow(t *testing.T) {
	w := index.NewWriter()
	c := NewConverter(w, "cluster.local")
	apply(t, w, c, `apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {name: quiet, namespace: shop}
spec:
  selector: {matchLabels: {app: db}}
  accessLogging: [{disabled: true}]
---
apiVersion: telemetry.istio.io/v1alpha1
kind: Telemetry
metadata: {name: ns, namespace: shop}
spec:
  metrics: [{providers: [{name: prometheus}]}]
---
apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {name: gw, namespace: shop}
spec:
  targetRefs: [{kind: Gateway, group: gateway.networking.k8s.io, name: public}]
`)
	snap, syms := w.Snapshot(), w.Symbols()
	if n := snap.NumConfigs(index.ConfigTelemetry); n != 3 {
		t.Fatalf("%d Telemetry rows, want 3", n)
	}
	key := func(name string) index.ConfigKey {
		return index.ConfigKey{Namespace: syms.Intern("shop"), Name: syms.Intern(name)}
	}
	quiet, _ := snap.Config(index.ConfigTelemetry, key("quiet"))
	if quiet == nil || !quiet.HasSelector || quiet.Kind.String() != "Telemetry" {
		t.Fatalf("quiet row: %+v", quiet)
	}
	n := 0
	snap.ConfigsBySelector(index.ConfigTelemetry, syms.Intern("shop"), c.labelSet(map[string]string{"app": "db"}), func(*index.Config) bool { n++; return true })
	if n != 1 {
		t.Errorf("%d rows select app=db, want 1", n)
	}
	ns, _ := snap.Config(index.ConfigTelemetry, key("ns"))
	if ns == nil || ns.HasSelector || len(ns.Spec.(*telemetry.Telemetry).GetMetrics()) != 1 {
		t.Errorf("namespace row: %+v", ns)
	}
	gw, _ := snap.Config(index.ConfigTelemetry, key("gw"))
	if gw == nil || gw.HasSelector || len(gw.Spec.(*telemetry.Telemetry).GetTargetRefs()) != 1 {
		t.Errorf("targetRefs row: %+v", gw)
	}
}

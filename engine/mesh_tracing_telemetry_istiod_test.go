package engine

import (
	"strings"
	"testing"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/inject"
)

// Case telemetry-tracing of internal/istiodref: Telemetry tracing at the
// root (zipkin, 10%), namespace (OpenTelemetry, custom tags of every
// kind), workload (disableSpanReporting) and workload SERVER-only
// (sampling, useRequestIdForTraceSampling, enableIstioTags,
// disableContextPropagation) levels, no default tracing provider.

// TestTelemetryTracingMatchesIstiod: every HCM of every listener of the
// four proxies has istiod's tracing and request ID extension, and every
// listener passes Envoy's validation (tracingDiffs).
func TestTelemetryTracingMatchesIstiod(t *testing.T) {
	c := loadMeshCase(t, "telemetry-tracing")
	m := telemetryCaseMesh(t, c)
	if m.Tracing == nil || m.Tracing.HasDefaultProvider {
		t.Fatal("the case's mesh config should trace (enableTracing) without a default provider")
	}
	diffs, compared, traced := tracingDiffs(t, c, m)
	// shop: outbound (client, otel) and inbound (server, 50%); quiet:
	// none traced; web: zipkin both sides; gateway: otel.
	if compared < 8 || traced < 5 {
		t.Fatalf("%d HCMs compared, %d traced by istiod; want 8 and 5 or more", compared, traced)
	}
	t.Logf("%d HCMs compared (%d traced by istiod)", compared, traced)
	for _, d := range diffs {
		t.Error(d)
	}
}

// TestTelemetryTracingCaseSeesTelemetry: the comparison can fail. With
// the Telemetries' tracing ignored (the mesh's enableTracing fallback),
// HCMs istiod traces from Telemetry differ.
func TestTelemetryTracingCaseSeesTelemetry(t *testing.T) {
	c := loadMeshCase(t, "telemetry-tracing")
	m := telemetryCaseMesh(t, c).Clone()
	m.TelemetryProviders = nil // every Telemetry's provider unknown: no tracing
	diffs, _, traced := tracingDiffs(t, c, m)
	if traced == 0 || len(diffs) != traced {
		t.Errorf("without the providers, %d HCMs differ; want all %d istiod traces:\n%s", len(diffs), traced, strings.Join(diffs, "\n"))
	}
}

// TestTelemetryTracingListenersShared: a second pod of shop's workload
// gets every listener from the cache; quiet (its spans disabled) shares
// no HCM-bearing listener with shop, whose spans go to otel.
func TestTelemetryTracingListenersShared(t *testing.T) {
	c := loadMeshCase(t, "telemetry-tracing")
	m := telemetryCaseMesh(t, c)
	cache := encode.NewCache()
	e := caseEngine(t, c, Options{Mesh: m, Cache: cache})
	listenerStats := func() encode.Stats { return listenerCacheStats(t, cache) }
	gen := func(id string, md map[string]any) map[string]string { t.Helper(); return listenerBytes(t, e, id, md) }
	shop, quiet := c.Proxies[0], c.Proxies[1]
	if shop.Name != "shop" || quiet.Name != "quiet" {
		t.Fatalf("the case's proxies are %s and %s; want shop and quiet", shop.Name, quiet.Name)
	}
	first := gen(shop.ID, shop.Metadata)
	s1 := listenerStats()
	second := gen(strings.Replace(shop.ID, "shop-v1-7d9c", "shop-v1-9f8e", 1), shop.Metadata)
	s2 := listenerStats()
	if len(first) < 3 || len(second) != len(first) {
		t.Fatalf("listeners: first pod %d, second %d; want the same 3 or more", len(first), len(second))
	}
	if s2.Misses != s1.Misses || s2.Hits-s1.Hits != uint64(len(second)) {
		t.Errorf("second pod of the workload: %d misses and %d hits more, want 0 and %d", s2.Misses-s1.Misses, s2.Hits-s1.Hits, len(second))
	}
	for name, b := range first {
		if !strings.Contains(b, "envoy.filters.network.http_connection_manager") {
			continue
		}
		if !strings.Contains(b, "envoy.tracers.opentelemetry") {
			t.Errorf("shop's listener %s has an HCM without the otel tracer", name)
		}
	}
	for name, b := range gen(quiet.ID, quiet.Metadata) {
		if strings.Contains(b, "envoy.tracers") {
			t.Errorf("quiet's listener %s has a tracer; its spans are disabled", name)
		}
	}
}

// TestTelemetryTracingWithoutMeshTracing: with enableTracing false the
// Telemetries still trace as istiod does (its Telemetry path does not read
// enableTracing), the Istio tags naming each workload: classes hold the
// tracing identity whenever the mesh has a tracing provider.
func TestTelemetryTracingWithoutMeshTracing(t *testing.T) {
	c := loadMeshCase(t, "telemetry-tracing")
	cfg, err := inject.ParseMesh(c.Mesh)
	if err != nil {
		t.Fatal(err)
	}
	cfg.EnableTracing = false
	m, err := MeshSettings{Config: cfg}.Mesh()
	if err != nil {
		t.Fatal(err)
	}
	if m.Tracing != nil || !mayTrace(m) {
		t.Fatalf("mesh: Tracing %v, mayTrace %v; want no mesh tracing and providers", m.Tracing, mayTrace(m))
	}
	diffs, compared, traced := tracingDiffs(t, c, m)
	if compared < 8 || traced < 5 {
		t.Fatalf("%d HCMs compared, %d traced by istiod", compared, traced)
	}
	for _, d := range diffs {
		t.Error(d)
	}
}

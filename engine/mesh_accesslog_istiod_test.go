package engine

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/inject"
	"github.com/pilotfish-mesh/pilotfish/internal/istiodref"
)

// Cases accesslog-mesh and accesslog-telemetry of internal/istiodref:
// the access logs of every listener, of every tcp_proxy and HTTP
// connection manager, and the istio.stats configs, field by field (as
// JSON) against istiod's dumps of the same inputs.

// telemetryFields renders what telemetry sets on a listener: its own
// access_log, and per chain and filter the access_log of tcp_proxy and
// HCM filters and the istio.stats configs (network and HTTP).
func telemetryFields(t *testing.T, l map[string]any) map[string]string {
	t.Helper()
	out := map[string]string{}
	if al, ok := l["accessLog"]; ok {
		out["listener accessLog"] = jsonString(t, al)
	}
	eachChain(t, l, func(id string, fc map[string]any) {
		for _, f := range jsonList(fc["filters"]) {
			fm, _ := f.(map[string]any)
			name, _ := fm["name"].(string)
			tc, _ := fm["typedConfig"].(map[string]any)
			switch name {
			case "istio.stats":
				out[id+" "+name] = jsonString(t, tc)
			case "envoy.filters.network.tcp_proxy", "envoy.filters.network.http_connection_manager":
				if al, ok := tc["accessLog"]; ok {
					out[id+" "+name+" accessLog"] = jsonString(t, al)
				}
				for _, h := range jsonList(tc["httpFilters"]) {
					hm, _ := h.(map[string]any)
					if hm["name"] == "istio.stats" {
						out[id+" hcm istio.stats"] = jsonString(t, hm["typedConfig"])
					}
				}
			}
		}
	})
	return out
}

// telemetryFieldDiffs generates each proxy's listeners with mesh and
// returns how their telemetry fields differ from istiod's, and how many
// access logs istiod's dumps hold.
func telemetryFieldDiffs(t *testing.T, c *istiodref.Case, mesh *encode.Mesh) (diffs []string, logs int) {
	t.Helper()
	eachRefProxy(t, c, caseEngine(t, c, Options{Mesh: mesh}), "", func(p *refProxy) {
		p.eachListener(&diffs, func(ln string, istiod, pilotfish map[string]any) {
			want, have := telemetryFields(t, istiod), telemetryFields(t, pilotfish)
			for _, k := range slices.Sorted(mapKeys(want)) {
				if strings.HasSuffix(k, "accessLog") {
					logs++
				}
				if have[k] != want[k] {
					diffs = append(diffs, fmt.Sprintf("%s: %s %s\n got %s\nwant %s", p.Name, ln, k, have[k], want[k]))
				}
			}
			for _, k := range slices.Sorted(mapKeys(have)) {
				if _, ok := want[k]; !ok {
					diffs = append(diffs, fmt.Sprintf("%s: %s %s: istiod has none, pilotfish %s", p.Name, ln, k, have[k]))
				}
			}
		})
	})
	return diffs, logs
}

// TestMeshAccessLogMatchesIstiod: mesh accessLogFile with JSON encoding
// and a custom format (REQ_WITHOUT_QUERY, so its formatter): the same
// loggers as istiod on every HCM and tcp_proxy, and with the NR filter on
// virtualOutbound, virtualInbound and the gateway's listeners.
func TestMeshAccessLogMatchesIstiod(t *testing.T) {
	c := loadMeshCase(t, "accesslog-mesh")
	m := telemetryCaseMesh(t, c)
	if m.MeshAccessLog == nil {
		t.Fatal("the case's accessLogFile gives no logger")
	}
	diffs, logs := telemetryFieldDiffs(t, c, m)
	if logs < 15 {
		t.Fatalf("istiod's dumps hold %d access logs; want the case's 15 or more", logs)
	}
	for _, d := range diffs {
		t.Error(d)
	}
	// The comparison can fail: without the logger, every log differs.
	off := m.Clone()
	off.MeshAccessLog, off.Telemetry = nil, nil
	if d, _ := telemetryFieldDiffs(t, c, off); len(d) < logs {
		t.Errorf("without accessLogFile, %d fields differ; want at least the %d logs", len(d), logs)
	}
}

// TestTelemetryAccessLogMatchesIstiod: Telemetry resources at the root,
// namespace and workload levels (file, HTTP and TCP gRPC providers, a CEL
// filter, a SERVER-only provider, logging disabled on one workload, metric
// overrides, a reportingInterval and a custom metric): the same loggers
// and istio.stats configs as istiod on every listener of three sidecars.
func TestTelemetryAccessLogMatchesIstiod(t *testing.T) {
	c := loadMeshCase(t, "accesslog-telemetry")
	m := telemetryCaseMesh(t, c)
	diffs, logs := telemetryFieldDiffs(t, c, m)
	if logs < 40 {
		t.Fatalf("istiod's dumps hold %d access logs; want the case's 40 or more", logs)
	}
	for _, d := range diffs {
		t.Error(d)
	} // The comparison can fail: without the mesh's extension providers
	// (so no Telemetry provider resolves), every logger differs.
	off := m.Clone()
	off.TelemetryProviders = nil
	if d, _ := telemetryFieldDiffs(t, c, off); len(d) < logs {
		t.Errorf("without providers, %d fields differ; want at least the %d logs", len(d), logs)
	}
}

// TestMeshListenerLogDisabled: disableEnvoyListenerLog on the
// accesslog-mesh case drops the listener-level loggers (virtualOutbound,
// virtualInbound, the gateway's listeners), as istiod's
// setListenerAccessLog returns early, and leaves every chain's as istiod
// sends them.
func TestMeshListenerLogDisabled(t *testing.T) {
	c := loadMeshCase(t, "accesslog-mesh")
	cfg, err := inject.ParseMesh(append(append([]byte{}, c.Mesh...), "\ndisableEnvoyListenerLog: true\n"...))
	if err != nil {
		t.Fatal(err)
	}
	m, err := MeshSettings{Config: cfg}.Mesh()
	if err != nil {
		t.Fatal(err)
	}
	diffs, _ := telemetryFieldDiffs(t, c, m)
	listenerLogs := 0
	for _, d := range diffs {
		if !strings.Contains(d, " listener accessLog\n got \nwant ") {
			t.Error(d)
			continue
		}
		listenerLogs++
	}
	if listenerLogs != 4 {
		t.Errorf("%d listener-level loggers dropped; want the case's 4 (virtualOutbound, virtualInbound, two gateway listeners)", listenerLogs)
	}
}

// TestTelemetryOverridesMatchesIstiod: metrics disabled for SERVER at the
// root and enabled again for one metric, tag overrides and a CLIENT drop
// at the namespace, a reportingInterval and a SERVER-only text logger at
// the workload; text (with req_without_query) and JSON (omitEmptyValues)
// file providers: the same loggers and istio.stats configs as istiod on a
// sidecar and a gateway.
func TestTelemetryOverridesMatchesIstiod(t *testing.T) {
	c := loadMeshCase(t, "telemetry-overrides")
	m := telemetryCaseMesh(t, c)
	diffs, logs := telemetryFieldDiffs(t, c, m)
	if logs < 15 {
		t.Fatalf("istiod's dumps hold %d access logs; want the case's 15 or more", logs)
	}
	for _, d := range diffs {
		t.Error(d)
	}
}

// TestTelemetrySharedListeners: with the accesslog-telemetry case's
// Telemetries, a second sidecar of web's workload (another pod, same
// labels) gets every listener from the cache (no listener is encoded for
// it), and a namespace no Telemetry beyond the root's reaches keeps
// listeners equal, byte for byte, to those of another sidecar there.
func TestTelemetrySharedListeners(t *testing.T) {
	c := loadMeshCase(t, "accesslog-telemetry")
	m := telemetryCaseMesh(t, c)
	cache := encode.NewCache()
	e := caseEngine(t, c, Options{Mesh: m, Cache: cache})
	lds := func(id, ns string, labels map[string]any) map[string]string {
		t.Helper()
		return listenerBytes(t, e, id, map[string]any{"NAMESPACE": ns, "LABELS": labels, "INSTANCE_IPS": strings.Split(id, "~")[1], "ISTIO_VERSION": "1.31.0"})
	}
	misses := func() uint64 { return listenerCacheStats(t, cache).Misses }
	web := map[string]any{"app": "web", "version": "v1"}
	first := lds("sidecar~10.1.62.5~web-v1-7d9c.altel~altel.svc.cluster.local", "altel", web)
	before := misses()
	second := lds("sidecar~10.1.62.5~web-v1-8e0d.altel~altel.svc.cluster.local", "altel", web)
	if n := misses() - before; n != 0 {
		t.Errorf("a second sidecar of web's class encoded %d listeners; want every one from the cache", n)
	}
	for name, b := range first {
		if second[name] != b {
			t.Errorf("listener %s differs between two sidecars of one class", name)
		}
	}
	if !strings.Contains(first["virtualInbound"], "envoy.tcp_grpc_access_log") {
		t.Fatal("web's virtualInbound lacks the namespace's tcp ALS logger: the Telemetries do not apply")
	}
	// Two sidecars of altel2 without the batch label: the root Telemetry
	// only, so their listeners are one encoding.
	x := lds("sidecar~10.1.62.30~x-1.altel2~altel2.svc.cluster.local", "altel2", map[string]any{"app": "x"})
	y := lds("sidecar~10.1.62.31~y-1.altel2~altel2.svc.cluster.local", "altel2", map[string]any{"app": "y"})
	for name, b := range x {
		if y[name] != b {
			t.Errorf("listener %s differs between two sidecars the same Telemetries reach", name)
		}
	}
	if x["virtualOutbound"] == first["virtualOutbound"] {
		t.Error("altel2's virtualOutbound equals altel's, though altel's namespace Telemetry adds loggers")
	}
}

package bench

import (
	"fmt"
	"testing"

	"github.com/pilotfish-mesh/pilotfish/index"
)

// benchEnvoyFilters are ten EnvoyFilters of the kinds meshes run (public
// examples): Lua and local rate limit HTTP filters, header tweaks on
// routes, an HCM and a tcp_proxy merge, a cluster MERGE on one service, an
// added cluster, a listener merge; mesh-wide, namespace-wide and
// selector-scoped, for the benchmark proxy's namespace (default, app
// load-0).
const benchEnvoyFilters = `
apiVersion: networking.istio.io/v1alpha3
kind: EnvoyFilter
metadata: {name: lua-outbound, namespace: istio-system}
spec:
  configPatches:
  - applyTo: HTTP_FILTER
    match:
      context: SIDECAR_OUTBOUND
      listener: {filterChain: {filter: {name: envoy.filters.network.http_connection_manager, subFilter: {name: envoy.filters.http.router}}}}
    patch:
      operation: INSERT_BEFORE
      value:
        name: mesh.lua
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua
          defaultSourceCode: {inlineString: "function envoy_on_request(h) h:headers():add('x-mesh', '1') end"}
---
apiVersion: networking.istio.io/v1alpha3
kind: EnvoyFilter
metadata: {name: local-ratelimit, namespace: istio-system}
spec:
  configPatches:
  - applyTo: HTTP_FILTER
    match:
      context: SIDECAR_INBOUND
      listener: {filterChain: {filter: {name: envoy.filters.network.http_connection_manager, subFilter: {name: envoy.filters.http.router}}}}
    patch:
      operation: INSERT_BEFORE
      value:
        name: envoy.filters.http.local_ratelimit
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.http.local_ratelimit.v3.LocalRateLimit
          stat_prefix: http_local_rate_limiter
          token_bucket: {max_tokens: 100, tokens_per_fill: 100, fill_interval: 1s}
---
apiVersion: networking.istio.io/v1alpha3
kind: EnvoyFilter
metadata: {name: hcm-tweaks, namespace: istio-system}
spec:
  configPatches:
  - applyTo: NETWORK_FILTER
    match:
      context: SIDECAR_OUTBOUND
      listener: {filterChain: {filter: {name: envoy.filters.network.http_connection_manager}}}
    patch:
      operation: MERGE
      value:
        name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          server_header_transformation: PASS_THROUGH
---
apiVersion: networking.istio.io/v1alpha3
kind: EnvoyFilter
metadata: {name: one-cluster, namespace: istio-system}
spec:
  configPatches:
  - applyTo: CLUSTER
    match: {context: SIDECAR_OUTBOUND, cluster: {service: random-0.host.example}}
    patch: {operation: MERGE, value: {connect_timeout: 3s, per_connection_buffer_limit_bytes: 32768}}
---
apiVersion: networking.istio.io/v1alpha3
kind: EnvoyFilter
metadata: {name: tcp-idle, namespace: istio-system}
spec:
  configPatches:
  - applyTo: NETWORK_FILTER
    match:
      context: SIDECAR_OUTBOUND
      listener: {filterChain: {filter: {name: envoy.filters.network.tcp_proxy}}}
    patch:
      operation: MERGE
      value:
        name: envoy.filters.network.tcp_proxy
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy
          idle_timeout: 3600s
---
apiVersion: networking.istio.io/v1alpha3
kind: EnvoyFilter
metadata: {name: response-headers, namespace: default}
spec:
  configPatches:
  - applyTo: ROUTE_CONFIGURATION
    match: {context: SIDECAR_OUTBOUND, routeConfiguration: {portNumber: 80}}
    patch:
      operation: MERGE
      value:
        response_headers_to_add: [{header: {key: x-envoy-filter, value: "1"}}]
---
apiVersion: networking.istio.io/v1alpha3
kind: EnvoyFilter
metadata: {name: vhost-one, namespace: default}
spec:
  configPatches:
  - applyTo: VIRTUAL_HOST
    match: {context: SIDECAR_OUTBOUND, routeConfiguration: {vhost: {name: "random-1.host.example:80"}}}
    patch:
      operation: MERGE
      value:
        request_headers_to_add: [{header: {key: x-vhost, value: one}}]
---
apiVersion: networking.istio.io/v1alpha3
kind: EnvoyFilter
metadata: {name: ratelimit-cluster, namespace: default}
spec:
  configPatches:
  - applyTo: CLUSTER
    match: {context: SIDECAR_OUTBOUND}
    patch:
      operation: ADD
      value:
        name: rate-limit-service
        type: STRICT_DNS
        connect_timeout: 1s
        lb_policy: ROUND_ROBIN
        load_assignment:
          cluster_name: rate-limit-service
          endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: ratelimit.example.com, port_value: 8081}}}}]}]
---
apiVersion: networking.istio.io/v1alpha3
kind: EnvoyFilter
metadata: {name: app-lua, namespace: default}
spec:
  workloadSelector: {labels: {app: load-0}}
  priority: 10
  configPatches:
  - applyTo: HTTP_FILTER
    match:
      context: SIDECAR_OUTBOUND
      listener: {filterChain: {filter: {name: envoy.filters.network.http_connection_manager, subFilter: {name: envoy.filters.http.router}}}}
    patch:
      operation: INSERT_BEFORE
      value:
        name: app.lua
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua
          defaultSourceCode: {inlineString: "function envoy_on_response(h) h:headers():add('x-app', 'load') end"}
---
apiVersion: networking.istio.io/v1alpha3
kind: EnvoyFilter
metadata: {name: listener-buffer, namespace: default}
spec:
  workloadSelector: {labels: {app: load-0}}
  configPatches:
  - applyTo: LISTENER
    match: {context: SIDECAR_OUTBOUND, listener: {portNumber: 15001}}
    patch: {operation: MERGE, value: {per_connection_buffer_limit_bytes: 65536}}
`

// setupFiltered is setup with benchEnvoyFilters loaded on top.
func setupFiltered(tb testing.TB, wc workloadCase) (*index.Writer, []string, []string) {
	w, eds, rds := setup(tb, wc)
	if err := Load(w, []byte(benchEnvoyFilters)); err != nil {
		tb.Fatal(err)
	}
	return w, eds, rds
}

// BenchmarkProxyConfigEnvoyFilter: BenchmarkProxyConfigCold and Warm with
// benchEnvoyFilters applying to the proxy. Compare with
// ProxyConfig(Cold|Warm) (no EnvoyFilter).
func BenchmarkProxyConfigEnvoyFilter(b *testing.B) {
	for _, wc := range []workloadCase{{"http", 100}, {"http", 1000}} {
		b.Run(fmt.Sprintf("cold/%s/services=%d", wc.name, wc.services), func(b *testing.B) {
			w, eds, rds := setupFiltered(b, wc)
			benchCold(b, w, nil, eds, rds)
		})
		b.Run(fmt.Sprintf("warm/%s/services=%d", wc.name, wc.services), func(b *testing.B) {
			w, eds, rds := setupFiltered(b, wc)
			benchWarm(b, w, nil, eds, rds)
		})
	}
}

// cacheAtProxies connects n proxies of one class to one engine over w and
// fetches each one's full config; it returns the cache's hits, misses and
// entries over all kinds.
func cacheAtProxies(tb testing.TB, w *index.Writer, eds, rds []string, n int) (hits, misses uint64, entries int) {
	e := newBenchEngine(w, nil)
	for i := range n {
		fullConfig(tb, connectProxy(tb, e, fmt.Sprintf("10.0.%d.%d", i/250, i%250+1), fmt.Sprintf("pod-%d", i)), eds, rds)
	}
	for _, s := range e.Cache().Stats() {
		hits += s.Hits
		misses += s.Misses
		entries += s.Entries
	}
	return hits, misses, entries
}

// BenchmarkEnvoyFilterCacheAt1000: the cache at 1,000 proxies of the
// benchmark class (http, 100 services), without and with
// benchEnvoyFilters: the hit rate and the entries (patched resources are
// encoded once for the class, not per proxy).
func BenchmarkEnvoyFilterCacheAt1000(b *testing.B) {
	wc := workloadCase{"http", 100}
	for _, filtered := range []bool{false, true} {
		b.Run(fmt.Sprintf("filters=%v", filtered), func(b *testing.B) {
			w, eds, rds := setup(b, wc)
			if filtered {
				w, eds, rds = setupFiltered(b, wc)
			}
			var hits, misses uint64
			var entries int
			for b.Loop() {
				hits, misses, entries = cacheAtProxies(b, w, eds, rds, 1000)
			}
			b.ReportMetric(100*float64(hits)/float64(hits+misses), "hit%")
			b.ReportMetric(float64(misses), "misses")
			b.ReportMetric(float64(entries), "entries")
		})
	}
}

// TestEnvoyFilterBenchSmall runs the benchmarks' setup small: the filters
// load, change the proxy's config, and 20 proxies of the class add no
// cache entry after the first.
func TestEnvoyFilterBenchSmall(t *testing.T) {
	wc := workloadCase{"http", 10}
	w0, eds, rds := setup(t, wc)
	_, _, plain := cacheAtProxies(t, w0, eds, rds, 1)
	w, eds, rds := setupFiltered(t, wc)
	_, _, one := cacheAtProxies(t, w, eds, rds, 1)
	_, misses20, twenty := cacheAtProxies(t, w, eds, rds, 20)
	_, misses1, _ := cacheAtProxies(t, w, eds, rds, 1)
	if one <= plain {
		t.Errorf("%d cache entries with the filters, %d without: the patched resources are missing", one, plain)
	}
	if twenty != one || misses20 != misses1 {
		t.Errorf("20 proxies: %d entries, %d misses; one proxy: %d, %d: patched resources must be shared by the class", twenty, misses20, one, misses1)
	}
}

// Package engine turns index snapshots and change sets into pushes: it owns
// connected proxies and their classes, debouncing, the mapping from what
// changed to who is affected, the push queue with per-proxy merging,
// throttling, the per-class response memo and the endpoint fast path. What
// a class sees and the keys it is built from are package rules'.
//
// # Model
//
// A connecting proxy's Node (ParseNode) becomes a rules.Node and, through
// rules.ClassOf, an encode.ProxyClass. Proxies with equal class and equal
// service instances share a class; its rules.Scope (the services it can
// see) is computed once per index.Snapshot.ConfigVersion, and its last
// responses per type are memoized per snapshot version (memo.go), so the
// second and later proxies of a class copy resource references instead of
// building keys. A request is answered by rules.Build, through the table of
// builders rules owns; the engine adds only the logging of Secrets it
// leaves out.
//
// Debounced changes become pushes: anything but endpoints is a Full push to
// every class whose scope the change can touch (scope_push.go: a change of
// services, VirtualServices, DestinationRules or ServiceEntries none of a
// class's scopes sees pushes nothing to it, nor does a security policy
// whose namespace and selector rule the class out; serve then sends only
// types whose content changed for each stream); endpoint-only changes take
// the fast path (fastpath.go, which describes it end to end) — EDS for the
// changed services' clusters, only to classes that see them and to gRPC
// clients subscribed by name, plus CDS when the change alters clusters (DNS
// endpoints, service accounts, inferred mTLS). A Secret (gateway
// credential) change pushes SDS only, to the connections whose SDS requests
// read that Secret (build_sds_push.go).
//
// The mesh config's fields that shape clusters, endpoints and TLS contexts
// reach encode.Mesh through applyClusterMesh (mesh_cluster.go), which
// refuses, naming the field, a value istiod or Envoy would refuse and one
// pilotfish does not implement (docs/mesh-config.md). Its default metrics
// providers reach encode.Mesh.Stats through applyTelemetryMesh
// (mesh_telemetry.go): the istio.stats filters istiod's chart turns on.
// Its tracing (enableTracing, defaultConfig.tracing, defaultProviders.tracing
// and the tracing providers) reaches encode.Mesh.Tracing through
// applyTracingMesh (mesh_tracing.go, docs/telemetry.md); a class then holds
// its proxies' tracing identity (the Istio tags differ per workload).
// Its access log settings (accessLogFile, accessLogFormat,
// accessLogEncoding, defaultProviders.accessLogging) and the extension
// providers Telemetry resources name reach encode.Mesh through
// applyAccessLogMesh (mesh_accesslog.go; docs/telemetry.md).
// Its ext_authz extensionProviders reach encode.Mesh through applyExtAuthzMesh
// (mesh_extauthz.go), which keeps an invalid provider with its reason, as
// istiod, rather than refuse the mesh config (docs/security.md).
//
// WasmPlugins (rules/wasm.go) are chosen per class like security
// policies (namespace, selector, targetRefs), become filter references in
// the keys of the listeners they apply to, and are served over ECDS
// (TypeExtensionConfig) by name; a WasmPlugin change is scoped as a
// security policy change is (scope_push.go), so LDS is sent only where the
// references change and ECDS where the config does (docs/wasm.md). A
// plugin's image pull secret goes only to streams serve marked as
// authenticated (WithVerifiedIdentity), in their own copy of the ECDS
// answer; a change to such a Secret pushes ECDS to them alone
// (wasm_secret.go).
//
// # Invariants
//
//   - engine only reads the index (rules' invariants hold for what it
//     derives through rules).
//   - Pushes to one connection merge while queued; at most PushThrottle
//     connections hold a slot between being signalled and serve's PushDone.
//   - The run loop is the only goroutine that computes pushes.
//   - What a client names cannot grow what the engine keeps: the per-class
//     memo keeps only responses free of transient answers (a name no
//     configuration defines, answered uncached by rules) that name no more
//     names than they answer; a gRPC server's inbound listener on an
//     address not its own is answered uncached; and a stream naming more
//     than 4,096 Secrets is taken to read them all.
//
// # Imports
//
// engine may import index, encode and rules. It must not import serve
// (serve drives engine, not the other way round), ingest (sources feed the
// index, engine only reads it) or ca. Its type URLs, Resource and Node are
// rules' under engine's names, so that serve and cmd import engine alone.
//
// # Allocation budget
//
// A warm Generate (memo hit) allocates nothing beyond growing the caller's
// slice; a warm build of a type for a new class allocates what rules'
// builders allocate (rules' doc).
package engine

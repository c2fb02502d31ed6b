// Package rules decides what a proxy class sees and turns it into
// generator keys: Istio's rules of visibility and selection, read from an
// index snapshot. It owns the class of a proxy (ClassOf: its Sidecar, a
// router's Gateways, the labels security policies select on and
// failoverPriority lists name, build_eds_failover.go), the Scope of
// a class (scope.go: the services exported to its namespace, narrowed by
// its Sidecar's egress, sidecar.go, whose egress listeners with a port,
// bind or captureMode shape the outbound listeners and routes,
// sidecar_egress.go; its inbound side, instances.go and
// sidecar_ingress.go; the mesh's exportTo defaults for objects that set
// none, exportto.go), the EnvoyFilters that apply to a class
// (envoyfilter.go: istiod's selection and order, an interned
// *envoypatch.Set per class that cluster, listener and route
// configuration keys carry when a patch may touch them), the
// VirtualService, DestinationRule and security policy rules
// (virtualservice*.go: precedence, match sourceLabels, delegation; destrule.go and destrule_pool.go: istiod's DestinationRule
// pools, merging and workloadSelector; authn.go: PeerAuthentication
// modes, AuthorizationPolicy and RequestAuthentication, by namespace and
// labels, and where each JWT rule's keys come from, authn_jwks.go;
// docs/security.md; wasm.go: which WasmPlugins apply to a class and to
// which of its listeners, and ECDS, docs/wasm.md), and the key builders (build_*.go) that fill
// encode's keys from a Scope.
//
// # Builders
//
// One table (builders.go) maps each served type URL to its builder; Build
// dispatches through it. A router's listeners are its Gateways'
// (build_gateway.go), through the same listener builder. There is no other
// registration. engine (push scheduling) calls Build for a connection's
// request and for debug renders; it decides who is pushed what and when.
//
// # Invariants
//
//   - rules only reads the index; ingest is its only writer, and the only
//     one to intern (a DestinationRule's subset labels come interned,
//     index.Config.SubsetLabels).
//   - What rules derives from config once (merged gateways, route views,
//     AUTO_PASSTHROUGH) lives in values its scopes own (view.go): a
//     configView per config version, shared by every scope of it (Views
//     hands them out), and a memo per scope, shared by its copies for
//     endpoint-only snapshots; no package-level map holds config-derived
//     state (the two left, service accounts by endpoint shard version and
//     address strings, are bounded memos of pure functions). In verify mode
//     each memo is recomputed once per snapshot it is used in and compared.
//   - Builders are pure functions of a Scope and the requested names: the
//     engine's per-class memo relies on it. They fill encode's keys with
//     values and hand them, with the snapshot's read-only index.Names, to
//     encode's generators (encode.Resource and encode.Part accept no
//     other): rules defines no generator and no key type.
//   - What a client names cannot grow what rules keeps: a name no
//     configuration defines (an unknown host, subset or route, a port
//     spelled "080") is answered as istiod answers it, through the cache's
//     transient view, so nothing is cached for it; a gateway keeps route
//     keys for its own route names only.
//
// # Imports
//
// rules may import index and encode. It must not import engine (engine
// calls rules, not the reverse), serve, ingest, ca, debug, loadgen or
// bench. Its tests build indexes through ingest; they stand in for the
// engine where they need a class (engine_shim_test.go).
//
// # Telemetry
//
// telemetry.go selects the Telemetry resources of a class and
// telemetry_merge.go merges them as istiod does into the encode.Telemetry
// value its listener keys hold; without Telemetry rows it is the mesh's
// default and costs nothing (docs/telemetry.md).
//
// # Allocation budget
//
// A warm build of a type for a new class allocates a small constant (tests
// hold buildClusters, buildEndpoints and buildRoutes to it, and the gateway
// and Sidecar ingress builders to theirs).
package rules

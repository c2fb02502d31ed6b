// Package engine turns index snapshots and change sets into pushes: it owns
// proxies and their classes, debouncing, the mapping from what changed to who
// is affected, the push queue with per-proxy merging, throttling, the
// endpoint fast path, and the key builders (build_*.go) that turn what a
// proxy can see into generator keys, including which security policies
// select a workload (authn.go: PeerAuthentication modes, AuthorizationPolicy
// and RequestAuthentication, by namespace and labels; docs/security.md).
//
// # Model
//
// A connecting proxy's Node becomes a [Node] and an encode.ProxyClass.
// Proxies with equal class and equal service instances share a class; its
// [Scope] (the services it can see) is computed once per
// index.Snapshot.ConfigVersion, and its last response per type is memoized
// per snapshot version, so the second and later proxies of a class copy
// resource references instead of building keys.
//
// A class carries the Sidecar that scopes it and, for routers, the Gateways
// that select it (sidecar.go): a Sidecar's egress narrows the scope, so a
// proxy limited to its namespace builds and receives only that namespace.
// A Sidecar's ingress listeners replace the proxy's service ports on the
// inbound side (sidecar_ingress.go); when they take the pod's own address
// the class carries the proxy's IPs, else proxies under one Sidecar share
// it. A changed Sidecar pushes only to the classes that use it.
//
// Debounced changes become pushes: anything but endpoints is a Full push to
// every class whose scope the change can touch (scope_push.go: a change of
// services, VirtualServices, DestinationRules or ServiceEntries none of a
// class's scopes sees pushes nothing to it, nor does a security policy
// whose namespace and selector rule the class out, scope_policy.go; serve
// then sends only types whose content changed for each stream); endpoint-only changes take the fast path — EDS for the changed
// services' clusters, only to classes that see them and to gRPC clients
// subscribed by name, plus CDS when the change alters clusters (DNS
// endpoints, service accounts, inferred mTLS). A Secret (gateway credential)
// change pushes SDS only, to the connections whose SDS requests read that
// Secret (build_sds_push.go).
//
// # Invariants
//
//   - engine only reads the index; ingest is its only writer, and the
//     only one to intern (a DestinationRule's subset labels come interned,
//     index.Config.SubsetLabels).
//   - What the engine derives from config once (merged gateways, route
//     views, AUTO_PASSTHROUGH) lives in values its scopes own (view.go): a
//     configView per config version, shared by every scope of it, and a
//     memo per scope, shared by its copies for endpoint-only snapshots;
//     no package-level map holds config-derived state (the two left, service
//     accounts by endpoint shard version and address strings, are bounded
//     memos of pure functions). In verify mode each memo is recomputed once
//     per snapshot it is used in and compared.
//   - Builders are pure functions of a Scope and the requested names: the
//     per-class memo relies on it. They fill encode's keys with values and
//     hand them, with the snapshot's read-only index.Names, to encode's
//     generators (encode.Resource and encode.Part accept no other): the
//     engine defines no generator and no key type.
//   - Pushes to one connection merge while queued; at most PushThrottle
//     connections hold a slot between being signalled and serve's PushDone.
//   - The run loop is the only goroutine that computes pushes.
//   - What a client names cannot grow what the engine keeps: a name no
//     configuration defines (an unknown host, subset or route, a port
//     spelled "080", a gRPC server address not the proxy's own) is
//     answered as istiod answers it, through the cache's transient view,
//     so nothing is cached for it; the per-class memo keeps only responses
//     free of such answers that name no more names than they answer; a
//     gateway keeps route keys for its own route names only; and a stream
//     naming more than 4,096 Secrets is taken to read them all.
//
// # Imports
//
// engine may import index and encode. It must not import serve (serve drives
// engine, not the other way round), ingest (sources feed the index, engine
// only reads it) or ca.
//
// # Allocation budget
//
// A warm Generate (memo hit) allocates nothing beyond growing the caller's
// slice; a warm build of a type for a new class allocates a small constant
// (tests hold buildClusters, buildEndpoints and buildRoutes to it).
package engine

// Package jwks fetches the JSON Web Key Sets of RequestAuthentication rules
// for the control plane, as istiod's JWKS resolver does
// (PILOT_JWT_ENABLE_REMOTE_JWKS=istiod, its default): a rule's jwksUri, or,
// for a rule with an issuer only, the jwks_uri of the issuer's OpenID
// discovery document (ISSUER/.well-known/openid-configuration). The key
// sets it holds are inlined into the proxies' jwt_authn filters
// (local_jwks), so that Envoy never has to reach the key server itself.
//
// # Model
//
// A [Resolver] holds the sources the configuration names ([Resolver.Want]
// replaces them all; ingest computes them from the index) and, for each, the
// last key set fetched. Its run loop ([Resolver.Run]) fetches a new source
// at once, refreshes each every RefreshInterval, retries a failed fetch
// with a doubling backoff, and hands the full list of fetched key sets to
// its publish function whenever one changes (a new set, a changed one, a
// source no rule names any more). A refresh that returns the same keys in
// another order or layout is not a change. cmd wires publish to ingest,
// which writes the sets as index rows: from there they reach the keys of
// the generators like any other config, and a change pushes to the
// proxies whose policies name the source.
//
// A source that has never been fetched, or whose body is not a key set, has
// no key set here: the generators then inline a key set that accepts no
// token (istiod's). A refresh that fails keeps the last good set, as istiod
// does.
//
// # Bounds
//
// Everything a key server or the configuration controls is bounded: each
// request by its rule's timeout (capped by MaxTimeout) including the body,
// each body by MaxBytes, the requests in flight by MaxConcurrent, the
// sources held by MaxSources (sources past it, in sorted order, are not
// fetched and are logged). Redirects follow http.Client's limit of 10.
// Addresses in BlockedCIDRs are refused at dial time, after DNS, as istiod
// does with BLOCKED_CIDRS_IN_JWKS_URIS.
//
// # Invariants
//
//   - Want never blocks on the network nor on publish: it may be called
//     from the index writer's subscriber.
//   - publish is called from Run's goroutine only, in order, without the
//     resolver's lock held.
//   - Every goroutine the resolver starts ends before Run returns.
//
// # Imports
//
// jwks imports no pilotfish package: it is an outside input, like a
// Kubernetes watch, and knows nothing of the index, rules or encode.
package jwks

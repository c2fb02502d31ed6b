// Package ca owns pilotfish's Istio-compatible certificate authority: CSR
// signing, caller authentication, SPIFFE identities, root bundles and
// rotation. It is istiod's Citadel half, compatible with the istio-agent
// that every sidecar and proxyless gRPC pod already runs.
//
// # Shape
//
//   - Bundle: parsed, verified signing material (signing certificate and
//     key, the chain to a root, every trusted root). Immutable.
//   - Authority: signs with one Bundle behind an atomic pointer. SetBundle
//     swaps it (cacerts reload, root rotation) while signatures run; every
//     signature reads the pointer once, so it sees one consistent bundle.
//     Changed() wakes whoever follows the bundle (the serving certificate,
//     the root file writer).
//   - Authenticators: the client certificate check (a certificate this CA
//     issued, presented over mTLS: renewals) is built in and runs first;
//     then KubeAuthenticator (TokenReview, audience istio-ca) and
//     JWTAuthenticator (JWT_RULE issuers) in the order configured. The first
//     success wins, as in istiod.
//   - Sources of material: LoadDir/WatchDir for a cacerts directory (hot
//     reload, last good bundle kept on bad files); LoadOrCreateRoot,
//     RotateRoot and RunRootRotation for a self-signed root kept in a Store
//     (FileStore: a state file; KubeStore: Secret istio-ca-secret, whose
//     create-if-absent race the API server decides).
//   - Serving: the TLS certificate of port 15012, issued by the Authority
//     with istiod's SAN (istiod.istio-system.svc), renewed at half-life and
//     at every bundle change.
//
// # Rules
//
// A certificate names exactly the caller's identity,
// spiffe://TRUST_DOMAIN/ns/NAMESPACE/sa/SERVICE_ACCOUNT; a CSR asking for
// any other URI, or any DNS, IP or email name, is refused. TTL: the request's
// validity, default 24h, refused above the maximum (90 days), never beyond
// the first expiry on the signing path. Keys: ECDSA P-256/P-384, RSA
// 2048–8192. The response is istiod's: leaf first, then the signing
// certificate and intermediates, and last every trusted root as one PEM
// string (the root bundle: several roots are trusted at once during a
// rotation). Every error wraps a sentinel of errors.go; nothing is signed
// when one is returned. ca knows nothing of gRPC: serve turns the transport
// into Credentials and the sentinels into status codes.
//
// # Cost
//
// The hot path is Sign: one CSR signature check and one certificate
// signature (which crypto/x509 verifies once more). With an ECDSA P-256 CA
// that is ~5k certificates per CPU-second; with RSA 2048, ~1k (see
// BenchmarkSign and docs/ca.md). It allocates freely (~370 allocations,
// 26 KB): at 10,000 workloads renewing every 12 hours it runs 0.23 times a
// second, so it has no allocation budget.
//
// # Imports
//
// ca imports no other pilotfish package: it must stay usable on its own and
// must not learn about proxies, xDS or the index.
package ca

// Package ca owns pilotfish's Istio-compatible certificate authority: CSR
// signing, caller authentication, SPIFFE identities, root bundles and
// rotation.
//
// # Imports
//
// ca imports no other pilotfish package: it must stay usable on its own and
// must not learn about proxies, xDS or the index.
package ca

// Package envoypatch compiles EnvoyFilter configPatches into typed patches
// and applies them to generated Envoy messages with istiod's semantics
// (docs/envoyfilter-design.md). It is a leaf: it imports only istio.io/api,
// go-control-plane and protobuf, so that ingest (compile and validate),
// rules (select a class's Set) and encode (apply before marshal) share it.
package envoypatch

// Package envoypatch compiles EnvoyFilter configPatches into typed patches
// and applies them to generated Envoy messages with istiod's semantics
// (docs/envoyfilter-design.md). It is a leaf: it imports only istio.io/api,
// go-control-plane and protobuf, so that ingest (compile and validate),
// rules (select a class's Set) and encode (apply before marshal) share it.
//
// api.go is the contract; compile.go and proxy.go compile a spec once per
// object version (Compile, MatchesProxy); set.go groups a class's patches
// (NewSet, Family) and answers the key builders' prefilters (MayPatch*);
// cluster.go, listener.go, route.go and extension.go apply them; merge.go
// is istiod's MERGE (durations replace; lists append, or are replaced by
// MERGE_AND_REPLACE_LIST; typed configs merge by type); types.go links
// every extension type a value's Any may name. Application never logs:
// what istiod would skip with an error is returned as a Failure.
package envoypatch

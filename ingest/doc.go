// Package ingest owns pilotfish's sources of configuration and their
// decoding and validation: the file source (a watched directory of YAML and
// JSON manifests, the embedded default) and the Kubernetes source
// (client-go informers on an API server: Services, EndpointSlices, Pods,
// Namespaces, Nodes for locality, and the Istio kinds once their CRDs are
// served). Both may feed one index.Writer, each through its own Converter;
// a Precedence shared by the two makes the API server's definition of an
// object win over the directory's (precedence.go).
// Informer caches hold transformed objects cut down to what the converter
// reads (kube_transform.go); which annotations that is, for both sources,
// is decided in one place (readAnnotations, convert_meta.go), and a config
// row's hash is computed over exactly what the converters read, so that a
// change to any of it reaches the engine.
//
// What a source reads of what it sees: with a revision, only the Istio
// objects without an istio.io/rev label or labelled with it (istiod's
// rule, revision.go, in both sources); with discovery selectors, only the
// namespaces they select (the Kubernetes source only, kube_filter.go,
// changeable at any time with SetDiscoverySelectors). What is not read
// produces no rows and is summarised in Errors as warnings. The informers
// still watch every namespace, but cache an object of a namespace that is
// not selected as a stub of its identity and version, fetched whole when
// its namespace joins the selection (kube_stub.go).
//
// Every source decodes documents into [Object]s using the real types of
// k8s.io/api and istio.io/api, validates them with the same rules that
// `pilotfish validate` applies, converts them into index rows and applies
// them to the index as one batch per change.
//
// EnvoyFilters (v1alpha3) are read, validated as istiod validates them
// (validate_envoyfilter.go, each patch compiled by envoypatch: its value
// converted to the Envoy type its applyTo names, with every extension type
// of go-control-plane linked by envoypatch/types.go) and indexed as
// ConfigEnvoyFilter rows carrying their compiled patches
// (index.Config.Derived, an *envoypatch.Filter; convert_envoyfilter.go);
// rules selects them per proxy class and encode applies them.
// EXTENSION_CONFIG patches are served over ECDS (ledger_envoyfilter.go;
// docs/envoyfilter-design.md).
//
// Telemetries (telemetry.istio.io v1 and v1alpha1) are read, validated as
// istiod validates them (validate_telemetry.go) and indexed as
// ConfigTelemetry rows with their selector; rules merge them
// (docs/telemetry.md). Their tracing is a ledger warning
// (ledger_telemetry.go).
//
// JWKSInput (jwks_input.go) connects the fetcher of RequestAuthentication
// key sets (package jwks, an outside input wired by cmd) to the index: it
// tells the fetcher the sources the index's rules name and writes the key
// sets fetched as ConfigJWKS rows.
//
// The admission webhook (webhook.go) answers the API server's
// AdmissionReviews for the Istio kinds with those same checks, Decode then
// Validate, so that what `pilotfish validate` rejects never gets stored; it
// writes nothing to the index.
//
// The field ledger (ledger.go) classifies every field of every istio.io/api
// message pilotfish reads: honoured (naming the test that proves it),
// partial, or unsupported. Unsupported turns the unsupported fields an
// object sets, and the values of supported fields the ledger warns about
// (a policy whose targets attach it to waypoints only), into warnings;
// DecodeWithWarnings, the Kubernetes source and
// the webhook report them, so nothing pilotfish ignores is accepted
// silently. docs/compatibility.md is generated from the ledger.
//
// The file source and `pilotfish validate` read a directory with one walker
// (walk.go), resolve objects defined more than once with one rule
// (conflicts.go: the first in path order) and decode with one Decode, so
// validate reports for a directory exactly what the file source reports.
//
// # Invariants
//
//   - Bad input never stops the source: an invalid object is reported with
//     `file:line: Kind namespace/name: field.path: message`, every other
//     object still applies, and the last good version of a rejected object is
//     kept.
//   - Nothing in a config directory can block the file source or grow its
//     memory past a bound: only regular files (links resolved) of at most
//     MaxFileSize are read, opened non-blocking; objects are bounded by
//     Kubernetes' limits (limits.go). Reads happen outside the lock Errors
//     takes.
//   - Which file's definition of an object is served is a function of the
//     directory's contents only, never of the order files were read in;
//     whether the API server's is served instead is a function of what it
//     defines, never of which source applied first. At most one source's
//     Converter holds an object's rows, and an object changes hands within
//     one batch.
//   - With both sources, a KubeSource batch waits for the FileSource only
//     when it has an object the directory defines (or a Node changed);
//     endpoint events of objects only the API server defines take one
//     uncontended lock per batch and a map lookup per object.
//   - A kind pilotfish does not read is never dropped silently when its API
//     group is one pilotfish knows (kinds_unknown.go): an error, or a
//     warning (ErrIgnored) for real mesh config it does not implement.
//   - A field of an Istio kind pilotfish does not support is never dropped
//     silently: each one set is a warning (ErrIgnored) at its path and line,
//     kept with the object's problems until the object changes. Every field
//     of istio.io/api is in the ledger (a test walks the descriptors), and
//     an object without unsupported fields costs the walk of the few
//     messages that can hold one (BenchmarkUnsupported: ~1.5µs and 3
//     allocations for a typical VirtualService).
//   - A change to one file re-applies only that file's objects (and those
//     of a file whose definition takes over from it).
//   - ingest is the only writer of the index (it serializes Apply calls).
//
// # Imports
//
// ingest may import index only. It must not import engine, encode or serve:
// sources know nothing about proxies or xDS.
package ingest

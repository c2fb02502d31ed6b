// Package ingest owns pilotfish's sources of configuration and their
// decoding and validation: the file source (a watched directory of YAML and
// JSON manifests, the embedded default) and the Kubernetes source
// (client-go informers on an API server: Services, EndpointSlices, Pods,
// Namespaces, Nodes for locality, and the Istio kinds once their CRDs are
// served). Both may feed one index.Writer, each through its own Converter.
// Informer caches hold transformed objects cut down to what the converter
// reads (kube_transform.go); which annotations that is, for both sources,
// is decided in one place (readAnnotations, convert_meta.go), and a config
// row's hash is computed over exactly what the converters read, so that a
// change to any of it reaches the engine.
//
// Every source decodes documents into [Object]s using the real types of
// k8s.io/api and istio.io/api, validates them with the same rules that
// `pilotfish validate` applies, converts them into index rows and applies
// them to the index as one batch per change.
//
// The admission webhook (webhook.go) answers the API server's
// AdmissionReviews for the Istio kinds with those same checks, Decode then
// Validate, so that what `pilotfish validate` rejects never gets stored; it
// writes nothing to the index.
//
// # Invariants
//
//   - Bad input never stops the source: an invalid object is reported with
//     `file:line: Kind namespace/name: field.path: message`, every other
//     object still applies, and the last good version of a rejected object is
//     kept.
//   - A change to one file re-applies only that file's objects.
//   - ingest is the only writer of the index (it serializes Apply calls).
//
// # Imports
//
// ingest may import index only. It must not import engine, encode or serve:
// sources know nothing about proxies or xDS.
package ingest

// Package meshconfig reads istiod's mesh config: the `mesh` key of
// ConfigMap `istio` (a istio.io/api mesh/v1alpha1 MeshConfig in YAML) and
// its `meshNetworks` key, exactly as istiod reads them.
//
// # What it does
//
// Parse applies the user's YAML over istiod's defaults (Defaults, which
// equals istiod's pkg/config/mesh DefaultMeshConfig) with istiod's merge
// rules: every field given replaces the default, except defaultConfig
// (merged field by field into the default proxy config, proxyMetadata key
// by key), defaultProviders, extensionProviders (a provider of a default
// name replaces it, others are appended) and trustDomainAliases (joined
// with the default ones, sorted, deduplicated). It then validates the
// result as istiod's ValidateMeshConfig does (validate.go) and the
// discoverySelectors as label selectors (selectors.go).
//
// Unknown fields: istiod decodes strictly first, then again ignoring
// unknown fields, so a mesh config with a field it does not know is
// accepted. Parse accepts it too (refusing a config istiod takes would
// keep pilotfish from being a drop-in) but never silently: each unknown
// field is returned as a Problem with its path and line, which the caller
// reports as a warning.
//
// Errors name the field and its line in the YAML (a *Problem, wrapping
// ErrInvalid): a value of the wrong type is located by decoding the
// top-level fields one at a time, a validation failure by the field the
// check reads.
//
// # Invariants
//
// Pure functions of their input: no I/O, no globals; a returned MeshConfig
// is the caller's.
//
// # Imports
//
// meshconfig imports no other pilotfish package: cmd wires it to the
// sources, the engine and the injector; inject reuses its defaults and
// merge rules.
package meshconfig

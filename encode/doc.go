// Package encode owns the xDS generators (CDS, EDS, LDS, RDS, SDS and
// Istio's extras), their key structs, and the cache of pre-marshaled bytes.
//
// A generator is a pure function of its key: the key holds every input
// (scalars and immutable index rows with their content hashes) and nothing
// else, so a cached resource cannot depend on an undeclared input.
//
// # Imports
//
// encode may import the row types of index only, never a snapshot or a
// table: a generator that could reach a snapshot could read an input its key
// does not declare. It must not import engine, serve or ingest.
package encode

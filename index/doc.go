// Package index owns pilotfish's view of the mesh: a symbol table that interns
// every repeated string to a small integer, and columnar tables of services,
// endpoints, workloads, namespaces and Istio config, published as immutable
// snapshots.
//
// # Model
//
// A [Snapshot] is a set of tables. Each table is a persistent (copy-on-write,
// structurally shared) map from a primary key made of interned symbols to an
// immutable row. Rows are small fixed-layout structs whose variable parts
// (ports, addresses, label sets) point at immutable slices; every row carries
// a content hash computed once, when ingest builds it, so that downstream
// caches can key on (row ID, hash) without looking at the row again.
// Endpoints are sharded per service: a shard is the unit the endpoint fast
// path replaces.
//
// Secondary indexes are declared as values next to their row type (see
// [ServicesByHost]) and are maintained by the writer, never by readers.
//
// # Invariants
//
//   - One writer. [Writer.Apply] takes a [Batch], builds the next snapshot
//     from the current one, copying only the shards of the tables it touches,
//     publishes it through an atomic pointer and returns a [ChangeSet] naming
//     what changed. Apply calls are serialized by the caller (ingest's run loop).
//   - Readers call [Writer.Snapshot] (an atomic load) and never lock.
//   - A published snapshot, and every row and slice it references, is never
//     mutated. Build with -tags invariants to make the writer verify this.
//   - Symbols are never freed; [Symbols] is append-only and safe for
//     concurrent readers while the writer interns. Generators see the
//     tables only through [Names], a read-only view whose answers are fixed
//     functions of the Syms and label-set IDs asked about (no Lookup, no
//     Intern): only ingest interns.
//
// # Imports
//
// index imports no other pilotfish package: it is the bottom of the graph.
// It must not import encode, engine or serve (they depend on it), nor any
// Kubernetes or Istio client libraries (ingest converts those to rows).
//
// # Allocation budget
//
// Reading a row, looking up a service by host and iterating an endpoint shard
// allocate nothing; tests enforce 0 allocations with testing.AllocsPerRun.
package index

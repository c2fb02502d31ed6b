// Package encode owns the xDS generators (CDS, EDS, LDS, RDS, gateway
// listeners and routes, the NDS name table, proxyless
// gRPC, inbound security: RBAC from AuthorizationPolicy, jwt_authn from
// RequestAuthentication, PeerAuthentication's mTLS chains; a Sidecar's
// ingress listeners and inbound connection pools, inbound_sidecar*.go), their key
// structs, and the cache of pre-marshaled bytes.
//
// # Model
//
// A generator is a pure function of its key: `func X(k *XKey) (name string,
// msg proto.Message)`. The key holds every input — scalars and pointers to
// immutable index rows, whose content hash stands for the row in the key's
// Hash — and nothing else, so a cached resource cannot depend on an
// undeclared input. TestKeysHashEveryField checks by reflection that every
// key field changes its hash.
//
// [Cache] stores each resource marshaled once (vtprotobuf with the
// vtprotobuf build tag, proto.Marshal otherwise) as an encoded
// google.protobuf.Any under its key hash; every proxy whose key matches
// shares the bytes. Containers are assembled from cached parts where changes
// happen at a finer grain: a RouteConfiguration from cached VirtualHost
// bytes. With PILOTFISH_VERIFY_CACHE=1 every hit regenerates and panics on a
// difference; make test runs with it on. [Cache.Transient] is a view that
// generates and stores nothing, for names no configuration defines: what a
// client invents never becomes a cache entry (issue 21).
//
// Where one message type repeats by the thousand, a generator may write its
// encoding directly ([ResourceAppend], [PartAppend]) next to a reference
// generator that builds the message: ClusterLoadAssignments, the name
// table, a router's listeners (HTTP connection manager chains from parts
// marshaled once) and virtual hosts (routes translated once per build for
// every port they do not depend on). Verify mode checks each direct
// encoding against its reference; tests compare their bytes with
// proto.Marshal's.
//
// # Imports
//
// encode may import the row types of index only, never a snapshot or a
// table: a generator that could reach a snapshot could read an input its key
// does not declare. It must not import engine, serve or ingest.
//
// # Allocation budget
//
// Key.Hash allocates nothing; a cache hit allocates nothing; assembling a
// route configuration from cached virtual hosts allocates its output only.
package encode

// Package encode owns the xDS generators (CDS, EDS, LDS, RDS, gateway
// listeners and routes, the NDS name table, proxyless
// gRPC, inbound security: RBAC from AuthorizationPolicy, jwt_authn from
// RequestAuthentication, PeerAuthentication's mTLS chains; a Sidecar's
// ingress listeners and inbound connection pools, inbound_sidecar*.go;
// WasmPlugins' ECDS filter references, wasm.go, and their extension
// configs, ecds.go), their key structs, and the cache of pre-marshaled
// bytes.
//
// # Model
//
// A generator is a pure function of its key: `func X(n index.Names, k
// *XKey) (name string, msg proto.Message)`. The key holds every input, and
// values only: scalars, strings, value structs and slices of them, and
// pointers to immutable index rows, whose content hash stands for the row
// in the key's Hash (and to cache entries, by version). It never holds a
// table, a map, a function or an interface, so a cached resource cannot
// depend on an undeclared input. n is the read-only view of the index
// writer's symbol and label-set tables that resolves the Syms and label
// sets of the key and its rows: a Sym resolves to the same string forever,
// and the view cannot intern nor look a string up, so no answer depends on
// what has been interned. The cache keeps entries of different writers
// apart by n's identity.
//
// Only this package defines keys and generators. [Key] has an unexported
// marker method; [ResourceGen] and [PartGen] have unexported fields, and
// [Resource] and [Part] accept nothing else, so a caller cannot hand the
// cache a function of its own. The key tests (keys_test.go) find every key
// type in the package's source by its marker, check that each holds values
// only (TestKeysHoldValuesOnly) and that every field changes its hash
// (TestKeysHashEveryField).
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
// Where one message type repeats by the thousand, a generator also writes
// its encoding directly, next to the reference generator that builds the
// message: ClusterLoadAssignments, the name table, clusters without a
// DestinationRule, a router's listeners (HTTP connection manager chains
// from parts marshaled once) and virtual hosts. A gateway virtual host is
// composed around a cached part of its own, its routes (GatewayRoutesKey:
// every input of the routes, the port only when a route depends on it), so
// the virtual hosts of one VirtualService on several ports translate its
// routes once; the virtual host's key holds every input, hosts and
// RequireTLS included. Verify mode checks each direct encoding against its
// reference; tests compare their bytes with proto.Marshal's.
//
// # Telemetry
//
// A listener key's Telemetry (telemetry.go) is the class's istio.stats
// settings and access loggers (accesslog.go, accesslog_otel.go) as values;
// nil is none. Only listeners hold it (docs/telemetry.md).
//
// # Imports
//
// encode may import the row types of index and its read-only index.Names,
// never a snapshot or a table: a generator that could reach a snapshot
// could read an input its key does not declare. It must not import engine,
// serve or ingest.
//
// # Allocation budget
//
// Key.Hash allocates nothing; a cache hit allocates nothing; assembling a
// route configuration from cached virtual hosts allocates its output only.
package encode

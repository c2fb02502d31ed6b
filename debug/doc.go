// Package debug owns pilotfish's debug views: the JSON endpoints on the
// HTTP port (/debug/syncz, connections, config_dump, keyz, endpointz,
// registryz, configz, config_errors, cachez, push_status; Register) and
// istiod's debug types on the ADS stream (istio.io/debug/syncz and
// istio.io/debug/config_dump; XDS), with istiod's paths and JSON shapes so
// that istioctl and tools written for istiod read them. PushStatus follows
// pushes for /debug/push_status through the metrics hooks cmd wires.
//
// # Model
//
// Every view is computed when asked, from what engine and serve export:
// the current snapshot (engine.Engine.Snapshot, Registry, Configs), the
// bytes cache's counters, serve's registry of live streams
// (serve.XDSServer.Connections, a copy per request), and a stream's engine
// connection, found by its session ID (engine.Engine.Conn, ConnsByID),
// whose Resources regenerates what the proxy subscribes to without side
// effects on it. A config dump redacts private keys, as istiod's does.
// /debug/keyz renders a resource's cache keys field by field, interned
// symbols and label sets resolved through the snapshot.
//
// # Invariants
//
//   - Nothing here runs on a push path, and nothing here changes engine or
//     serve state: views read copies or regenerate through a recording
//     cache.
//   - No type assertion on serve.Session: the engine connection behind a
//     stream is looked up by ID, and a stream that closed in between is
//     shown from serve's copy (or answered "not connected").
//   - Memory is bounded: PushStatus keeps the last 16 pushes; a keyz render
//     stops at depth 8 and 64 elements per list or map.
//
// # Imports
//
// debug may import engine, serve, encode and index (it renders keys). No
// pilotfish package imports it but cmd: engine, serve, encode, index,
// ingest, ca and loadgen must not (internal/archtest).
//
// # Allocation budget
//
// None on a hot path: a request allocates in proportion to the streams or
// resources it shows; PushStatus's hooks take a mutex and update counters
// (Queued allocates two small maps per push, not per proxy).
package debug

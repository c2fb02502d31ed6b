// Package serve owns pilotfish's network surface: the Aggregated Discovery
// Service (SotW and Delta) over gRPC with a raw-bytes codec, per-stream
// state, ACK/NACK and nonce handling, and the HTTP server for readiness,
// metrics, pprof and debug endpoints.
//
// # Model
//
// Each stream has a receiver goroutine that reads requests and handles them
// where it read them (an ACK costs no hand-off) and a pusher goroutine that
// sends the engine's pushes; they take turns on the stream's protocol state
// under one per-stream mutex. The handler goroutine only waits for the
// stream's end, so it can always end it.
// Responses are assembled with protowire from the engine's pre-marshaled
// Any bytes into pooled buffers and written by a codec that sends them as
// they are. NACKed content is never resent; only a later change is pushed.
//
// # Resilience (limits.go)
//
// A stream holds at most one work slot while it generates and writes (the
// engine's push-throttle slot, or an admission slot of a FIFO semaphore for
// responses to requests), and gives it back when a write stays blocked for
// a second (one reusable watchdog timer per stream, send_watch.go): a
// proxy that stops reading never delays others, and costs one
// response in flight plus one merged pending push. A send timeout ends such
// a stream; a generator panic ends only its stream; names per type and
// streams per client IP are limited with ResourceExhausted errors.
//
// # Memory bounded by configuration, not by clients (input_limits.go, weak_table.go)
//
// What a client sends is bounded before anything of it is kept: node ids
// (Limits.MaxNodeIDBytes, 4 KiB) and the rest of the node (metadata,
// Limits.MaxNodeMetadataBytes, 1 MiB) with InvalidArgument before the
// backend sees them, type URLs (512 bytes) with InvalidArgument, types per
// stream (32) and a Delta subscription's names (16 MiB per type) with
// ResourceExhausted. A type the engine does not serve
// is answered as istiod answers it (unknown_types.go): an empty set (ECDS,
// ambient types; kept as any type), nothing (PCDS, health reports; nothing
// kept), or the end of the stream (anything else, unless the caller is
// authenticated in the root namespace). Client strings quoted in logs, statuses and
// the debug registry are clipped (clip); a NACK is logged, counted and
// reported once per nonce.
//
// Every table shared across streams (response bodies, name lists, sorted
// and added EDS lists, Delta held sets and transitions) maps keys to weak
// references: the streams hold what they last used per type, so a value
// stays shared while the streams of a class take it, and is collected, its
// entry deleted, once none holds it. The tables hold no bytes of their own
// and at most 16,384 entries each; superseded versions and anything a
// departed client made go at the next GC. Names a stream keeps are copied
// out of the request they came in.
//
// # Identity (identity.go, identity_tls.go)
//
// The TLS port's ADS service (RegisterAuthenticated) authenticates each
// stream before its first request (client certificate verified against the
// mesh roots, else a bearer token, through the CA's authenticators) and
// refuses a node that claims another namespace or service account than its
// caller's, as istiod does; the plaintext port's (Register) authenticates
// no one. Refusals, and TLS handshakes refused on the client certificate
// (CountHandshakeFailures), are counted by a fixed reason.
//
// # Debug registry (connections.go, debug_types.go)
//
// Every stream is registered while it lives. Its session is wrapped so that
// what serve reports to the engine (Generate's subscription, Sent, Acked,
// Nacked) is also recorded, with the nonce, in the stream's entry under a
// mutex only debug readers contend for; the protocol code has no debug
// hooks. XDSServer.Connections and Connection copy entries for /debug/syncz,
// /debug/connections and /debug/config_dump. istiod's debug type URLs
// (istio.io/debug/...) on a SotW stream are answered once from
// XDSOptions.Debug, outside the xDS state machine, and mark the stream as a
// tool's.
//
// # Imports
//
// serve may import engine and ca. It must not import ingest or index
// directly (it sees the mesh only through engine), nor encode.
//
// # Allocation budget
//
// Encoding a response from cached resources allocates once (the buffer
// slice handed to gRPC), whatever the number of resources; a test holds it
// to that.
package serve

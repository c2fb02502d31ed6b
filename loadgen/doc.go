// Package loadgen is a black-box xDS client that simulates thousands of
// Envoys (or proxyless gRPC clients) against any ADS server and measures
// time to first config, push and convergence latency, bytes and resources.
//
// # Imports
//
// loadgen imports no other pilotfish package, only protocol types: it must
// measure pilotfish exactly as it would measure istiod or go-control-plane.
//
// # What a simulated proxy does
//
// Each proxy opens one ADS stream (SotW or Delta; its own gRPC connection
// unless Config.StreamsPerConn multiplexes several) and sends its Node,
// with istio-agent's node ID and metadata, on the first request only. An
// Envoy (sidecar or router) subscribes to CDS as a wildcard; once CDS is
// ACKed it subscribes to the EDS services of its EDS clusters; once those
// are held it subscribes to LDS (wildcard), then to the route
// configurations its listeners name, in filter chains, the default filter
// chain and api_listener. A proxyless gRPC client subscribes to its target
// Listeners by name, then the route configurations, clusters (routes'
// clusters, weighted clusters, inline routes) and EDS services they name.
// Every response is ACKed with its version and nonce, or NACKed (NackRate,
// error_detail set; the next response of the type is always ACKed; a
// NACKed response counts as delivered, see nack.go). As CDS
// and LDS change, subscriptions follow: a SotW proxy re-requests EDS/RDS
// with the new name set, a Delta proxy subscribes and unsubscribes. A lost
// stream is reopened with jittered backoff and subscribes afresh.
//
// A proxy has full config when every type it subscribes to is answered
// (ACKed or NACKed) and every name it asked for (EDS, RDS; for gRPC all four
// types) is held or came in a NACKed response. A
// change (Config.ChangeCmd or ChangeFunc, run once every proxy has full
// config) has converged on a proxy when the proxy holds (or, negated, no
// longer holds) Config.ExpectResource, ACKed, with full config; without an
// ExpectResource, on any ACKed version bump with full config.
//
// # Cost
//
// The simulation must cost much less than what it measures, so that one
// process on two cores drives 10,000 proxies. Responses are decoded lazily
// (wire.go): the gRPC codec walks the protobuf wire format while gRPC still
// holds the buffers, skipping every field it does not follow by its length,
// and interns names into a run-wide symbol table (symtab.go). A proxy keeps
// only sorted slices of 4-byte IDs: what it subscribed to and the
// (resource, referenced name) pairs it holds, about 8 bytes per resource,
// and never a response's bytes. Decoding a 1,000-cluster CDS response costs
// about 0.3ms and no allocation (version and nonce are copied into the
// pooled response), against about 13ms and 89,000 allocations for a full
// unmarshal with ValidateAll (Decode "full", which checks a server's output
// rather than simulating scale). Handling a response costs in proportion to
// what it carries, not to what the proxy holds: an update is filtered and
// merged in place, whether each type is complete is cached, and a SotW push
// repeating what is held changes no subscription. Requests are written to
// the wire into pooled buffers that gRPC returns once written
// (request_wire.go): a delta EDS push, ACK included, costs about 0.6µs and
// one allocation outside gRPC (TestHandleAllocs). Per proxy, gRPC's connection and its goroutines dominate memory:
// about 80-120 KiB of RSS per proxy with one connection each.
//
// # Concurrency
//
// One goroutine per proxy receives, decodes, updates the proxy's state and
// sends, like Envoy's main thread; the runner's goroutine launches proxies,
// makes changes and builds the report; a sampler goroutine records the
// timeline and prints progress; with Config.ServerMetrics or ServerPID,
// another samples the server under test (server.go), so that a slow scrape
// never delays the timeline. Counters shared by proxies are atomics
// (per type, a lock-free log-linear histogram for response latency); per
// proxy results (time to full config, convergence) are written once into
// per-proxy slots. A proxy's state is read by others only after its
// goroutine has ended. At the end every stream is half-closed first, so the
// server receives every ACK before the stream ends.
//
// # Output
//
// Run returns a Report. WriteTable formats it for a terminal, WriteHTML as
// a self-contained page with inline SVG charts (the server's CPU, RSS and
// pushes next to loadgen's when it was sampled), and WriteJSON as the stable,
// machine-readable form used by `pilotfish loadgen --json` and by bench:
// snake_case field names as tagged on Report and its parts, durations in
// float milliseconds in fields ending in _ms, times from the start of the
// run. Latency summaries carry count, min, mean, p50, p90, p99, max and a
// 101-point CDF (cdf_ms[q] is the q-th percentile). Every figure each
// output shows comes from the Report (NACKs from Report.NACKs only), so the
// outputs agree.
//
// # Outside input
//
// Besides xDS responses, loadgen reads the server's Prometheus text
// (promtext.go: at most 16 MiB a page, every line checked, fuzzed by
// FuzzParseProm) and /proc/PID/stat and status (serverproc.go, 64 KiB at
// most). A sample that fails is counted in Report.Server, never fatal.
package loadgen

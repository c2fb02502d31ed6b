// Package h2c is a minimal gRPC client transport for loadgen's simulated
// proxies: one bidirectional stream per cleartext HTTP/2 connection
// (prior knowledge, as Envoy and istio-agent speak to a plaintext xDS
// port), driven entirely by the caller's goroutine.
//
// Why: with the simulated proxies on the server's own cores, grpc-go's
// client transport costs nearly as much CPU per push as the server under
// test (endpoint churn at 2,000 proxies: 59-68 µs per proxy per change in
// the loadgen process against the server's 72-87 µs), with a reader
// goroutine, a writer goroutine and the caller per connection and a
// buffer copy per message. Here RecvMsg reads frames straight from the
// socket into one reused message buffer and SendMsg writes each message
// with one write, with no goroutine hand-off: one futex call per round
// trip instead of three (strace of BenchmarkRoundTrip).
//
// # Scope
//
// What an ADS client needs and nothing more: the connection preface and
// SETTINGS, flow control both ways (large receive windows, like Envoy's),
// PING answers, HEADERS with CONTINUATION, trailers mapped to gRPC status
// errors, RST_STREAM and GOAWAY. No TLS, no compression, no multiplexing:
// loadgen keeps grpc-go for --streams-per-conn above one.
//
// # Concurrency
//
// RecvMsg and SendMsg are called from one goroutine (a proxy's), which
// also reads whatever frames a blocked SendMsg needs (window updates).
// CloseSend may come from another goroutine: writes are serialized by a
// mutex. Cancelling the stream's context closes the connection.
//
// # Imports
//
// Protocol libraries only (x/net's hpack, grpc's status and mem types):
// like loadgen, it must not import pilotfish's packages.
package h2c

// Package h2c is a minimal gRPC client transport for loadgen's simulated
// proxies: one bidirectional stream per cleartext HTTP/2 connection
// (prior knowledge, as Envoy and istio-agent speak to a plaintext xDS
// port), driven entirely by the caller's goroutine.
//
// Why: at 10,000 simulated proxies on the server's own cores, grpc-go's
// client transport costs as much CPU per push as the server under test
// (a reader goroutine, a writer goroutine and the caller per connection,
// three hand-offs and a buffer copy per message). Here RecvMsg reads
// frames straight from the socket into one reused message buffer and
// SendMsg writes each message with one write: per push one read and one
// write system call, no goroutine hand-off.
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

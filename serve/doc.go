// Package serve owns pilotfish's network surface: the Aggregated Discovery
// Service (SotW and Delta) over gRPC with a raw-bytes codec, per-stream
// state, ACK/NACK and nonce handling, and the HTTP server for readiness,
// metrics, pprof and debug endpoints.
//
// # Imports
//
// serve may import engine and ca. It must not import ingest or index
// directly (it sees the mesh only through engine), nor encode.
package serve

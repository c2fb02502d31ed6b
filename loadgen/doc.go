// Package loadgen is a black-box xDS client that simulates thousands of
// Envoys (or proxyless gRPC clients) against any ADS server and measures
// time to first config, push and convergence latency, bytes and resources.
//
// # Imports
//
// loadgen imports no other pilotfish package, only protocol types: it must
// measure pilotfish exactly as it would measure istiod or go-control-plane.
package loadgen

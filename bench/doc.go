// Package bench holds pilotfish's macro benchmarks and regression gates: fixed
// scenarios run in one process against pilotfish and against baselines built
// on go-control-plane's caches, reported as same-run ratios. A floor server
// (floor.go: every response pre-encoded and shared, nothing per proxy) can
// run next to them, to show what gRPC-go and the kernel cost alone.
//
// # Imports
//
// bench may import any pilotfish package; only cmd/pilotfish imports bench.
package bench

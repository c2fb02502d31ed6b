// Package xdstest checks generated Envoy resources in tests: it unpacks
// encoded Anys and runs go-control-plane's generated validation on every
// message, including those packed in nested Anys (typed configs, transport
// sockets), which ValidateAll itself does not open.
//
// Test support only; it imports no pilotfish package, so the tests of any
// package may use it.
package xdstest

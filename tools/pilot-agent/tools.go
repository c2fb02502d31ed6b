//go:build tools

// Package tools pins istio.io/istio so that `go build
// istio.io/istio/pilot/cmd/pilot-agent` in this module builds the real
// istio-agent for pilotfish's CA and xDS tests. Nothing imports it.
package tools

import _ "istio.io/istio/pilot/cmd/pilot-agent"

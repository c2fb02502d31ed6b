//go:build tools

// Package tools pins istio.io/istio so that `go build
// istio.io/istio/pilot/cmd/pilot-agent` and `go build
// istio.io/istio/istioctl/cmd/istioctl` in this module build the real
// istio-agent and istioctl for pilotfish's CA, xDS and debug tests. Nothing
// imports it.
package tools

import (
	_ "istio.io/istio/istioctl/cmd/istioctl"
	_ "istio.io/istio/pilot/cmd/pilot-agent"
	_ "istio.io/istio/pilot/cmd/pilot-discovery"
)

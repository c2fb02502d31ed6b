//go:build tools

// Package tools pins Helm, which `make manifests` runs to render
// deploy/charts/pilotfish into deploy/manifests/pilotfish.yaml and the
// deploy tests run to check that file is up to date. A module of its own so
// that Helm's dependencies never enter pilotfish's go.mod. Nothing imports
// it.
package tools

import _ "helm.sh/helm/v4/cmd/helm"

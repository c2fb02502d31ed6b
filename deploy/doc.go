// Package deploy holds pilotfish's Kubernetes deployment: the Helm chart
// (charts/pilotfish) and the plain manifests rendered from it
// (manifests/pilotfish.yaml, by `make manifests`). Its tests check that the
// rendered file is the chart's current output and that a real API server
// accepts it (kubectl apply --dry-run=server) and grants the service
// account exactly the access pilotfish needs.
//
// No Go code lives here; nothing imports this package.
package deploy

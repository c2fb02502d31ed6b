// Package kubetest runs a real Kubernetes control plane for tests: etcd and
// kube-apiserver as child processes on 127.0.0.1, on random ports, with an
// admin client, Istio's CRDs on request, an API server restart that keeps
// etcd, etcd compaction (to expire watches), and service-account tokens through the TokenRequest API.
//
// The binaries are built by `make kube-bins` (tools/kube) into
// <repo>/.cache/kube/bin, or taken from $PILOTFISH_KUBE_BIN. When they are
// absent a test is skipped locally and fails when $CI is set, so a CI run
// can never silently skip the Kubernetes tests.
//
// # What the cluster is
//
// Only etcd and kube-apiserver: no controller-manager, scheduler or kubelet.
// Tests write the objects controllers would (EndpointSlices, Pod status).
// Authentication is by client certificate (the admin is in system:masters);
// authorization is RBAC, so a test can check least-privilege roles with
// impersonation. The service-account signing key is the harness's own, so
// tokens it issues pass TokenReview.
//
// # Invariants
//
//   - Every process the harness starts is stopped by t.Cleanup (and killed
//     with the test process on Linux through the parent-death signal).
//   - Process output goes to files under t.TempDir(); their tails are logged
//     only when the test failed.
//
// # Imports
//
// Test-only: it imports client-go and istio.io/client-go and no pilotfish
// package, and no non-test code may import it.
package kubetest

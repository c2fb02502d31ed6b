// Package meshgen writes synthetic Kubernetes meshes as YAML manifests for
// benchmarks and load tests: N Services, each with an EndpointSlice of M
// endpoints and the Pods behind them, spread over namespaces. It complements
// internal/istiobench (Istio's own workloads, which are ServiceEntry-based)
// with the Kubernetes shape most meshes have.
package meshgen

// Package istiobench embeds Istio's own xDS benchmark workloads and renders
// them, so pilotfish's benchmarks, tests and demo commands run on exactly the
// config istiod's benchmarks use and their numbers compare like for like.
//
// The templates under workloads/ are copied unchanged from istio/istio
// (pilot/pkg/xds/testdata/benchmarks; Apache 2.0, see workloads/LICENSE and
// workloads/SOURCE.txt) and checked against workloads/SHA256SUMS by a test:
// edit none of them. Each is a Go text/template over Params with istiod's
// three functions: until N (0..N-1), div and mod.
//
// Two upstream quirks are kept, because istiod's numbers were measured
// with them: knative-gateway's loop lacks a trailing "---", so with
// Services > 1 each hello-private-ingress-i VirtualService shares a document
// with hello-ingress-(i+1) and lenient readers (yaml.v2, sigs.k8s.io/yaml's
// Unmarshal) keep the latter's repeated keys, while strict ones reject it;
// and empty's service addresses 127.0.0.i are valid IPs only while
// Services <= 256.
//
// Rendering is for setup, not a hot path: it allocates freely. The parsed
// templates are immutable after first use and safe for concurrent Render.
//
// istiobench imports no pilotfish package, so any package's tests may use it.
package istiobench

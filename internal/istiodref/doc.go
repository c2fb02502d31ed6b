// Package istiodref holds istiod's own output for inputs that exercise
// Istio semantics, so that tests compare pilotfish with the reference field
// by field, and the producer that regenerates it.
//
// # Cases
//
// A case is a directory testdata/<case>/ with
//
//   - config.yaml: everything istiod reads from the API server for the
//     case (Namespaces, Services, EndpointSlices, Istio objects);
//   - proxies.yaml: the proxies to dump, each with its xDS node ID and the
//     node metadata istio-agent would send (see Proxy);
//   - mesh.yaml (optional): istiod's mesh config; without it istiod runs on
//     its code defaults, which are pilotfish's defaults too;
//   - istiod/<proxy>.json: istiod's /debug/config_dump (with EDS) for each
//     proxy, and istiod/inputs.sha256, the digest of the inputs it was made
//     from. Both are written by the producer, never by hand.
//
// # The producer
//
//	make pilot-discovery   # istiod, from the istio version tools/pilot-agent pins
//	go test ./internal/istiodref -run TestProduce -istiod .cache/bin/pilot-discovery [-case NAME]
//
// runs, per case, a real etcd and kube-apiserver (internal/kubetest) with
// Istio's CRDs, applies config.yaml, starts pilot-discovery against it on
// loopback ports, connects each proxy as an ADS client that requests and
// ACKs CDS, EDS, LDS and RDS, and saves istiod's config dump. Rerun it after
// an istio upgrade and review the diff like code. Without -istiod the same
// test checks that every case's output is there and was made from the
// inputs as they are now, so an edited input without regenerated output
// fails CI.
//
// Reading: LoadCase and ReadDump give tests the inputs and istiod's
// resources as generic JSON keyed by resource name.
//
// # Imports
//
// No pilotfish package: a test in rules or engine imports this one, not
// the reverse.
package istiodref

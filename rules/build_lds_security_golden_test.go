package rules

import "testing"

// TestGoldenLDSSecurity: the inbound side under PeerAuthentication STRICT
// (istio-bench strict) and DENY AuthorizationPolicies (authorizationpolicy),
// against golden files and istiod's output for the same proxy.
func TestGoldenLDSSecurity(t *testing.T) {
	sidecar := sidecarClass("default")
	for _, w := range []string{"strict", "authorizationpolicy"} {
		t.Run(w, func(t *testing.T) {
			runLRGolden(t, lrWorkload(t, w), w+".s10", []lrScenario{
				{name: "sidecar", class: sidecar, istiod: w + ".s10.sidecar.json"},
				{name: "sidecar-1.1.1.1", class: sidecar, ip: "1.1.1.1", istiod: w + ".s10.sidecar-1.1.1.1.json"},
			})
		})
	}
}

// TestGoldenLDSSecurityExamples: the example mesh's policies on the
// workloads they select: bookinfo's STRICT namespace and per-app ALLOW
// policies (reviews), shop's ALLOW by principal and gRPC path (checkout)
// and its workload PeerAuthentication with a DISABLE port (redis-cart).
func TestGoldenLDSSecurityExamples(t *testing.T) {
	runLRGolden(t, lrExamples(t), "examples", []lrScenario{
		{name: "reviews", class: sidecarClass("bookinfo"), ip: "10.244.1.13"},
		{name: "checkout", class: sidecarClass("shop"), ip: "10.244.1.22"},
		{name: "redis-cart", class: sidecarClass("shop"), ip: "10.244.2.23"},
	})
}

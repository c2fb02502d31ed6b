package engine

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

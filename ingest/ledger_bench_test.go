package ingest_test

import (
	"strings"
	"testing"

	"github.com/pilotfish-mesh/pilotfish/ingest"
)

// typicalVS is a VirtualService as bookinfo writes them: header and URI
// matches, weighted subsets, a timeout, retries and a fault; no field
// pilotfish does not support.
const typicalVS = `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews, namespace: bookinfo}
spec:
  hosts: [reviews]
  http:
  - name: jason
    match:
    - headers: {end-user: {exact: jason}}
      uri: {prefix: /reviews}
    route:
    - destination: {host: reviews, subset: v2}
    fault: {delay: {percentage: {value: 10}, fixedDelay: 2s}}
  - name: default
    route:
    - {destination: {host: reviews, subset: v1}, weight: 75}
    - {destination: {host: reviews, subset: v3}, weight: 25}
    timeout: 10s
    retries: {attempts: 3, perTryTimeout: 2s, retryOn: 5xx}
`

// sourceSubnetVS is typicalVS with one unsupported field: a TCP route's
// match on sourceSubnet.
const sourceSubnetVS = typicalVS + `  tcp:
  - match: [{sourceSubnet: 10.0.0.0/8}]
    route: [{destination: {host: reviews}}]
`

func decodeOne(tb testing.TB, yaml string) *ingest.Object {
	tb.Helper()
	objs, errs := ingest.Decode("vs.yaml", []byte(yaml))
	if len(errs) > 0 || len(objs) != 1 {
		tb.Fatalf("decode: %v", errs)
	}
	return &objs[0]
}

// BenchmarkUnsupported is the field ledger's walk of a decoded object:
// typical sets no unsupported field (the common case, paid for every object
// of every source); sourceSubnet sets one (a warning with its path).
func BenchmarkUnsupported(b *testing.B) {
	for _, bc := range []struct{ name, yaml string }{
		{"typical", typicalVS},
		{"sourceSubnet", sourceSubnetVS},
	} {
		o := decodeOne(b, bc.yaml)
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				ingest.Unsupported(o)
			}
		})
	}
}

// TestUnsupportedAllocs holds the walk of an object without unsupported
// fields to its budget: a few small allocations for the lists it descends
// into (protoreflect wraps each list), none per field.
func TestUnsupportedAllocs(t *testing.T) {
	o := decodeOne(t, typicalVS)
	if w := ingest.Unsupported(o); w != nil {
		t.Fatalf("typical VirtualService: %v", w)
	}
	if n := testing.AllocsPerRun(100, func() { ingest.Unsupported(o) }); n > 8 {
		t.Errorf("Unsupported on a typical VirtualService: %.0f allocations, budget 8", n)
	}
	// A policy's targets are looked at by value (a warning for targets
	// that attach to waypoints only): none per target either.
	gw, errs := ingest.Decode("ap.yaml", []byte(`apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: p, namespace: shop}
spec:
  targetRefs:
  - {kind: Service, name: reviews}
  - {group: gateway.networking.k8s.io, kind: Gateway, name: gw}
`))
	if len(errs) > 0 || len(gw) != 1 || ingest.Unsupported(&gw[0]) != nil {
		t.Fatalf("policy targeting a gateway: %v", errs)
	}
	if n := testing.AllocsPerRun(100, func() { ingest.Unsupported(&gw[0]) }); n > 3 {
		t.Errorf("Unsupported on a policy targeting a gateway: %.0f allocations, budget 3", n)
	}
	// The benchmark's other case has its one warning.
	if w := ingest.Unsupported(decodeOne(t, sourceSubnetVS)); len(w) != 1 ||
		!strings.Contains(w[0].Error(), "spec.tcp[0].match[0].sourceSubnet: not supported") {
		t.Errorf("sourceSubnet VirtualService: %v", w)
	}
}

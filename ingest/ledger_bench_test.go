package ingest_test

import (
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
// of every source); sourceLabels sets one (a warning with its path).
func BenchmarkUnsupported(b *testing.B) {
	for _, bc := range []struct{ name, yaml string }{
		{"typical", typicalVS},
		{"sourceLabels", unsupportedVS[:len(unsupportedVS)-len("---\napiVersion: networking.istio.io/v1alpha3\nkind: EnvoyFilter\nmetadata: {name: tweak, namespace: shop}\nspec: {}\n")]},
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
}

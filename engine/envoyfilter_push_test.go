package engine

import (
	"slices"
	"testing"

	"github.com/pilotfish-mesh/pilotfish/index"
	"github.com/pilotfish-mesh/pilotfish/ingest"
)

// efPatch is a configPatch that merges into every outbound cluster: a
// change that reaches a proxy changes its CDS.
const efPatch = `
  configPatches:
  - applyTo: CLUSTER
    match: {context: SIDECAR_OUTBOUND}
    patch: {operation: MERGE, value: {per_connection_buffer_limit_bytes: 4096}}`

// TestEnvoyFilterPushScope: an EnvoyFilter change is pushed only to the
// proxies it can reach (its namespace, its selector; the root namespace:
// all), and a proxy pushed to gets the patched clusters while one not
// pushed to holds what it would get now.
func TestEnvoyFilterPushScope(t *testing.T) {
	sw, e, pp := startPolicyProxies(t)
	one, other, drain := pp.one, pp.other, pp.drain

	patched := func(c *Conn) int {
		rs, err := e.generate(c.class.scope(e), e.cache, TypeCluster, nil, true, nil)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, r := range rs {
			// per_connection_buffer_limit_bytes (field 5, a UInt32Value)
			// = 4096: tag 0x2a, length 3, its value field 0x08, 0x80 0x20.
			if containsBytes(r.Any, []byte{0x2a, 0x03, 0x08, 0x80, 0x20}) {
				n++
			}
		}
		return n
	}
	for _, step := range []struct {
		what     string
		manifest string
		delete   *ingest.ObjectKey
		want     []string
		// patchedOne: whether a/one's clusters carry the patch after it.
		patchedOne bool
	}{
		{"EnvoyFilter in a selecting app=one (a new selector key)", `
apiVersion: networking.istio.io/v1alpha3
kind: EnvoyFilter
metadata: {name: one, namespace: a}
spec:
  workloadSelector: {labels: {app: one}}` + efPatch, nil, []string{"a/one"}, true},
		{"EnvoyFilter in a selecting no proxy", `
apiVersion: networking.istio.io/v1alpha3
kind: EnvoyFilter
metadata: {name: nobody, namespace: a}
spec:
  workloadSelector: {labels: {app: nobody}}` + efPatch, nil, nil, true},
		{"namespace-wide EnvoyFilter in c", `
apiVersion: networking.istio.io/v1alpha3
kind: EnvoyFilter
metadata: {name: all-c, namespace: c}
spec:` + efPatch, nil, []string{"c"}, true},
		{"EnvoyFilter in a deleted", "", &ingest.ObjectKey{Kind: ingest.KindEnvoyFilter, Namespace: "a", Name: "one"}, []string{"a/one"}, false},
		{"root-namespace EnvoyFilter", `
apiVersion: networking.istio.io/v1alpha3
kind: EnvoyFilter
metadata: {name: mesh, namespace: istio-system}
spec:` + efPatch, nil, []string{"a/one", "a/other", "b", "c"}, true},
	} {
		if step.delete != nil {
			var b index.Batch
			sw.conv.Delete(&b, *step.delete)
			sw.w.Apply(&b)
		} else {
			sw.apply(step.manifest)
		}
		if got := drain(); !slices.Equal(got, step.want) {
			t.Fatalf("%s: pushed to %v, want %v", step.what, got, step.want)
		}
		if got := patched(one) > 0; got != step.patchedOne {
			t.Errorf("%s: a/one's clusters patched: %v, want %v", step.what, got, step.patchedOne)
		}
		if step.what != "root-namespace EnvoyFilter" && patched(other) > 0 {
			t.Errorf("%s: a/other's clusters patched by a filter that does not reach it", step.what)
		}
	}
}

func containsBytes(b, sub []byte) bool {
	for i := 0; i+len(sub) <= len(b); i++ {
		if string(b[i:i+len(sub)]) == string(sub) {
			return true
		}
	}
	return false
}

package ingest

import (
	"slices"
	"testing"
	"time"

	"github.com/pilotfish-mesh/pilotfish/index"
)

const jwksRAs = `apiVersion: security.istio.io/v1
kind: RequestAuthentication
metadata: {name: uri, namespace: shop}
spec:
  jwtRules:
  - {issuer: "https://a.example", jwksUri: "https://keys.a.example/jwks"}
  - {issuer: "https://a.example", jwksUri: "https://keys.a.example/jwks", timeout: 9s}
  - {issuer: "https://inline.example", jwks: '{"keys":[]}'}
---
apiVersion: security.istio.io/v1
kind: RequestAuthentication
metadata: {name: discovery, namespace: shop}
spec:
  jwtRules:
  - {issuer: "https://idp.example"}
  - {issuer: "https://ip.example", jwksUri: "http://10.0.0.9:8080/keys"}
`

// TestJWKSInput: the sources the index's RequestAuthentications name reach
// Want (jwksUri rules only when the control plane fetches them, once each
// with their longest timeout, never inline jwks), again when they change;
// key sets applied become ConfigJWKS rows, and an unchanged list applies
// nothing.
func TestJWKSInput(t *testing.T) {
	w := index.NewWriter()
	c := NewConverter(w, "cluster.local")
	var got, gotEnvoy [][]JWKSSource
	in := NewJWKSInput(w, JWKSInputOptions{FetchURIs: true, Want: func(s []JWKSSource) { got = append(got, s) }})
	NewJWKSInput(w, JWKSInputOptions{Want: func(s []JWKSSource) { gotEnvoy = append(gotEnvoy, s) }})
	apply(t, w, c, jwksRAs)
	want := []JWKSSource{
		{Issuer: "https://a.example", URI: "https://keys.a.example/jwks", Timeout: 9 * time.Second},
		{Issuer: "https://idp.example"},
		{Issuer: "https://ip.example", URI: "http://10.0.0.9:8080/keys"},
	}
	if len(got) != 1 || !slices.Equal(got[0], want) {
		t.Fatalf("wanted sources %v, want %v", got, want)
	}
	if len(gotEnvoy) != 1 || !slices.Equal(gotEnvoy[0], want[1:2]) {
		t.Errorf("envoy mode: wanted %v, want the issuer-only rule", gotEnvoy)
	}

	in.Apply([]JWKSKeySet{{Issuer: "https://idp.example", JWKS: `{"keys":[]}`}, {Issuer: "https://a.example", URI: "https://keys.a.example/jwks", JWKS: "k1"}})
	snap := w.Snapshot()
	if n := snap.NumConfigs(index.ConfigJWKS); n != 2 {
		t.Fatalf("%d JWKS rows, want 2", n)
	}
	iss, _ := snap.Symbols.Lookup("https://a.example")
	uri, _ := snap.Symbols.Lookup("https://keys.a.example/jwks")
	row, ok := snap.Config(index.ConfigJWKS, index.ConfigKey{Namespace: iss, Name: uri})
	if !ok || row.Spec.(index.JWKS).Keys != "k1" {
		t.Fatalf("row %v", row)
	}
	v := snap.Version
	in.Apply([]JWKSKeySet{{Issuer: "https://idp.example", JWKS: `{"keys":[]}`}, {Issuer: "https://a.example", URI: "https://keys.a.example/jwks", JWKS: "k1"}})
	if w.Snapshot().Version != v {
		t.Error("the same key sets applied a new snapshot")
	}
	in.Apply([]JWKSKeySet{{Issuer: "https://a.example", URI: "https://keys.a.example/jwks", JWKS: "k2"}})
	snap = w.Snapshot()
	row, _ = snap.Config(index.ConfigJWKS, index.ConfigKey{Namespace: iss, Name: uri})
	if snap.NumConfigs(index.ConfigJWKS) != 1 || row.Spec.(index.JWKS).Keys != "k2" {
		t.Errorf("after a change and a removal: %d rows, %v", snap.NumConfigs(index.ConfigJWKS), row)
	}
	if len(got) != 1 {
		t.Errorf("applying key sets called Want again: %v", got[1:])
	}
	apply(t, w, c, "apiVersion: security.istio.io/v1\nkind: RequestAuthentication\nmetadata: {name: discovery, namespace: shop}\nspec:\n  jwtRules: [{issuer: \"https://idp.example\"}]\n")
	if len(got) != 2 || !slices.Equal(got[1], want[:2]) {
		t.Errorf("after a change of rules: wanted %v, want %v", got[1:], want[:2])
	}
}

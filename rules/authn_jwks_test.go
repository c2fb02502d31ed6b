package rules

import (
	"testing"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/index"
	"github.com/pilotfish-mesh/pilotfish/ingest"
)

// keys.mesh is a mesh service's host; the rules name it, an external
// host, an IP host and an issuer only.
const jwksModesMesh = `apiVersion: v1
kind: Service
metadata: {name: keys, namespace: idp}
spec:
  clusterIP: 10.96.30.1
  ports: [{name: http, port: 8080}]
---
apiVersion: security.istio.io/v1
kind: RequestAuthentication
metadata: {name: jwt, namespace: shop}
spec:
  jwtRules:
  - {issuer: "https://mesh.example", jwksUri: "http://keys.idp.svc.cluster.local:8080/jwks"}
  - {issuer: "https://external.example", jwksUri: "https://keys.external.example/jwks"}
  - {issuer: "https://ip.example", jwksUri: "https://10.0.0.9/jwks"}
  - {issuer: "https://discovery.example"}
  - {issuer: "https://inline.example", jwks: '{"keys":[]}'}
`

// TestJWTKeysByFetchMode: where each rule's keys come from under each
// PILOT_JWT_ENABLE_REMOTE_JWKS mode, as istiod decides: istiod fetches
// everything; hybrid lets Envoy fetch from a mesh service; envoy lets Envoy
// fetch every jwksUri (through the cluster its host would have); issuer-only
// rules and inline jwks never go to Envoy.
func TestJWTKeysByFetchMode(t *testing.T) {
	w := index.NewWriter()
	conv := ingest.NewConverter(w, "cluster.local")
	var b index.Batch
	objs, errs := ingest.Decode("m.yaml", []byte(jwksModesMesh))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	for i := range objs {
		conv.Put(&b, &objs[i])
	}
	w.Apply(&b)
	in := ingest.NewJWKSInput(w, ingest.JWKSInputOptions{FetchURIs: true})
	in.Apply([]ingest.JWKSKeySet{
		{Issuer: "https://external.example", URI: "https://keys.external.example/jwks", JWKS: "ext"},
		{Issuer: "https://ip.example", URI: "https://10.0.0.9/jwks", JWKS: "ip"},
		{Issuer: "https://discovery.example", JWKS: "disc"},
		{Issuer: "https://mesh.example", URI: "http://keys.idp.svc.cluster.local:8080/jwks", JWKS: "mesh"},
	})
	snap := w.Snapshot()
	var ras []*index.Config
	snap.Configs(index.ConfigRequestAuthentication, func(c *index.Config) bool { ras = append(ras, c); return true })

	type want struct{ cluster, fetched string } // fetched: the row's keys, "" none
	mesh := want{cluster: "outbound|8080||keys.idp.svc.cluster.local"}
	for _, tc := range []struct {
		mode encode.JWKSFetchMode
		want []want
	}{
		{encode.JWKSFetchIstiod, []want{{fetched: "mesh"}, {fetched: "ext"}, {fetched: "ip"}, {fetched: "disc"}, {}}},
		{encode.JWKSFetchHybrid, []want{mesh, {fetched: "ext"}, {fetched: "ip"}, {fetched: "disc"}, {}}},
		{encode.JWKSFetchEnvoy, []want{mesh, {cluster: "outbound|443||keys.external.example"}, {cluster: "outbound|443||10.0.0.9"}, {fetched: "disc"}, {}}},
	} {
		t.Run(tc.mode.String(), func(t *testing.T) {
			j := jwtRules(snap, tc.mode, ras)
			if len(j.Keys) != len(tc.want) {
				t.Fatalf("%d keys, want %d", len(j.Keys), len(tc.want))
			}
			for i, k := range j.Keys {
				got := want{cluster: k.Cluster}
				if k.Fetched != nil {
					got.fetched = k.Fetched.Spec.(index.JWKS).Keys
				}
				if got != tc.want[i] {
					t.Errorf("rule %d: %+v, want %+v", i, got, tc.want[i])
				}
			}
		})
	}
}

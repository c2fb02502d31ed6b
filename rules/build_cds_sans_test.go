package rules

import (
	"slices"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"

	"github.com/pilotfish-mesh/pilotfish/encode"
)

// seSANsConfig: ServiceEntries with subjectAltNames, with ISTIO_MUTUAL,
// SIMPLE and auto mTLS (a mesh-internal entry whose endpoints have
// sidecars), in a namespace apart.
const seSANsConfig = `
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: vm, namespace: sesans}
spec:
  hosts: [vm.sesans.example]
  location: MESH_INTERNAL
  resolution: STATIC
  ports: [{name: http, number: 80, protocol: HTTP}]
  subjectAltNames: ["spiffe://cluster.local/ns/sesans/sa/vm-legacy", "vm.sesans.example"]
  endpoints:
  - {address: 10.2.0.5, serviceAccount: vm, labels: {security.istio.io/tlsMode: istio}}
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: ext, namespace: sesans}
spec:
  hosts: [ext.sesans.example]
  location: MESH_EXTERNAL
  resolution: DNS
  ports: [{name: tls, number: 443, protocol: TLS}, {name: mtls, number: 8443, protocol: TLS}]
  subjectAltNames: ["ext.sesans.example"]
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: ext, namespace: sesans}
spec:
  host: ext.sesans.example
  trafficPolicy:
    portLevelSettings:
    - port: {number: 443}
      tls: {mode: SIMPLE}
    - port: {number: 8443}
      tls: {mode: ISTIO_MUTUAL}
`

// TestBuildClustersServiceEntrySANs: a ServiceEntry's subjectAltNames are
// the SANs its upstream TLS verifies, with its endpoints' identities
// (istiod's PushContext.ServiceAccounts), for auto mTLS, ISTIO_MUTUAL and
// SIMPLE without SANs of its own.
func TestBuildClustersServiceEntrySANs(t *testing.T) {
	snap := lrLoad(t, map[string][]byte{"se.yaml": []byte(seSANsConfig)})
	sc := classScope(snap, &encode.ProxyClass{Type: encode.ProxySidecar, Namespace: "sesans", IstioVersion: "1.31", ClusterID: "Kubernetes"})
	rs, err := buildClusters(sc, encode.DefaultMesh(), verifyingCache(), nil, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*clusterv3.Cluster{}
	for _, c := range decodeResources(t, rs, newCluster) {
		byName[c.Name] = c
	}
	cases := []struct {
		cluster string
		want    []string
	}{
		{"outbound|80||vm.sesans.example", []string{"spiffe://cluster.local/ns/sesans/sa/vm", "spiffe://cluster.local/ns/sesans/sa/vm-legacy", "vm.sesans.example"}},
		{"outbound|443||ext.sesans.example", []string{"ext.sesans.example"}},
		{"outbound|8443||ext.sesans.example", []string{"ext.sesans.example"}},
	}
	for _, tc := range cases {
		t.Run(tc.cluster, func(t *testing.T) {
			c := byName[tc.cluster]
			if c == nil {
				t.Fatalf("no cluster %s", tc.cluster)
			}
			ts := c.GetTransportSocket()
			if ts == nil {
				for _, m := range c.GetTransportSocketMatches() {
					if m.Name == "tlsMode-istio" {
						ts = m.TransportSocket
					}
				}
			}
			if ts == nil {
				t.Fatalf("no TLS transport socket: %v", c)
			}
			ctx := &tlsv3.UpstreamTlsContext{}
			if err := ts.GetTypedConfig().UnmarshalTo(ctx); err != nil {
				t.Fatal(err)
			}
			var got []string
			vc := ctx.GetCommonTlsContext().GetCombinedValidationContext().GetDefaultValidationContext()
			for _, m := range vc.GetMatchSubjectAltNames() {
				got = append(got, m.GetExact())
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("SANs %q, want %q", got, tc.want)
			}
		})
	}
}

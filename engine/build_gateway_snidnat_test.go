package engine

import (
	"slices"
	"testing"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/index"
	"github.com/pilotfish-mesh/pilotfish/rules"
)

const sniDNATConfig = `apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: cross-network, namespace: istio-system}
spec:
  selector: {istio: eastwestgateway}
  servers: [{port: {number: 15443, name: tls, protocol: TLS}, hosts: ["*.local"], tls: {mode: AUTO_PASSTHROUGH}}]
---
apiVersion: v1
kind: Service
metadata: {name: reviews, namespace: shop}
spec: {clusterIP: 10.96.0.71, ports: [{name: http, port: 9080}, {name: udp, port: 53, protocol: UDP}]}
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: reviews, namespace: shop}
spec:
  host: reviews.shop.svc.cluster.local
  trafficPolicy: {tls: {mode: ISTIO_MUTUAL}}
  subsets: [{name: v1, labels: {version: v1}}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: ext, namespace: shop}
spec: {hosts: [api.example.com], location: MESH_EXTERNAL, resolution: DNS, ports: [{number: 443, name: tls, protocol: TLS}]}
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: db, namespace: shop}
spec: {hosts: [db.internal], location: MESH_INTERNAL, resolution: STATIC, ports: [{number: 5432, name: tcp, protocol: TCP}], endpoints: [{address: 10.1.0.5}, {address: 10.1.0.6}]}
`

func TestServiceOfSNIDNATCluster(t *testing.T) {
	snap := lrLoad(t, map[string][]byte{"c.yaml": []byte(sniDNATConfig)})
	k, ok := serviceOfCluster(snap, "outbound_.9080_.v1_.reviews.shop.svc.cluster.local")
	if !ok || snap.String(k.Host) != "reviews.shop.svc.cluster.local" || snap.String(k.Namespace) != "shop" {
		t.Fatalf("serviceOfCluster = %v, %v", k, ok)
	}
}

// TestEDSClusterNamesSNIDNAT: an endpoint change pushes the SNI-DNAT names
// too (a router with an AUTO_PASSTHROUGH server subscribes to them).
func TestEDSClusterNamesSNIDNAT(t *testing.T) {
	snap := lrLoad(t, map[string][]byte{"c.yaml": []byte(sniDNATConfig)})
	k, ok := serviceOfCluster(snap, "outbound|9080||reviews.shop.svc.cluster.local")
	if !ok {
		t.Fatal("reviews not found")
	}
	names := edsClusterNames(snap, rules.AutoPassthrough(snap), map[index.ServiceKey]struct{}{k: {}})
	sc := routerScope(snap, "istio-system", map[string]string{"istio": "eastwestgateway"})
	rs, err := rules.Build(TypeCluster, sc, encode.DefaultMesh(), verifyCache(), nil, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if _, _, h, ok := encode.ParseSNIDNATName(r.Name); ok && h == "reviews.shop.svc.cluster.local" && !slices.Contains(names, r.Name) {
			t.Errorf("endpoint push names %v lack %s", names, r.Name)
		}
	}
}

package rules

import (
	"path/filepath"
	"slices"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/protobuf/proto"

	"github.com/pilotfish-mesh/pilotfish/encode"
)

// TestGatewaySNIDNATClusters: a router with an AUTO_PASSTHROUGH server gets,
// after BlackHoleCluster, an SNI-DNAT cluster (outbound_.PORT_.SUBSET_.HOST,
// no upstream TLS) per mesh-internal service port and subset, as istiod's
// buildOutboundSniDnatClusters builds them; EDS answers their names with
// the service port's endpoints. Every resource passes ValidateAll and the
// clusters are checked against a golden file.
func TestGatewaySNIDNATClusters(t *testing.T) {
	snap := lrLoad(t, map[string][]byte{"c.yaml": []byte(sniDNATConfig)})
	sc := routerScope(snap, "istio-system", map[string]string{"istio": "eastwestgateway"})
	mesh := encode.DefaultMesh()
	rs, err := buildClusters(sc, mesh, verifyCache(), nil, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs := decodeResources(t, rs, func() *clusterv3.Cluster { return new(clusterv3.Cluster) })
	var names []string
	byName := map[string]*clusterv3.Cluster{}
	for _, c := range cs {
		names = append(names, c.Name)
		byName[c.Name] = c
	}
	bh := slices.Index(names, "BlackHoleCluster")
	want := []string{"outbound_.5432_._.db.internal", "outbound_.9080_._.reviews.shop.svc.cluster.local", "outbound_.9080_.v1_.reviews.shop.svc.cluster.local"}
	if bh < 0 || !slices.Equal(names[bh+1:], want) {
		t.Fatalf("clusters %v: want %v after BlackHoleCluster (no UDP port, no mesh-external service)", names, want)
	}
	for _, n := range want {
		c := byName[n]
		if c.TransportSocket != nil || len(c.TransportSocketMatches) != 0 {
			t.Errorf("%s: has upstream TLS; SNI-DNAT clusters pass the client's TLS through", n)
		}
		if c.AltStatName != n+";" || c.GetEdsClusterConfig().GetServiceName() != n {
			t.Errorf("%s: alt stat name %q, EDS service name %q", n, c.AltStatName, c.GetEdsClusterConfig().GetServiceName())
		}
	}
	// The ordinary cluster keeps its mTLS: the SNI-DNAT variant must not
	// share or change its bytes.
	if o := byName["outbound|9080||reviews.shop.svc.cluster.local"]; o == nil || o.TransportSocket == nil && len(o.TransportSocketMatches) == 0 {
		t.Fatalf("outbound|9080||reviews lost its ISTIO_MUTUAL transport socket")
	}
	msgs := make([]proto.Message, 0, len(cs))
	for _, c := range cs {
		msgs = append(msgs, c)
	}
	checkGolden(t, filepath.Join(cdsGoldenDir, "router-sni-dnat.json"), goldenResources(t, msgs))

	es, err := buildEndpoints(sc, mesh, verifyCache(), []string{want[0], "outbound|5432||db.internal"}, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	clas := decodeResources(t, es, func() *endpointv3.ClusterLoadAssignment { return new(endpointv3.ClusterLoadAssignment) })
	if clas[0].ClusterName != want[0] {
		t.Fatalf("EDS answered %q for %q", clas[0].ClusterName, want[0])
	}
	if len(clas[0].Endpoints) != 1 || len(clas[0].Endpoints[0].LbEndpoints) != 2 {
		t.Fatalf("SNI-DNAT endpoints %v, want the two of db.internal", clas[0].Endpoints)
	}
	if !proto.Equal(&endpointv3.ClusterLoadAssignment{Endpoints: clas[0].Endpoints}, &endpointv3.ClusterLoadAssignment{Endpoints: clas[1].Endpoints}) {
		t.Fatalf("SNI-DNAT endpoints %v differ from the service port's %v", clas[0].Endpoints, clas[1].Endpoints)
	}

	// Without an AUTO_PASSTHROUGH server there are none.
	plain := routerScope(snap, "istio-system", map[string]string{"istio": "ingressgateway"})
	rs, err = buildClusters(plain, mesh, verifyCache(), nil, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if _, _, _, ok := encode.ParseSNIDNATName(r.Name); ok {
			t.Fatalf("router without AUTO_PASSTHROUGH got %s", r.Name)
		}
	}
}

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

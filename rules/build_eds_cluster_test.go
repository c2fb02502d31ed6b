package rules

import (
	"testing"

	"github.com/pilotfish-mesh/pilotfish/encode"
)

// TestEndpointsCarryRegistryClusterID: endpoint metadata names the cluster
// the server's registry belongs to (--cluster-id), not the proxy's own
// CLUSTER_ID (the sidecar scope here says "Kubernetes").
func TestEndpointsCarryRegistryClusterID(t *testing.T) {
	f := newXDSFixture(t)
	f.httpWorkload(10)
	snap := f.apply()
	mesh := encode.DefaultMesh()
	mesh.ClusterID = "east-1"
	sc := sidecarScope(snap, "default", "10.0.0.1")
	rs, err := buildEndpoints(sc, mesh, verifyingCache(), []string{"outbound|80||random-5.host.example"}, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	clas := decodeResources(t, rs, newCLA)
	lbe := clas[0].Endpoints[0].LbEndpoints[0]
	if w := lbe.Metadata.FilterMetadata["istio"].Fields["workload"].GetStringValue(); w != "service-5-0;default;service-5-0;;east-1" {
		t.Fatalf("workload metadata %q, want the registry's cluster east-1", w)
	}
}

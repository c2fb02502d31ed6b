package rules

import (
	"fmt"
	"slices"
	"testing"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/internal/istiobench"
)

// TestGoldenServiceEntryWorkloadEntry: LDS and RDS for istio-bench's
// serviceentry-workloadentry workload (ServiceEntries selecting
// WorkloadEntries by workloadSelector), compared with istiod's output for
// the same proxies.
func TestGoldenServiceEntryWorkloadEntry(t *testing.T) {
	y, err := istiobench.Render("serviceentry-workloadentry", istiobench.Params{Services: 10, Instances: 2})
	if err != nil {
		t.Fatal(err)
	}
	snap := lrLoad(t, map[string][]byte{"serviceentry-workloadentry.yaml": y, "kubernetes.yaml": []byte(kubernetesService)})
	sidecar := sidecarClass("default")
	runLRGolden(t, snap, "serviceentry-workloadentry.s10", []lrScenario{
		{name: "sidecar", class: sidecar, istiod: "serviceentry-workloadentry.s10.sidecar.json"},
		{name: "sidecar-1.1.1.1", class: sidecar, ip: "1.1.1.1", istiod: "serviceentry-workloadentry.s10.sidecar-1.1.1.1.json"},
	})
}

// crossRegistry: a Kubernetes Service selecting a WorkloadEntry (a VM) and
// a Pod; a ServiceEntry (STATIC, no inline endpoints) selecting Pods and
// WorkloadEntries by workloadSelector; a DNS ServiceEntry; a NONE one.
const crossRegistry = `
apiVersion: v1
kind: Service
metadata: {name: ratings, namespace: shop}
spec:
  clusterIP: 10.96.0.30
  selector: {app: ratings}
  ports: [{name: http, port: 9080}]
---
apiVersion: v1
kind: Pod
metadata: {name: ratings-0, namespace: shop, labels: {app: ratings}}
spec: {containers: [{name: app, image: app}]}
status: {podIP: 10.244.0.30}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: ratings-1, namespace: shop, labels: {kubernetes.io/service-name: ratings}}
addressType: IPv4
ports: [{name: http, port: 9080}]
endpoints: [{addresses: [10.244.0.30], conditions: {ready: true}, targetRef: {kind: Pod, name: ratings-0}}]
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: ratings-vm, namespace: shop}
spec:
  address: 192.168.0.7
  labels: {app: ratings}
  serviceAccount: ratings
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: legacy, namespace: shop}
spec:
  hosts: [legacy.shop.internal]
  addresses: [240.0.0.7]
  ports: [{number: 8080, name: http, protocol: HTTP}]
  location: MESH_INTERNAL
  resolution: STATIC
  workloadSelector: {labels: {app: ratings}}
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: search, namespace: shop}
spec:
  hosts: [search.example.com]
  ports: [{number: 443, name: tls, protocol: TLS}]
  resolution: DNS
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: dns-rr, namespace: shop}
spec:
  hosts: [rr.example.com]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: DNS_ROUND_ROBIN
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: passthrough, namespace: shop}
spec:
  hosts: [any.example.com]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: NONE
`

// TestCrossRegistry: the Kubernetes Service's endpoints include the
// WorkloadEntry it selects; the ServiceEntry selecting by workloadSelector
// gets both the Pod and the WorkloadEntry; resolutions map to istiod's
// cluster types (STATIC → EDS, DNS → STRICT_DNS, DNS_ROUND_ROBIN →
// LOGICAL_DNS, NONE → ORIGINAL_DST).
func TestCrossRegistry(t *testing.T) {
	snap := lrLoad(t, map[string][]byte{"mesh.yaml": []byte(crossRegistry)})
	sc := sidecarScope(snap, "shop", "10.244.9.9")
	mesh := encode.DefaultMesh()
	rs, err := buildClusters(sc, mesh, verifyingCache(), nil, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]string{}
	for _, c := range decodeResources(t, rs, newCluster) {
		types[c.Name] = c.GetType().String()
		if c.GetType() == 0 && c.GetEdsClusterConfig() != nil {
			types[c.Name] = "EDS"
		}
	}
	for name, want := range map[string]string{
		"outbound|9080||ratings.shop.svc.cluster.local": "EDS",
		"outbound|8080||legacy.shop.internal":           "EDS",
		"outbound|443||search.example.com":              "STRICT_DNS",
		"outbound|80||rr.example.com":                   "LOGICAL_DNS",
		"outbound|80||any.example.com":                  "ORIGINAL_DST",
	} {
		if got := types[name]; got != want {
			t.Errorf("%s: cluster type %q, want %s", name, got, want)
		}
	}
	ers, err := buildEndpoints(sc, mesh, verifyingCache(), []string{
		"outbound|9080||ratings.shop.svc.cluster.local", "outbound|8080||legacy.shop.internal",
	}, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	addrs := map[string][]string{}
	for _, cla := range decodeResources(t, ers, func() *endpointv3.ClusterLoadAssignment { return &endpointv3.ClusterLoadAssignment{} }) {
		for _, l := range cla.Endpoints {
			for _, e := range l.LbEndpoints {
				addrs[cla.ClusterName] = append(addrs[cla.ClusterName], e.GetEndpoint().GetAddress().GetSocketAddress().GetAddress())
			}
		}
		slices.Sort(addrs[cla.ClusterName])
	}
	for name, want := range map[string][]string{
		"outbound|9080||ratings.shop.svc.cluster.local": {"10.244.0.30", "192.168.0.7"},
		"outbound|8080||legacy.shop.internal":           {"10.244.0.30", "192.168.0.7"},
	} {
		if !slices.Equal(addrs[name], want) {
			t.Errorf("%s: endpoints %v, want %v", name, addrs[name], want)
		}
	}
}

// TestKubernetesServiceSelectsLaterWorkloadEntry: a WorkloadEntry added in
// a later batch joins the Kubernetes Service that selects it, and leaves it
// when its labels stop matching.
func TestKubernetesServiceSelectsLaterWorkloadEntry(t *testing.T) {
	sw := newScopedWriter(t, crossRegistry)
	addrs := func() []string {
		snap := sw.w.Snapshot()
		svc, _, ok := snap.LookupService("ratings.shop.svc.cluster.local", "shop")
		if !ok {
			t.Fatal("no ratings service")
		}
		var out []string
		for _, g := range snap.Endpoints(svc.Key).Groups {
			for _, e := range g.Endpoints {
				out = append(out, e.Addr.String())
			}
		}
		slices.Sort(out)
		return out
	}
	vm2 := `
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: ratings-vm-2, namespace: shop}
spec: {address: 192.168.0.8, labels: {app: %s}}`
	sw.apply(fmt.Sprintf(vm2, "ratings"))
	if got, want := addrs(), []string{"10.244.0.30", "192.168.0.7", "192.168.0.8"}; !slices.Equal(got, want) {
		t.Fatalf("after adding ratings-vm-2: %v, want %v", got, want)
	}
	sw.apply(fmt.Sprintf(vm2, "other"))
	if got, want := addrs(), []string{"10.244.0.30", "192.168.0.7"}; !slices.Equal(got, want) {
		t.Fatalf("after relabelling ratings-vm-2: %v, want %v", got, want)
	}
}

package rules

import (
	"slices"
	"testing"

	"github.com/pilotfish-mesh/pilotfish/encode"
)

// TestFailoverLabelKeys: the keys every failoverPriority list of the
// snapshot names (top level, port level, subsets; "key=value" names key)
// are what classes keep, beside the security selectors' keys.
func TestFailoverLabelKeys(t *testing.T) {
	snap := lrLoad(t, map[string][]byte{"dr.yaml": []byte(`apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: a, namespace: shop}
spec:
  host: a.shop.svc.cluster.local
  trafficPolicy:
    loadBalancer: {localityLbSetting: {failoverPriority: [version, topology.istio.io/network]}}
    portLevelSettings:
    - port: {number: 80}
      loadBalancer: {localityLbSetting: {failoverPriority: [track=stable]}}
  subsets:
  - name: v1
    labels: {version: v1}
    trafficPolicy:
      loadBalancer: {localityLbSetting: {failoverPriority: [version, tier]}}
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: b, namespace: web}
spec:
  host: b.web.svc.cluster.local
  trafficPolicy: {loadBalancer: {simple: RANDOM}}
`)})
	want := []string{"tier", "topology.istio.io/network", "track", "version"}
	if got := FailoverLabelKeys(snap); !slices.Equal(got, want) {
		t.Fatalf("keys %q, want %q", got, want)
	}
	// A proxy of another namespace keeps them too (rules reach it through
	// exportTo), and only them and tlsMode.
	n := &Node{Namespace: "web", Labels: map[string]string{"version": "v1", "track": "canary", "pod-template-hash": "x", "app": "b"}}
	if got := securityLabels(snap, "istio-system", n); got != "track=canary\nversion=v1" {
		t.Fatalf("class labels %q", got)
	}
	if got := FailoverLabelKeys(lrLoad(t, map[string][]byte{"none.yaml": []byte(`apiVersion: v1
kind: Namespace
metadata: {name: shop}`)})); got != nil {
		t.Fatalf("keys %q without rules", got)
	}
}

// TestProxyFailoverLabels: the proxy's side of failoverPriority is its
// labels as istiod augments them: region, zone and subzone from its
// locality, its cluster, its network unless a label sets one.
func TestProxyFailoverLabels(t *testing.T) {
	entries := []string{encode.LabelTopologyNetwork, encode.LabelTopologyRegion, encode.LabelTopologyZone,
		encode.LabelTopologySubzone, encode.LabelTopologyCluster, "version=v9", "app"}
	cl := &encode.ProxyClass{Locality: "us-east/a/", ClusterID: "c1", Network: "net1"}
	got := failoverLabels(cl, map[string]string{"version": "v1", encode.LabelTopologySubzone: "rack-1"}, true, entries)
	if want := "net1\nus-east\na\nrack-1\nc1\nv1\n\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	got = failoverLabels(cl, map[string]string{encode.LabelTopologyNetwork: "net2"}, true, entries[:1])
	if got != "net2\n" {
		t.Errorf("a network label: got %q", got)
	}
	if got := failoverLabels(cl, nil, false, entries); got != "" {
		t.Errorf("without labels: got %q", got)
	}
	for _, tc := range []struct {
		class encode.ProxyClass
		want  bool
	}{
		{encode.ProxyClass{}, false},
		{encode.ProxyClass{Locality: "//"}, false},
		{encode.ProxyClass{Labels: "-"}, true},
		{encode.ProxyClass{Locality: "r//"}, true},
		{encode.ProxyClass{ClusterID: "Kubernetes"}, true},
		{encode.ProxyClass{Network: "n"}, true},
	} {
		sc := &Scope{Class: &tc.class}
		if _, has := proxyLabels(sc); has != tc.want {
			t.Errorf("class %+v: has labels %v, want %v", tc.class, has, tc.want)
		}
	}
}

package main

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pilotfish-mesh/pilotfish/internal/kubetest"
)

// TestMeshDiscoverySelectors: the discoverySelectors of ConfigMap
// istio-system/istio decide which namespaces' objects pilotfish reads from
// the API server, at start and when the ConfigMap or a namespace's labels
// change: a proxyless client reaches echo only while shop is selected.
func TestMeshDiscoverySelectors(t *testing.T) {
	c := kubetest.Start(t, kubetest.Options{IstioCRDs: true})
	m := newKubeMesh(t, c, true)
	c.EnsureNamespace(t, "istio-system")
	cms := c.Client.CoreV1().ConfigMaps("istio-system")
	meshCM := func(mesh string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "istio", Namespace: "istio-system"}, Data: map[string]string{"mesh": mesh}}
	}
	_, err := cms.Create(m.ctx(), meshCM("discoverySelectors:\n- matchLabels:\n    mesh: pilotfish\n"), metav1.CreateOptions{})
	m.check(err)

	s := startKubeServe(t, c.Kubeconfig, func(o *serveOptions) { o.inject.namespace, o.mesh.configMap = "istio-system", true })
	echoKnown := func() bool {
		_, body := get(t, s.http+"/debug/registryz")
		return bodyHas(body, "echo.shop.svc.cluster.local")
	}
	if echoKnown() {
		t.Fatal("echo of an unselected namespace is in the registry")
	}

	// The namespace joins the selection: its objects are read.
	ns, err := c.Client.CoreV1().Namespaces().Get(m.ctx(), kubeNS, metav1.GetOptions{})
	m.check(err)
	ns.Labels = map[string]string{"mesh": "pilotfish"}
	_, err = c.Client.CoreV1().Namespaces().Update(m.ctx(), ns, metav1.UpdateOptions{})
	m.check(err)
	h := grpcClient(t, s.grpc)
	eventually(t, "echo served once shop is selected", func() string {
		if got := answeredBy(h); got != "v1" && got != "v2" {
			return got
		}
		return ""
	})

	// The mesh config selects another label: shop leaves, echo goes.
	_, err = cms.Update(m.ctx(), meshCM("discoverySelectors:\n- matchLabels:\n    mesh: other\n"), metav1.UpdateOptions{})
	m.check(err)
	eventually(t, "echo gone once the selectors leave shop out", func() string {
		if echoKnown() {
			return "echo still in the registry"
		}
		return ""
	})

	// No selectors: every namespace again.
	_, err = cms.Update(m.ctx(), meshCM("{}\n"), metav1.UpdateOptions{})
	m.check(err)
	eventually(t, "echo back without selectors", func() string {
		if !echoKnown() {
			return "echo not in the registry"
		}
		return ""
	})
}

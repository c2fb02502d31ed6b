package ingest

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/pilotfish-mesh/pilotfish/index"

	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// realisticPod is a Pod as the API server returns an injected one: the
// managedFields, annotations, containers and status that the transform
// drops.
func realisticPod(i int) *corev1.Pod {
	name := fmt.Sprintf("reviews-v1-%d", i)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "shop", ResourceVersion: "12345", UID: "0f6a4c1e-5d1e-4f43-9a57-3c7fa4b2d1e0",
			Labels: map[string]string{"app": "reviews", "version": "v1", "pod-template-hash": "5d8f7c9b6",
				labelTLSMode: "istio", "service.istio.io/canonical-name": "reviews"},
			Annotations: map[string]string{
				annotationStatus:                    `{"initContainers":["istio-init"],"containers":["istio-proxy"],"volumes":["workload-socket","credential-socket","workload-certs","istio-envoy","istio-data","istio-podinfo","istio-token","istiod-ca-cert"],"imagePullSecrets":null,"revision":"default"}`,
				"kubectl.kubernetes.io/restartedAt": "2026-11-20T10:00:00Z",
				"prometheus.io/path":                "/stats/prometheus",
			},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet", Operation: "Update",
				FieldsV1: &metav1.FieldsV1{Raw: []byte(strings.Repeat(`{"f:status":{"f:conditions":{}}}`, 20))}}},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "reviews-v1-5d8f7c9b6", UID: "x"}},
		},
		Spec: corev1.PodSpec{
			NodeName: "node-1", ServiceAccountName: "reviews",
			Containers: []corev1.Container{
				{Name: "reviews", Image: "docker.io/istio/examples-bookinfo-reviews-v1:1.20.2",
					Ports: []corev1.ContainerPort{{ContainerPort: 9080}}, Env: []corev1.EnvVar{{Name: "LOG_DIR", Value: "/tmp/logs"}}},
				{Name: "istio-proxy", Image: "docker.io/istio/proxyv2:1.28.0", Args: []string{"proxy", "sidecar", "--domain", "$(POD_NAMESPACE).svc.cluster.local"}},
			},
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, PodIP: fmt.Sprintf("10.244.%d.%d", i/250, i%250+1), HostIP: "10.0.0.1",
			PodIPs: []corev1.PodIP{{IP: "10.244.0.1"}},
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodInitialized, Status: corev1.ConditionTrue},
				{Type: corev1.PodReady, Status: corev1.ConditionTrue},
				{Type: corev1.ContainersReady, Status: corev1.ConditionTrue},
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
			},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "reviews", Ready: true, Image: "reviews", ImageID: "sha256:0123456789abcdef"}},
		},
	}
}

func TestTransformPod(t *testing.T) {
	p := realisticPod(3)
	out, err := transformPod(p)
	if err != nil {
		t.Fatal(err)
	}
	kp := out.(*kubePod)
	want := kubePod{NodeName: "node-1", ServiceAccount: "reviews", PodIP: "10.244.0.4", Ready: true}
	if kp.NodeName != want.NodeName || kp.ServiceAccount != want.ServiceAccount || kp.PodIP != want.PodIP || !kp.Ready {
		t.Errorf("transformed pod = %+v, want %+v", *kp, want)
	}
	if kp.ManagedFields != nil || kp.OwnerReferences != nil || kp.UID != "" || len(kp.Annotations) != 1 ||
		kp.Annotations[annotationStatus] == "" || len(kp.Labels) != 5 || kp.ResourceVersion != "12345" {
		t.Errorf("transformed metadata = %+v", kp.ObjectMeta)
	}
	if again, _ := transformPod(kp); again != kp {
		t.Error("transform of a transformed pod is not the identity")
	}
	// The converter reads the same workload from the trimmed pod as from
	// the original.
	w := index.NewWriter()
	var b1, b2 index.Batch
	full := &Object{Kind: KindPod, Meta: realisticPod(3).ObjectMeta, Spec: realisticPod(3)}
	trimmed, _ := kubeObject(kp)
	NewConverter(w, "cluster.local").Put(&b1, full)
	NewConverter(w, "cluster.local").Put(&b2, trimmed)
	if g1, g2 := fmt.Sprintf("%+v", b1), fmt.Sprintf("%+v", b2); g1 != g2 {
		t.Errorf("workload from the trimmed pod differs:\n full    %s\n trimmed %s", g1, g2)
	}
}

func TestTransformServiceSliceIstio(t *testing.T) {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "reviews", Namespace: "shop",
			Annotations:   map[string]string{annotationExport: ".", "kubectl.kubernetes.io/last-applied-configuration": "{...}"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}},
		Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.1", Ports: []corev1.ServicePort{{Name: "http", Port: 80, NodePort: 30080}},
			SessionAffinity: corev1.ServiceAffinityClientIP, IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol}},
	}
	out, _ := transformService(svc)
	s := out.(*corev1.Service)
	if len(s.Annotations) != 1 || s.ManagedFields != nil || s.Spec.SessionAffinity != "" || s.Spec.IPFamilies != nil ||
		s.Spec.Ports[0].NodePort != 0 || s.Spec.ClusterIP != "10.96.0.1" {
		t.Errorf("transformed service = %+v", s)
	}
	es := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "reviews-1", Namespace: "shop", Labels: map[string]string{
			labelServiceName: "reviews", "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io"}},
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.244.0.1"}, NodeName: ptr.To("n"), Hostname: ptr.To("h"),
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Name: "reviews-0", UID: "u"}}},
	}
	es.Endpoints = append(es.Endpoints,
		discoveryv1.Endpoint{Addresses: []string{"10.244.0.2", "10.244.0.3"}, Zone: ptr.To("z"),
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(false), Serving: ptr.To(true), Terminating: ptr.To(true)}},
		discoveryv1.Endpoint{Addresses: []string{"not-an-ip"}})
	es.Ports = []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080)}}
	es.AddressType = discoveryv1.AddressTypeIPv4
	full := &Object{Kind: KindEndpointSlice, Meta: es.ObjectMeta, Spec: es.DeepCopy()}
	out, _ = transformEndpointSlice(es)
	ks := out.(*kubeSlice)
	if len(ks.Labels) != 1 || len(ks.Endpoints) != 2 || ks.Endpoints[0].Node != "n" || len(ks.Endpoints[1].More) != 1 {
		t.Errorf("transformed slice = %+v", ks)
	}
	if again, _ := transformEndpointSlice(ks); again != ks {
		t.Error("transform of a transformed slice is not the identity")
	}
	// The converter produces the same rows from the cached form.
	w := index.NewWriter()
	c1, c2 := NewConverter(w, "cluster.local"), NewConverter(w, "cluster.local")
	c1.setNodeLocality("n", "r/z1")
	c2.setNodeLocality("n", "r/z1")
	var b1, b2 index.Batch
	trimmed, _ := kubeObject(ks)
	c1.Put(&b1, full)
	c2.Put(&b2, trimmed)
	if g1, g2 := fmt.Sprintf("%+v", b1), fmt.Sprintf("%+v", b2); g1 != g2 {
		t.Errorf("rows from the cached slice differ:\n full    %s\n trimmed %s", g1, g2)
	}
	vs := &networkingv1.VirtualService{ObjectMeta: metav1.ObjectMeta{Name: "r", Annotations: map[string]string{"a": "b"}}}
	vs.Status.ObservedGeneration = 4
	out, _ = transformIstio(vs)
	if v := out.(*networkingv1.VirtualService); v.Annotations != nil || v.Status.ObservedGeneration != 0 {
		t.Errorf("transformed VirtualService = %+v", v)
	}
}

func TestNodeLocality(t *testing.T) {
	for _, tc := range []struct {
		labels map[string]string
		want   string
	}{
		{nil, ""},
		{map[string]string{labelRegion: "r", labelZone: "z"}, "r/z"},
		{map[string]string{labelRegionBeta: "r", labelZoneBeta: "z", labelSubzone: "s"}, "r/z/s"},
		{map[string]string{labelRegion: "r", labelRegionBeta: "old"}, "r/"},
	} {
		if got := nodeLocality(tc.labels); got != tc.want {
			t.Errorf("nodeLocality(%v) = %q, want %q", tc.labels, got, tc.want)
		}
	}
	c := &Converter{}
	c.setNodeLocality("n", "r/")
	if got := c.endpointLocality(ptr.To("n"), ptr.To("z")); got != "r/z" {
		t.Errorf("zone hint on a node without zone = %q, want r/z", got)
	}
	if got := c.endpointLocality(ptr.To("other"), ptr.To("z")); got != "/z" {
		t.Errorf("unknown node = %q, want /z", got)
	}
}

func TestChanged(t *testing.T) {
	a, _ := transformPod(realisticPod(1))
	p2 := realisticPod(1)
	p2.ResourceVersion = "12346"
	p2.Status.ContainerStatuses[0].RestartCount = 3 // status the converter does not read
	b, _ := transformPod(p2)
	if changed(a, b) {
		t.Error("a status-only pod update counts as a change")
	}
	p3 := realisticPod(1)
	p3.ResourceVersion = "12347"
	p3.Status.Conditions[1].Status = corev1.ConditionFalse
	c, _ := transformPod(p3)
	if !changed(a, c) {
		t.Error("a pod turning unready does not count as a change")
	}
	same := realisticPod(1)
	same.Labels = map[string]string{"x": "y"}
	d, _ := transformPod(same) // same resourceVersion: a resync
	if changed(a, d) {
		t.Error("an update with the same resourceVersion counts as a change")
	}
}

// TestKubeTransformHeap measures what the Pod transform saves: the heap
// held by 2,000 realistic Pods as decoded, and as the informer caches
// them. It asserts only the same-run ratio.
func TestKubeTransformHeap(t *testing.T) {
	const n = 2000
	heap := func(build func(i int) any) uint64 {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		keep := make([]any, n)
		for i := range keep {
			keep[i] = build(i)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(keep)
		return (after.HeapAlloc - before.HeapAlloc) / n
	}
	// The heap is shared with whatever earlier tests left running (fake
	// informers winding down free memory meanwhile), so one reading can be
	// off: each figure is the median of five.
	median := func(build func(i int) any) uint64 {
		var r [5]uint64
		for i := range r {
			r[i] = heap(build)
		}
		slices.Sort(r[:])
		return r[2]
	}
	full := median(func(i int) any { return realisticPod(i) })
	trimmed := median(func(i int) any { o, _ := transformPod(realisticPod(i)); return o })
	t.Logf("heap per cached Pod: %d bytes as decoded, %d transformed (%.1f×)", full, trimmed, float64(full)/float64(trimmed))
	if trimmed*3 > full {
		t.Errorf("transformed pod holds %d bytes, more than a third of the decoded pod's %d", trimmed, full)
	}
}

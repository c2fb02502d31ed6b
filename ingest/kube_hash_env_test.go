package ingest

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	networking "istio.io/api/networking/v1alpha3"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/pilotfish-mesh/pilotfish/index"
	"github.com/pilotfish-mesh/pilotfish/internal/kubetest"
)

// The environment of TestKubeRowHashes: a KubeSource on a real API server,
// objects written through the dynamic client, and each object's rows
// compared with those of its own conversion.

type kubeHashEnv struct {
	c    *kubetest.Cluster
	dyn  dynamic.Interface
	w    *index.Writer
	src  *KubeSource
	n    int           // markers handed out
	bars map[Kind]*bar // barrier objects, by kind
}

// bar is a barrier object: a change to it that the index shows proves
// that every earlier event of its kind has been applied.
type bar struct {
	marker string
	obj    runtime.Object
	flip   bool
}

func newKubeHashEnv(t *testing.T, c *kubetest.Cluster) *kubeHashEnv {
	cfg := rest.CopyConfig(c.Config)
	cfg.QPS, cfg.Burst = 1000, 2000
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"shop", "other", "specs", "pods"} {
		c.EnsureNamespace(t, ns)
	}
	ctx := context.Background()
	if _, err := c.Client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: probeNode,
		Labels: map[string]string{labelRegion: "region-1", labelZone: "zone-1"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e := &kubeHashEnv{c: c, dyn: dyn, w: index.NewWriter(), bars: map[Kind]*bar{}}
	e.src = NewKubeSource(e.w, KubeSourceOptions{Client: c.Client, Istio: c.Istio, Secrets: true,
		BatchWindow: time.Millisecond, DiscoveryInterval: 100 * time.Millisecond})
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- e.src.Run(rctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	deadline := time.Now().Add(time.Minute)
	for !e.src.Synced() {
		if time.Now().After(deadline) {
			t.Fatal("the source did not sync in a minute")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return e
}

func (e *kubeHashEnv) marker() string {
	e.n++
	return fmt.Sprintf("hc%03d", e.n)
}

func gvr(k Kind) k8sschema.GroupVersionResource {
	switch k {
	case KindService:
		return k8sschema.GroupVersionResource{Version: "v1", Resource: "services"}
	case KindEndpointSlice:
		return k8sschema.GroupVersionResource{Group: "discovery.k8s.io", Version: "v1", Resource: "endpointslices"}
	case KindPod:
		return k8sschema.GroupVersionResource{Version: "v1", Resource: "pods"}
	case KindNamespace:
		return k8sschema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	case KindSecret:
		return k8sschema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	}
	for _, ik := range istioKinds {
		if ik.kind == k {
			return k8sschema.FromAPIVersionAndKind(ik.groupVersion, "").GroupVersion().WithResource(ik.resource)
		}
	}
	panic("gvr " + k.String())
}

func (e *kubeHashEnv) resource(k Kind, ns string) dynamic.ResourceInterface {
	if !kinds[k].namespaced {
		return e.dyn.Resource(gvr(k))
	}
	return e.dyn.Resource(gvr(k)).Namespace(ns)
}

func toMap(t *testing.T, obj runtime.Object) map[string]any {
	t.Helper()
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// apiBase is kind k's base object, named marker, as the API server takes
// it: a Service's cluster IP allocated by the server, a ServiceEntry's host
// and an EndpointSlice's service its own.
func apiBase(t *testing.T, k Kind, marker string) runtime.Object {
	obj := base(t, k)
	m := reflect.ValueOf(obj).Elem().FieldByName("ObjectMeta").Addr().Interface().(*metav1.ObjectMeta)
	m.Name = marker
	switch o := obj.(type) {
	case *corev1.Pod:
		// Apart from the EndpointSlices, whose endpoints the index joins
		// with the Pods of their namespace by address.
		o.Namespace = "pods"
	case *corev1.Service:
		o.Spec.ClusterIP, o.Spec.ClusterIPs = "", nil
	case *discoveryv1.EndpointSlice:
		o.Labels[labelServiceName] = marker
	}
	if k == KindServiceEntry {
		specOf(obj).(*networking.ServiceEntry).Hosts = []string{marker + ".example.com"}
	}
	return obj
}

// create writes obj, and a Pod's status as a kubelet would.
func (e *kubeHashEnv) create(t *testing.T, k Kind, obj runtime.Object) error {
	m := toMap(t, obj)
	u := &unstructured.Unstructured{Object: m}
	ctx := context.Background()
	if _, err := e.resource(k, u.GetNamespace()).Create(ctx, u, metav1.CreateOptions{}); err != nil {
		return err
	}
	if status, ok := m["status"].(map[string]any); ok && k == KindPod && len(status) > 0 {
		return e.patch(k, u.GetNamespace(), u.GetName(), map[string]any{"status": status}, "status")
	}
	return nil
}

// update changes the object from from to to with merge patches (its
// status through the status subresource), so that fields the server
// defaulted are left alone.
func (e *kubeHashEnv) update(t *testing.T, k Kind, from, to runtime.Object) error {
	a, b := toMap(t, from), toMap(t, to)
	sa, _ := a["status"].(map[string]any)
	sb, _ := b["status"].(map[string]any)
	delete(a, "status")
	delete(b, "status")
	u := &unstructured.Unstructured{Object: b}
	if p := mergePatch(a, b); len(p) > 0 {
		if err := e.patch(k, u.GetNamespace(), u.GetName(), p, ""); err != nil {
			return err
		}
	}
	if p := mergePatch(sa, sb); len(p) > 0 {
		return e.patch(k, u.GetNamespace(), u.GetName(), map[string]any{"status": p}, "status")
	}
	return nil
}

func (e *kubeHashEnv) patch(k Kind, ns, name string, p map[string]any, sub string) error {
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	var subs []string
	if sub != "" {
		subs = []string{sub}
	}
	_, err = e.resource(k, ns).Patch(context.Background(), name, types.MergePatchType, b, metav1.PatchOptions{}, subs...)
	return err
}

// mergePatch is the JSON merge patch (RFC 7386) that turns a into b.
func mergePatch(a, b map[string]any) map[string]any {
	out := map[string]any{}
	for k, bv := range b {
		av, ok := a[k]
		am, aIsMap := av.(map[string]any)
		bm, bIsMap := bv.(map[string]any)
		switch {
		case aIsMap && bIsMap:
			if p := mergePatch(am, bm); len(p) > 0 {
				out[k] = p
			}
		case !ok || !reflect.DeepEqual(av, bv):
			out[k] = bv
		}
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			out[k] = nil
		}
	}
	return out
}

// rows renders the index's rows of the object marked marker.
func (e *kubeHashEnv) rows(marker string) string { return rowsOf(e.w.Snapshot(), marker) }

func rowsOf(s *index.Snapshot, marker string) string {
	re := regexp.MustCompile(`[ /]` + marker + `[ .]`)
	var out []string
	for _, l := range strings.Split(snapshotRows(s), "\n") {
		if re.MatchString(l) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// expect returns the rows the object marked marker should have: the
// object as the API server holds it now, converted alone into an index
// that shares the source's symbols (a row's hash covers symbol IDs), with
// the source's Node.
func (e *kubeHashEnv) expect(t *testing.T, k Kind, like runtime.Object, marker string) string {
	t.Helper()
	mo := reflect.ValueOf(like).Elem().FieldByName("ObjectMeta").Interface().(metav1.ObjectMeta)
	u, err := e.resource(k, mo.Namespace).Get(context.Background(), mo.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get %s %s: %v", k, mo.Name, err)
	}
	b, _ := u.MarshalJSON()
	obj := reflect.New(reflect.TypeOf(like).Elem()).Interface().(runtime.Object)
	if err := json.Unmarshal(b, obj); err != nil {
		t.Fatalf("decode %s %s: %v", k, mo.Name, err)
	}
	w := index.NewWriterSharing(e.w)
	p := &rowProbe{w: w, conv: NewConverter(w, "cluster.local")}
	p.conv.setNodeLocality(probeNode, "region-1/zone-1")
	p.put(informerObject(t, k, obj))
	return rowsOf(w.Snapshot(), marker)
}

// await waits until cond holds of the rows of marker, for at most 30s.
func (e *kubeHashEnv) await(t *testing.T, marker, what string, cond func(string) bool) bool {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond(e.rows(marker)) {
		if time.Now().After(deadline) {
			t.Errorf("%s: not seen in 30s; rows of %s:\n%s\nsource errors: %v", what, marker, e.rows(marker), e.src.Errors())
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}

// barrier changes kind k's barrier object and waits until the index shows
// it: every event of kind k written before has been applied by then.
func (e *kubeHashEnv) barrier(t *testing.T, k Kind) {
	t.Helper()
	b := e.bars[k]
	if b == nil {
		b = &bar{marker: e.marker()}
		b.obj = apiBase(t, k, b.marker)
		if err := e.create(t, k, b.obj); err != nil {
			t.Fatalf("barrier %s: %v", k, err)
		}
		want := e.expect(t, k, b.obj, b.marker)
		e.await(t, b.marker, "barrier "+k.String(), func(r string) bool { return r == want })
		e.bars[k] = b
	}
	before := e.expect(t, k, b.obj, b.marker)
	next := b.obj.DeepCopyObject()
	b.flip = !b.flip
	switch o := next.(type) {
	case *discoveryv1.EndpointSlice:
		addr := "10.244.1.1"
		if b.flip {
			addr = "10.244.1.2"
		}
		o.Endpoints[0].Addresses = []string{addr}
	case *corev1.Secret:
		o.Data["tls.crt"] = fmt.Appendf(nil, "%v", b.flip)
	default:
		withMetaInPlace(next, func(m *metav1.ObjectMeta) { m.Labels["barrier"] = fmt.Sprint(b.flip) })
	}
	if err := e.update(t, k, b.obj, next); err != nil {
		t.Fatalf("barrier %s: %v", k, err)
	}
	b.obj = next
	want := e.expect(t, k, next, b.marker)
	if want == before {
		t.Fatalf("barrier %s: the change does not move its rows", k)
	}
	e.await(t, b.marker, "barrier "+k.String(), func(r string) bool { return r == want })
}

func withMetaInPlace(obj runtime.Object, change func(*metav1.ObjectMeta)) {
	change(reflect.ValueOf(obj).Elem().FieldByName("ObjectMeta").Addr().Interface().(*metav1.ObjectMeta))
}

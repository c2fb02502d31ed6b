package ingest

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	networking "istio.io/api/networking/v1alpha3"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

// TestKubeRowHashes runs the row-hash checks of convert_hash_test.go
// against a real API server (internal/kubetest), through a running
// KubeSource: each change is written through the API and must reach (or,
// for what no converter reads, must not reach) the index's rows.
func TestKubeRowHashes(t *testing.T) {
	c := kubetest.Start(t, kubetest.Options{IstioCRDs: true})
	e := newKubeHashEnv(t, c)
	t.Run("Metadata", e.metadata)
	t.Run("KubeFields", e.kubeFields)
	t.Run("IstioNames", e.istioNames)
	t.Run("IstioSpecs", e.istioSpecs)
	t.Run("DryRunFlip", e.dryRunFlip)
}

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

// change writes from and waits until the index holds its rows, writes
// to, and checks that the rows move (moves) and the index shows the new
// ones, or that they stay (after a barrier). It returns the API server's
// refusal of the update, if it refused it.
func (e *kubeHashEnv) change(t *testing.T, k Kind, name string, from, to runtime.Object, marker string, moves bool) error {
	t.Helper()
	if err := e.create(t, k, from); err != nil {
		t.Fatalf("%s, %s: create: %v", k, name, err)
	}
	before := e.expect(t, k, from, marker)
	if before == "" {
		t.Errorf("%s, %s: the object has no rows", k, name)
		return nil
	}
	if !e.await(t, marker, fmt.Sprintf("%s, %s: the object", k, name), func(r string) bool { return r == before }) {
		return nil
	}
	if err := e.update(t, k, from, to); err != nil {
		return err
	}
	after := e.expect(t, k, to, marker)
	if moves {
		if after == before {
			t.Errorf("%s, %s: the change does not move the rows:\n%s", k, name, before)
			return nil
		}
		e.await(t, marker, fmt.Sprintf("%s, %s: the change", k, name), func(r string) bool { return r == after })
		return nil
	}
	if after != before {
		t.Errorf("%s, %s: a change no converter reads moves the rows:\n before %s\n after  %s", k, name, before, after)
	}
	e.barrier(t, k)
	if got := e.rows(marker); got != before {
		t.Errorf("%s, %s: the index's rows moved on a change no converter reads:\n before %s\n after  %s", k, name, before, got)
	}
	return nil
}

// metadata: metaChanges through the API server. The name and namespace
// of an object cannot change (istioNames checks that they are hashed),
// and the API server owns generation and resourceVersion (every update
// here moves resourceVersion; a spec change moves generation).
func (e *kubeHashEnv) metadata(t *testing.T) {
	for k := KindUnknown + 1; k < numKinds; k++ {
		for _, c := range metaChanges(t, k) {
			switch c.name {
			case "name", "namespace", "generation", "resourceVersion":
				continue
			}
			m := e.marker()
			from := withMeta(apiBase(t, k, m), c.from)
			to := withMeta(from, c.to)
			if err := e.change(t, k, c.name, from, to, m, c.moves); err != nil {
				t.Errorf("%s, %s: the API server refused the update: %v", k, c.name, err)
			}
		}
	}
}

// apiServerRefuses are the field cases whose update the API server
// refuses, and why: TestRowHashCoversKubeFields covers them from the API
// server's JSON without the server.
var apiServerRefuses = map[string]string{
	"Service/type":              "a Service becomes ExternalName only without its cluster IP",
	"Service/clusterIP":         "spec.clusterIP is immutable",
	"Service/clusterIPs":        "spec.clusterIPs is immutable (and the cluster is single-stack)",
	"EndpointSlice/addressType": "addressType is immutable",
	"Pod/nodeName":              "a Pod's spec is immutable but for a few fields",
	"Pod/serviceAccountName":    "a Pod's spec is immutable but for a few fields",
}

// kubeFields: kubeFieldCases through the API server.
func (e *kubeHashEnv) kubeFields(t *testing.T) {
	refused := map[string]bool{}
	cases := kubeFieldCases()
	for _, k := range slices.Sorted(maps.Keys(cases)) {
		for _, c := range cases[k] {
			if c.fileOnly {
				continue
			}
			m := e.marker()
			from := apiBase(t, k, m)
			if c.from != nil {
				c.from(from)
			}
			to := from.DeepCopyObject()
			c.to(to)
			id := k.String() + "/" + strings.ReplaceAll(c.name, " ", "")
			if err := e.change(t, k, c.name, from, to, m, true); err != nil {
				if !apierrors.IsInvalid(err) && !apierrors.IsForbidden(err) && !apierrors.IsBadRequest(err) {
					t.Errorf("%s: %v", id, err)
				}
				t.Logf("%s: refused: %v", id, err)
				refused[id] = true
			}
		}
	}
	for id := range refused {
		if apiServerRefuses[id] == "" {
			t.Errorf("the API server refused %s, which apiServerRefuses does not list", id)
		}
	}
	for id := range apiServerRefuses {
		if !refused[id] {
			t.Errorf("the API server took %s, which apiServerRefuses lists: delete it there", id)
		}
	}
}

// istioNames: an Istio object's namespace and name are part of its config
// row's hash: copies of one object under another name and in another
// namespace have three different hashes.
func (e *kubeHashEnv) istioNames(t *testing.T) {
	for _, k := range istioKindList() {
		m1, m2 := e.marker(), e.marker()
		a := apiBase(t, k, m1)
		b := withMeta(a, func(m *metav1.ObjectMeta) { m.Name = m2 })
		c := withMeta(a, func(m *metav1.ObjectMeta) { m.Namespace = "other" })
		for _, o := range []runtime.Object{a, b, c} {
			if err := e.create(t, k, o); err != nil {
				t.Fatalf("%s: %v", k, err)
			}
		}
		kind := configKinds[k]
		hash := func(ns, name string) uint64 {
			s := e.w.Snapshot()
			nsSym, _ := s.Symbols.Lookup(ns)
			nameSym, _ := s.Symbols.Lookup(name)
			if r, ok := s.Config(kind, index.ConfigKey{Namespace: nsSym, Name: nameSym}); ok {
				return r.Hash
			}
			return 0
		}
		deadline := time.Now().Add(30 * time.Second)
		for hash("shop", m1) == 0 || hash("shop", m2) == 0 || hash("other", m1) == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%s: the three objects did not all reach the index: %v", k, e.src.Errors())
			}
			time.Sleep(5 * time.Millisecond)
		}
		if h1, h2, h3 := hash("shop", m1), hash("shop", m2), hash("other", m1); h1 == h2 || h1 == h3 || h2 == h3 {
			t.Errorf("%s: config row hashes %x (shop/%s), %x (shop/%s), %x (other/%s) are not all different", k, h1, m1, h2, m2, h3, m1)
		}
	}
}

// istioSpecs: every spec field of TestRowHashCoversIstioSpecs, written to
// the API server and read back as an informer reads it: the server keeps
// the field, and the object as the informer caches it moves the config
// row's hash. A value the CRD's schema refuses is tried with setter's
// other value, and counted.
func (e *kubeHashEnv) istioSpecs(t *testing.T) {
	for _, k := range istioKindList() {
		t.Run(k.String(), func(t *testing.T) {
			ri := e.resource(k, "specs")
			get := func(name string) runtime.Object {
				u, err := ri.Get(context.Background(), name, metav1.GetOptions{})
				if err != nil {
					t.Fatalf("get %s: %v", name, err)
				}
				b, _ := u.MarshalJSON()
				obj, _, _ := istioTyped(k)
				if err := json.Unmarshal(b, obj); err != nil {
					t.Fatalf("decode %s: %v", name, err)
				}
				return obj
			}
			b := withMeta(istioBase(t, k), func(m *metav1.ObjectMeta) { m.Namespace, m.Name = "specs", "base" })
			if err := e.create(t, k, b); err != nil {
				t.Fatal(err)
			}
			p := newRowProbe()
			p.put(informerObject(t, k, get("base")))
			written, refused := 0, []string(nil)
			for i, s := range specSetters(specOf(b).ProtoReflect().Descriptor()) {
				name := fmt.Sprintf("v%04d", i)
				var sent runtime.Object
				var err error
				created := false
				for _, alt := range []bool{false, true} {
					cand := withMeta(b, func(m *metav1.ObjectMeta) { m.Name = name })
					s.set(specOf(cand).ProtoReflect(), alt)
					if proto.Equal(specOf(cand), specOf(b)) {
						continue
					}
					sent = cand
					if err = e.create(t, k, sent); err == nil {
						created = true
						break
					}
					if !apierrors.IsInvalid(err) {
						break
					}
				}
				if !created {
					switch {
					case err == nil:
						t.Errorf("%s: cannot set to a value other than the base's", s.path)
					case !apierrors.IsInvalid(err):
						t.Errorf("%s: %v", s.path, err)
					default:
						refused = append(refused, s.path+" ("+err.Error()+")")
					}
					continue
				}
				written++
				got := get(name)
				if !proto.Equal(specOf(got), specOf(sent)) {
					t.Errorf("%s: the API server changed the spec:\n sent %v\n got  %v", s.path, specOf(sent), specOf(got))
					continue
				}
				named := withMeta(got, func(m *metav1.ObjectMeta) { m.Name = "base" }) // one row: only the spec differs
				if !p.put(informerObject(t, k, named)) {
					t.Errorf("%s: no change to the index", s.path)
				}
				p.put(informerObject(t, k, get("base")))
			}
			t.Logf("%d fields written through the API server; refused by the CRD's validation with both values: %d %v",
				written, len(refused), refused)
		})
	}
}

// dryRunFlip: an AuthorizationPolicy annotated istio.io/dry-run from the
// API server is a dry-run row, and an update of the annotation alone
// (generation unchanged) switches it to enforced and back.
func (e *kubeHashEnv) dryRunFlip(t *testing.T) {
	m := e.marker()
	ap := withMeta(apiBase(t, KindAuthorizationPolicy, m), setAnnotation(annotationDryRun, "true"))
	if err := e.create(t, KindAuthorizationPolicy, ap); err != nil {
		t.Fatal(err)
	}
	dryRun := func() (bool, bool) {
		s := e.w.Snapshot()
		ns, _ := s.Symbols.Lookup("shop")
		name, _ := s.Symbols.Lookup(m)
		r, ok := s.Config(index.ConfigAuthorizationPolicy, index.ConfigKey{Namespace: ns, Name: name})
		return ok && r.DryRun, ok
	}
	wait := func(want bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			if got, ok := dryRun(); ok && got == want {
				return
			}
			if time.Now().After(deadline) {
				got, ok := dryRun()
				t.Fatalf("dry-run row %v (present %v), want %v; errors %v", got, ok, want, e.src.Errors())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	wait(true)
	prev := ap
	for _, v := range []string{"false", "true"} {
		next := withMeta(prev, setAnnotation(annotationDryRun, v))
		if err := e.update(t, KindAuthorizationPolicy, prev, next); err != nil {
			t.Fatal(err)
		}
		wait(v == "true")
		prev = next
	}
}

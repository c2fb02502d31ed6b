package ingest

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

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
	"Secret/type":               "a Secret's type is immutable",
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

package ingest

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	"github.com/pilotfish-mesh/pilotfish/index"
)

// What the Kubernetes source reads of what its informers see, as istiod
// decides it:
//
//   - Discovery selectors (MeshConfig.discoverySelectors): a namespace is
//     selected when its labels match any of the selectors, every namespace
//     when there are none. The objects of a namespace that is not selected
//     (its Services, EndpointSlices, Pods, Secrets, Istio config, and the
//     Namespace itself) are not converted: the index holds none of them.
//     There is no exception for the root or system namespace (istiod has
//     none either: select it to read its mesh-wide policies). Nodes are
//     cluster-scoped and always read. A namespace relabelled into or out
//     of selection, or a change of the selectors (SetDiscoverySelectors),
//     adds or removes its objects in the next batch.
//   - Revisions (revision.go): an Istio object labelled istio.io/rev for
//     another revision is not converted.
//
// Like istiod, the informers still list and watch every namespace, and
// the selection is applied to what they deliver; but what they cache of a
// namespace that is not selected is a stub (kube_stub.go), and an Istio
// object of another revision is cached without its spec
// (transformRevision), since only a change of its own labels can make it
// readable and that change arrives with the whole object.

// selectors are compiled discovery selectors; nil selects every namespace.
type selectors []labels.Selector

func (sel selectors) match(l map[string]string) bool {
	if sel == nil {
		return true
	}
	for _, s := range sel {
		if s.Matches(labels.Set(l)) {
			return true
		}
	}
	return false
}

// compileSelectors turns discovery selectors into label selectors; none
// (an empty list) selects every namespace. An invalid selector is an error
// naming it.
func compileSelectors(in []*metav1.LabelSelector) (selectors, error) {
	if len(in) == 0 {
		return nil, nil
	}
	out := make(selectors, 0, len(in))
	for i, ls := range in {
		if ls == nil {
			ls = &metav1.LabelSelector{} // as an empty selector written in YAML: every namespace
		}
		s, err := metav1.LabelSelectorAsSelector(ls)
		if err != nil {
			return nil, fmt.Errorf("discoverySelectors[%d]: %w", i, err)
		}
		out = append(out, s)
	}
	return out, nil
}

// SetDiscoverySelectors makes the source read only the namespaces whose
// labels match at least one of sel (all of them when sel is empty), as
// istiod reads MeshConfig.discoverySelectors. It may be called at any
// time, before or while the source runs: the next batch adds the objects
// of the namespaces that become selected and removes those of the
// namespaces that no longer are, in one index change set. An invalid
// selector is an error and changes nothing.
func (s *KubeSource) SetDiscoverySelectors(sel []*metav1.LabelSelector) error {
	compiled, err := compileSelectors(sel)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.selectors, s.reselect = compiled, true
	s.mu.Unlock()
	s.signal()
	return nil
}

// selection is which namespaces the source reads (run goroutine only).
type selection struct {
	sel selectors       // nil: every namespace
	ns  map[string]bool // namespaces selected, when sel is not nil
	set bool            // computed once: a change re-applies what it moves
}

func (n *selection) admits(ns string) bool { return ns == "" || n.sel == nil || n.ns[ns] }

// admitted reports whether the source reads the object of key k.
func (s *KubeSource) admitted(k ObjectKey) bool {
	if k.Kind == KindNamespace {
		return s.sel.admits(k.Name)
	}
	return s.sel.admits(k.Namespace)
}

// updateSelection brings the selection up to date with the selectors
// (when reselect) and with the Namespaces of this batch, and adds to b the
// objects whose namespace it moved: put when selected, removed when not.
// Objects of pending are left to the batch, which applies them with the
// new selection.
func (s *KubeSource) updateSelection(b *index.Batch, pending map[ObjectKey]any, reselect bool, sel selectors) {
	old := s.sel
	moved := map[string]bool{}
	switch {
	case reselect:
		s.sel = selection{sel: sel, set: true}
		if sel != nil {
			s.sel.ns = map[string]bool{}
			for _, obj := range s.namespaceObjects() {
				if sel.match(obj.Labels) {
					s.sel.ns[obj.Name] = true
				}
			}
		}
		s.publishView()
		if !old.set {
			s.publishSelection()
			return // the initial sync: every object is pending
		}
	case s.sel.sel == nil:
		return // every namespace is selected, whatever its labels
	default:
		for k, obj := range pending {
			if k.Kind != KindNamespace {
				continue
			}
			ns, _ := obj.(*corev1.Namespace)
			now := ns != nil && s.sel.sel.match(ns.Labels)
			if now != s.sel.ns[k.Name] {
				if now {
					s.sel.ns[k.Name] = true
				} else {
					delete(s.sel.ns, k.Name)
				}
				moved[k.Name] = true
			}
		}
		if len(moved) == 0 {
			return
		}
		s.publishView()
	}
	s.publishSelection()
	changedNS := func(ns string) bool {
		if reselect {
			return old.admits(ns) != s.sel.admits(ns)
		}
		return moved[ns]
	}
	s.mu.Lock()
	watches := make([]*kubeWatch, 0, len(s.running))
	for kind, w := range s.running {
		if kind != KindUnknown {
			watches = append(watches, w)
		}
	}
	s.mu.Unlock()
	n := 0
	for _, w := range watches {
		for _, obj := range w.informer.GetStore().List() {
			k, ok := objectKey(w.kind, obj)
			if !ok || hasKey(pending, k) {
				continue
			}
			ns := k.Namespace
			if k.Kind == KindNamespace {
				ns = k.Name
			}
			if ns == "" || !changedNS(ns) {
				continue
			}
			s.apply(b, k, s.view(w, obj))
			n++
		}
	}
	s.log.Info("discovery selection changed", "namespaces-selected", s.selectedCount(), "objects-moved", n)
}

// setSkipped records that the Istio object k is not read for its
// revision rev; "" forgets it.
func (s *KubeSource) setSkipped(k ObjectKey, rev string) {
	// Only the run goroutine writes skipped, so it may read it unlocked:
	// the common case (nothing to record or forget) takes no lock.
	_, had := s.skipped[k]
	if !had && rev == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case rev != "":
		s.skipped[k] = rev
		if !had {
			s.log.Debug("config not read: labelled for another revision", "object", k.String(), "istio.io/rev", rev)
		}
	case had:
		delete(s.skipped, k)
	}
}

// namespaceObjects lists the cached Namespaces.
func (s *KubeSource) namespaceObjects() []*corev1.Namespace {
	s.mu.Lock()
	w := s.running[KindNamespace]
	s.mu.Unlock()
	if w == nil {
		return nil
	}
	var out []*corev1.Namespace
	for _, obj := range w.informer.GetStore().List() {
		if ns, ok := s.view(w, obj).(*corev1.Namespace); ok {
			out = append(out, ns)
		}
	}
	return out
}

func (s *KubeSource) selectedCount() any {
	if s.sel.sel == nil {
		return "all"
	}
	return len(s.sel.ns)
}

// publishSelection records, for Errors, which namespaces are not read.
func (s *KubeSource) publishSelection() {
	var err error
	if s.sel.sel != nil {
		var out []string
		all := s.namespaceObjects()
		for _, ns := range all {
			if !s.sel.ns[ns.Name] {
				out = append(out, ns.Name)
			}
		}
		slices.Sort(out)
		if len(out) > 0 {
			shown := out[:min(len(out), maxSkippedShown)]
			more := ""
			if len(out) > len(shown) {
				more = fmt.Sprintf(", and %d more", len(out)-len(shown))
			}
			err = &Error{Pos: Position{File: "kubernetes"}, cause: ErrIgnored, Message: fmt.Sprintf(
				"discoverySelectors select %d of %d namespaces: the objects of the others are not read (%s%s)",
				len(all)-len(out), len(all), strings.Join(shown, ", "), more)}
		}
	}
	s.mu.Lock()
	s.selectionNote = err
	s.mu.Unlock()
}

// transformRevision is an Istio kind's transform for a source of revision
// rev: an object labelled for another revision is cached without its spec
// (it is never converted while that label stays, and a change of the
// label delivers the whole object again).
func transformRevision(rev string) func(any) (any, error) {
	return func(obj any) (any, error) {
		obj, err := transformIstio(obj)
		if err != nil || rev == "" {
			return obj, err
		}
		if o, ok := kubeObject(obj); ok && !inRevision(o.Meta.Labels, rev) {
			if m, ok := o.Spec.(proto.Message); ok {
				proto.Reset(m) // o.Spec points into the cached object
			}
		}
		return obj, nil
	}
}

// primeSelection, before the informers of namespaced kinds start, applies
// the discovery selectors given at construction to the transforms, so
// that the first lists cache the objects of namespaces left out as stubs:
// it waits for the Namespace informer's list. It returns false when ctx
// ends first.
func (s *KubeSource) primeSelection(ctx context.Context) bool {
	s.mu.Lock()
	sel, pending := s.selectors, s.reselect
	w := s.running[KindNamespace]
	s.mu.Unlock()
	if !pending || sel == nil || w == nil || s.opts.KeepWholeObjects {
		return true
	}
	if !cache.WaitForCacheSync(ctx.Done(), w.reg.HasSynced) {
		return false
	}
	v := &nsView{ns: map[string]bool{}}
	for _, ns := range s.namespaceObjects() {
		if sel.match(ns.Labels) {
			v.ns[ns.Name] = true
		}
	}
	s.nsView.Store(v)
	return true
}

package ingest

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
)

// Objects of namespaces the discovery selectors leave out are not held.
// The informers still list and watch every namespace (as istiod's do),
// but their transforms cache such an object as a kubeStub: its identity
// and resourceVersion, about 200 bytes whatever the object. When a
// namespace becomes selected, its stubs are replaced by whole objects
// listed from the API server (one namespace-scoped list per kind), each
// taken only if it is the very version the informer holds (same
// resourceVersion), so that nothing older than what the watch delivered
// is ever converted; a stub whose version moved on is fetched again in a
// later batch, by when the watch has delivered it whole or caught up.
// When a namespace stops being selected, its cached objects become stubs
// as their next events arrive (or at the next relist): the index drops
// them at once, the caches over time.

// kubeStub stands in an informer cache for an object of a namespace that
// is not selected.
type kubeStub struct {
	metav1.ObjectMeta // name, namespace, resourceVersion
}

func (s *kubeStub) GetObjectKind() k8sschema.ObjectKind { return k8sschema.EmptyObjectKind }

func (s *kubeStub) DeepCopyObject() runtime.Object {
	c := *s
	return &c
}

// nsView is the selection as the transforms read it: immutable once
// published (KubeSource.view).
type nsView struct {
	all bool
	ns  map[string]bool
}

// publishView makes the transforms follow the selection s.sel.
func (s *KubeSource) publishView() {
	v := &nsView{all: s.sel.sel == nil, ns: s.sel.ns}
	if !v.all {
		v.ns = make(map[string]bool, len(s.sel.ns))
		for ns := range s.sel.ns {
			v.ns[ns] = true
		}
	}
	s.nsView.Store(v)
}

// stubbing wraps the transform of a namespaced kind: an object of a
// namespace the selection leaves out is cached as a kubeStub.
func stubbing(view *atomic.Pointer[nsView], kind Kind, t cache.TransformFunc) cache.TransformFunc {
	if kind == KindNamespace || kind == KindUnknown {
		return t // Namespaces are the selection's input; Nodes are cluster-scoped
	}
	return func(obj any) (any, error) {
		if m, ok := obj.(metav1.Object); ok {
			if v := view.Load(); v != nil && !v.all && !v.ns[m.GetNamespace()] {
				if _, isStub := obj.(*kubeStub); isStub {
					return obj, nil
				}
				return &kubeStub{ObjectMeta: metav1.ObjectMeta{Name: m.GetName(), Namespace: m.GetNamespace(),
					ResourceVersion: m.GetResourceVersion()}}, nil
			}
		}
		return t(obj)
	}
}

// refetch replaces the stubs that applyOwn met in selected namespaces by
// the whole objects, handed to apply: one list per kind and namespace,
// each object taken only when the informer still holds the stub of that
// very version. It runs inside a flush (a rare event: a namespace joined
// the selection), which waits for its lists.
func (s *KubeSource) refetch(ctx context.Context, apply func(ObjectKey, any)) {
	want := s.stubbed
	s.stubbed = nil
	type group struct {
		kind Kind
		ns   string
	}
	groups := map[group][]ObjectKey{}
	for _, k := range want {
		g := group{k.Kind, k.Namespace}
		groups[g] = append(groups[g], k)
	}
	for g, keys := range groups {
		s.mu.Lock()
		w := s.running[g.kind]
		s.mu.Unlock()
		if w == nil {
			continue
		}
		listed, err := s.listNamespace(ctx, g.kind, g.ns)
		if err != nil {
			s.log.Warn("cannot list a newly selected namespace; retrying in a second", "kind", g.kind.String(), "namespace", g.ns, "err", err)
			time.AfterFunc(time.Second, func() {
				s.mu.Lock()
				for _, k := range keys {
					if _, queued := s.pending[k]; !queued {
						if cur, exists, _ := w.informer.GetStore().GetByKey(k.Namespace + "/" + k.Name); exists {
							s.pending[k] = cur
						}
					}
				}
				s.mu.Unlock()
				s.signal()
			})
			continue
		}
		byName := make(map[string]any, len(listed))
		for _, obj := range listed {
			if m, ok := obj.(metav1.Object); ok {
				byName[m.GetName()] = obj
			}
		}
		for _, k := range keys {
			cur, exists, _ := w.informer.GetStore().GetByKey(k.Namespace + "/" + k.Name)
			if !exists {
				continue // deleted: the watch's delete settles it
			}
			next := cur
			if stub, isStub := cur.(*kubeStub); isStub {
				// A version other than the stub's: the watch has it to
				// deliver, and its event brings the stub back here or
				// the whole object.
				got, ok := byName[k.Name]
				if !ok || got.(metav1.Object).GetResourceVersion() != stub.ResourceVersion {
					continue
				}
				full, err := w.transform(got)
				if err != nil {
					continue
				}
				next = full
			}
			// A newer event pending since is applied by the next batch.
			apply(k, next)
		}
	}
}

// listNamespace lists the objects of kind in namespace ns from the API
// server, as the kind's informer would (the Secrets with its field
// selector).
func (s *KubeSource) listNamespace(ctx context.Context, kind Kind, ns string) ([]any, error) {
	opts := metav1.ListOptions{}
	c, ic := s.opts.Client, s.opts.Istio
	switch kind {
	case KindPod:
		l, err := c.CoreV1().Pods(ns).List(ctx, opts)
		return items(l, err, func() []any { return ptrs(l.Items) })
	case KindService:
		l, err := c.CoreV1().Services(ns).List(ctx, opts)
		return items(l, err, func() []any { return ptrs(l.Items) })
	case KindEndpointSlice:
		l, err := c.DiscoveryV1().EndpointSlices(ns).List(ctx, opts)
		return items(l, err, func() []any { return ptrs(l.Items) })
	case KindSecret:
		opts.FieldSelector = secretFieldSelector
		l, err := c.CoreV1().Secrets(ns).List(ctx, opts)
		return items(l, err, func() []any { return ptrs(l.Items) })
	case KindEnvoyFilter:
		l, err := ic.NetworkingV1alpha3().EnvoyFilters(ns).List(ctx, opts)
		return items(l, err, func() []any { return anys(l.Items) })
	case KindWasmPlugin:
		l, err := ic.ExtensionsV1alpha1().WasmPlugins(ns).List(ctx, opts)
		return items(l, err, func() []any { return anys(l.Items) })
	case KindTelemetry:
		l, err := ic.TelemetryV1().Telemetries(ns).List(ctx, opts)
		return items(l, err, func() []any { return anys(l.Items) })
	case KindVirtualService:
		l, err := ic.NetworkingV1().VirtualServices(ns).List(ctx, opts)
		return items(l, err, func() []any { return anys(l.Items) })
	case KindDestinationRule:
		l, err := ic.NetworkingV1().DestinationRules(ns).List(ctx, opts)
		return items(l, err, func() []any { return anys(l.Items) })
	case KindGateway:
		l, err := ic.NetworkingV1().Gateways(ns).List(ctx, opts)
		return items(l, err, func() []any { return anys(l.Items) })
	case KindSidecar:
		l, err := ic.NetworkingV1().Sidecars(ns).List(ctx, opts)
		return items(l, err, func() []any { return anys(l.Items) })
	case KindServiceEntry:
		l, err := ic.NetworkingV1().ServiceEntries(ns).List(ctx, opts)
		return items(l, err, func() []any { return anys(l.Items) })
	case KindWorkloadEntry:
		l, err := ic.NetworkingV1().WorkloadEntries(ns).List(ctx, opts)
		return items(l, err, func() []any { return anys(l.Items) })
	case KindAuthorizationPolicy:
		l, err := ic.SecurityV1().AuthorizationPolicies(ns).List(ctx, opts)
		return items(l, err, func() []any { return anys(l.Items) })
	case KindPeerAuthentication:
		l, err := ic.SecurityV1().PeerAuthentications(ns).List(ctx, opts)
		return items(l, err, func() []any { return anys(l.Items) })
	case KindRequestAuthentication:
		l, err := ic.SecurityV1().RequestAuthentications(ns).List(ctx, opts)
		return items(l, err, func() []any { return anys(l.Items) })
	}
	return nil, fmt.Errorf("no list for kind %s", kind)
}

func items[L any](l L, err error, get func() []any) ([]any, error) {
	if err != nil {
		return nil, err
	}
	return get(), nil
}

func ptrs[T any](in []T) []any {
	out := make([]any, len(in))
	for i := range in {
		out[i] = &in[i]
	}
	return out
}

// anys is a list's items that are pointers already (istio.io/client-go's).
func anys[T any](in []*T) []any {
	out := make([]any, len(in))
	for i, p := range in {
		out[i] = p
	}
	return out
}

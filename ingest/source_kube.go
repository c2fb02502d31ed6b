package ingest

import (
	"context"
	"log/slog"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pilotfish-mesh/pilotfish/index"
	istioclient "istio.io/client-go/pkg/clientset/versioned"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// KubeSourceOptions configure a KubeSource.
type KubeSourceOptions struct {
	// Client reads the core kinds (required).
	Client kubernetes.Interface
	// Istio reads the Istio kinds; nil watches the core kinds only.
	Istio istioclient.Interface
	// DomainSuffix is the cluster DNS domain; default "cluster.local".
	DomainSuffix string
	// BatchWindow is how long the source collects informer events after
	// the first of a burst before applying them as one batch; default 10ms.
	// (The engine debounces pushes on top of it.)
	BatchWindow time.Duration
	// DiscoveryInterval is how often the API server's discovery is polled
	// for Istio CRDs installed or removed after start; default 10s.
	DiscoveryInterval time.Duration
	Logger            *slog.Logger
	// KeepWholeObjects caches objects as the API server sends them and cuts
	// them down only when they are converted: it exists to measure what the
	// transforms save, at a cost in memory and CPU no server should pay.
	KeepWholeObjects bool
	// Secrets watches Secrets for gateway credentials (credentialName).
	// It needs get, list and watch on secrets cluster-wide; only the
	// credential keys of each are kept.
	Secrets bool
	// Precedence, shared with a FileSource writing to the same Writer,
	// makes the API server's definition of an object win over the
	// directory's (precedence.go); nil when this is the only source.
	Precedence *Precedence
	// Revision is the control plane's revision (istiod's REVISION): an
	// Istio object labelled istio.io/rev with another value is not read
	// (revision.go); "" reads them all.
	Revision string
	// DiscoverySelectors are the initial discovery selectors
	// (SetDiscoverySelectors): only the namespaces matching one of them
	// are read; none reads every namespace. Invalid selectors are logged
	// and every namespace is read, as istiod does.
	DiscoverySelectors []*metav1.LabelSelector
}

// KubeSource applies the objects of a Kubernetes API server to the index
// and keeps it current: Services, EndpointSlices, Pods, Namespaces and
// Nodes (for locality), and every Istio kind pilotfish reads once its CRD
// is served. Informer events are collected and applied as one batch per
// burst, through its own Converter, to a Writer it may share with other
// sources. Invalid Istio objects are reported by Errors and skipped; the
// last good version of each is kept. Istio objects of another revision
// and the objects of namespaces the discovery selectors leave out are not
// read (kube_filter.go).
//
// Relists (an expired watch, an API server restart) need nothing special:
// the informers replay what changed, including deletions they only notice
// on relist (cache.DeletedFinalStateUnknown).
type KubeSource struct {
	opts KubeSourceOptions
	w    *index.Writer
	// conv is used by the run goroutine only; with a Precedence, it changes
	// only while the goroutine holds Precedence.mu or the FileSource's
	// syncMu (precedence.go), and others may read it holding both.
	conv   *Converter
	log    *slog.Logger
	synced atomic.Bool
	wake   chan struct{} // an event is pending (buffered, 1)
	// shared: this flush holds the FileSource's syncMu and settles the
	// objects the directory also defines (run goroutine only).
	shared       bool
	recheckFiles bool // a shared flush re-read a file that must be read again soon

	mu      sync.Mutex         // guards the fields below
	pending map[ObjectKey]any  // key → latest cached object, nil once deleted
	nodes   map[string]*string // node name → new locality, nil once deleted
	errs    map[ObjectKey][]error
	running map[Kind]*kubeWatch // informers by kind (Nodes under KindUnknown)
	// skipped: the Istio objects not read for their revision, and that
	// revision (kube_filter.go); written by the run goroutine only.
	skipped map[ObjectKey]string
	// selectors and reselect: discovery selectors set and not applied yet.
	selectors selectors
	reselect  bool
	// selectionNote says which namespaces are not read (Errors), nil when
	// all are.
	selectionNote error

	// sel is the discovery selection applied (run goroutine only).
	sel selection
	// nsView is sel as the informers' transforms read it (kube_stub.go).
	nsView atomic.Pointer[nsView]
	// stubbed: stubs met in selected namespaces, to fetch whole (run
	// goroutine only).
	stubbed []ObjectKey
}

// kubeWatch is one running informer.
type kubeWatch struct {
	kind      Kind
	transform cache.TransformFunc
	informer  cache.SharedIndexInformer
	reg       cache.ResourceEventHandlerRegistration
	cancel    context.CancelFunc
	stopped   atomic.Bool // events after a stop are dropped
}

// NewKubeSource returns a source reading opts.Client (and opts.Istio)
// writing to w.
func NewKubeSource(w *index.Writer, opts KubeSourceOptions) *KubeSource {
	if opts.DomainSuffix == "" {
		opts.DomainSuffix = "cluster.local"
	}
	if opts.BatchWindow <= 0 {
		opts.BatchWindow = 10 * time.Millisecond
	}
	if opts.DiscoveryInterval <= 0 {
		opts.DiscoveryInterval = 10 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	s := &KubeSource{
		opts:    opts,
		w:       w,
		conv:    NewConverter(w, opts.DomainSuffix),
		log:     opts.Logger.With("source", "kubernetes"),
		wake:    make(chan struct{}, 1),
		pending: map[ObjectKey]any{},
		nodes:   map[string]*string{},
		errs:    map[ObjectKey][]error{},
		running: map[Kind]*kubeWatch{},
		skipped: map[ObjectKey]string{},
	}
	if len(opts.DiscoverySelectors) > 0 {
		sel, err := compileSelectors(opts.DiscoverySelectors)
		if err != nil {
			s.log.Error("invalid discovery selectors: every namespace is read", "err", err)
		}
		s.selectors, s.reselect = sel, err == nil
	}
	if opts.Precedence != nil {
		opts.Precedence.kube = s
	}
	return s
}

// Synced reports whether the initial lists of every kind watched at start
// have been applied.
func (s *KubeSource) Synced() bool { return s.synced.Load() }

// Errors returns the current problems of the Istio objects the API server
// holds: validation errors, and a warning (IsWarning) for each field an
// object sets that pilotfish does not support (Unsupported), until the
// object changes or is deleted.
func (s *KubeSource) Errors() []error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []error
	for _, errs := range s.errs {
		out = append(out, errs...)
	}
	if len(s.skipped) > 0 {
		skipped := make([]skippedObject, 0, len(s.skipped))
		for k, rev := range s.skipped {
			skipped = append(skipped, skippedObject{k, rev})
		}
		out = append(out, revisionSummary("kubernetes", s.opts.Revision, skipped))
	}
	if s.selectionNote != nil {
		out = append(out, s.selectionNote)
	}
	slices.SortFunc(out, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return out
}

// Run starts the informers, applies their initial lists as one batch, then
// applies changes until ctx ends. It returns when ctx ends.
func (s *KubeSource) Run(ctx context.Context) error {
	defer s.stopAll()
	kinds := coreKinds
	if s.opts.Secrets {
		kinds = append(kinds[:len(kinds):len(kinds)], secretKind)
	}
	for _, ck := range kinds {
		s.start(ctx, ck.kind, ck.newInformer(s.opts.Client), ck.transform)
		if ck.kind == KindNamespace && !s.primeSelection(ctx) {
			return nil
		}
	}
	istio := newCRDWatch(s)
	istio.poll(ctx)
	if !s.waitForInitialSync(ctx) {
		return nil
	}
	cs := s.flush(ctx)
	s.synced.Store(true)
	s.log.Info("initial sync applied", "version", cs.Version, "services", len(cs.Services),
		"endpoints", len(cs.Endpoints), "workloads", len(cs.Workloads), "istio-kinds", istio.served())

	discovery := time.NewTicker(s.opts.DiscoveryInterval)
	defer discovery.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-discovery.C:
			istio.poll(ctx)
		case <-s.wake:
			// Let the rest of the burst arrive, then apply it all at once.
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(s.opts.BatchWindow):
			}
			if cs := s.flush(ctx); !cs.Empty() {
				s.log.Debug("config applied", "version", cs.Version, "services", len(cs.Services),
					"endpoints", len(cs.Endpoints), "workloads", len(cs.Workloads))
			}
		}
	}
}

// waitForInitialSync waits until every informer running now has handed
// its initial list to the handlers.
func (s *KubeSource) waitForInitialSync(ctx context.Context) bool {
	s.mu.Lock()
	var synced []cache.InformerSynced
	for _, w := range s.running {
		synced = append(synced, w.reg.HasSynced)
	}
	s.mu.Unlock()
	return cache.WaitForCacheSync(ctx.Done(), synced...)
}

// start runs an informer for kind with its transform and the source's
// handlers, under a context of its own so that it can be stopped alone.
func (s *KubeSource) start(ctx context.Context, kind Kind, inf cache.SharedIndexInformer, transform cache.TransformFunc) {
	if !s.opts.KeepWholeObjects {
		transform = stubbing(&s.nsView, kind, transform)
	}
	w := &kubeWatch{kind: kind, informer: inf, transform: transform}
	if !s.opts.KeepWholeObjects {
		if err := inf.SetTransform(transform); err != nil {
			panic("ingest: SetTransform on a new informer: " + err.Error()) // only fails once started
		}
	}
	reg, err := inf.AddEventHandler(s.handler(w))
	if err != nil {
		panic("ingest: AddEventHandler on a new informer: " + err.Error()) // only fails once stopped
	}
	w.reg = reg
	wctx, cancel := context.WithCancel(ctx)
	w.cancel = cancel
	s.mu.Lock()
	s.running[kind] = w
	s.mu.Unlock()
	go pprof.Do(wctx, pprof.Labels("source", "kubernetes", "kind", kindLabel(kind)), func(ctx context.Context) {
		inf.RunWithContext(ctx)
	})
}

func kindLabel(k Kind) string {
	if k == KindUnknown {
		return "Node"
	}
	return k.String()
}

// stop stops the informer of kind and deletes every object it produced.
func (s *KubeSource) stop(kind Kind) {
	s.mu.Lock()
	w := s.running[kind]
	delete(s.running, kind)
	s.mu.Unlock()
	if w == nil {
		return
	}
	w.stopped.Store(true)
	w.cancel()
	s.mu.Lock()
	for k := range s.conv.produced { // conv is the run goroutine's, as is stop
		if k.Kind == kind {
			s.pending[k] = nil
		}
	}
	for k := range s.pending {
		if k.Kind == kind {
			s.pending[k] = nil
		}
	}
	for k := range s.skipped {
		if k.Kind == kind {
			s.pending[k] = nil // forgets it (applyOwn)
		}
	}
	for k := range s.errs {
		if k.Kind == kind {
			// An invalid object produced no rows but still defined k
			// (precedence.go): its deletion hands k to the directory.
			s.pending[k] = nil
			delete(s.errs, k)
		}
	}
	s.mu.Unlock()
	s.signal()
}

func (s *KubeSource) stopAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, w := range s.running {
		w.stopped.Store(true)
		w.cancel()
	}
}

func (s *KubeSource) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// handler records each event as the latest state of its object; the run
// goroutine applies them. Updates that change nothing the converter reads
// (a resync, a relist of an unchanged object, a status-only update) are
// dropped here.
func (s *KubeSource) handler(w *kubeWatch) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { s.put(w, s.view(w, obj)) },
		UpdateFunc: func(old, obj any) {
			old, obj = s.view(w, old), s.view(w, obj)
			if !changed(old, obj) {
				return
			}
			s.put(w, obj)
		},
		DeleteFunc: func(obj any) {
			if w.stopped.Load() {
				return
			}
			if w.kind == KindUnknown {
				s.deleteNode(s.view(w, obj))
				return
			}
			var key ObjectKey
			var ok bool
			if t, isTombstone := obj.(cache.DeletedFinalStateUnknown); isTombstone {
				key, ok = tombstoneKey(w.kind, t)
			} else {
				key, ok = objectKey(w.kind, obj)
			}
			if !ok {
				s.log.Warn("cannot identify a deleted object", "kind", kindLabel(w.kind))
				return
			}
			s.mu.Lock()
			s.pending[key] = nil
			s.mu.Unlock()
			s.signal()
		},
	}
}

func (s *KubeSource) put(w *kubeWatch, obj any) {
	if w.stopped.Load() {
		return
	}
	if n, ok := obj.(*kubeNode); ok {
		loc := n.Locality
		s.mu.Lock()
		s.nodes[n.Name] = &loc
		s.mu.Unlock()
		s.signal()
		return
	}
	key, ok := objectKey(w.kind, obj)
	if !ok {
		return
	}
	s.mu.Lock()
	s.pending[key] = obj
	s.mu.Unlock()
	s.signal()
}

func (s *KubeSource) deleteNode(obj any) {
	var name string
	switch n := obj.(type) {
	case *kubeNode:
		name = n.Name
	case cache.DeletedFinalStateUnknown:
		name = n.Key
	default:
		return
	}
	s.mu.Lock()
	s.nodes[name] = nil
	s.mu.Unlock()
	s.signal()
}

// flush applies every pending event as one batch, in a deterministic order
// (kind, namespace, name), so that replicas reading the same API server
// intern symbols in the same order.
func (s *KubeSource) flush(ctx context.Context) *index.ChangeSet {
	s.mu.Lock()
	pending, nodes := s.pending, s.nodes
	s.pending, s.nodes = make(map[ObjectKey]any, len(pending)/4), map[string]*string{}
	reselect, sel := s.reselect, s.selectors
	s.reselect = false
	s.mu.Unlock()

	shared := s.opts.Precedence.lockForKube(pending, len(nodes) > 0)
	defer s.opts.Precedence.unlockKube(shared)
	s.shared = shared
	var b index.Batch
	// The discovery selection first: the objects of this batch are read
	// or not by the selection it leaves.
	s.updateSelection(&b, pending, reselect, sel)
	// Nodes first: the Pods and EndpointSlices of this batch read their
	// locality.
	moved := map[string]bool{}
	for name, loc := range nodes {
		l := ""
		if loc != nil {
			l = *loc
		}
		if s.conv.setNodeLocality(name, l) {
			moved[name] = true
		}
	}
	keys := make([]ObjectKey, 0, len(pending))
	for k := range pending {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, compareKeys)
	for _, k := range keys {
		s.apply(&b, k, pending[k])
	}
	if len(moved) > 0 {
		s.reputOnNodes(&b, moved, pending)
	}
	if len(s.stubbed) > 0 {
		// Objects of namespaces that became selected: fetched whole into
		// this batch, so a selection change is one change set.
		s.refetch(ctx, func(k ObjectKey, obj any) { s.apply(&b, k, obj) })
	}
	cs := s.w.Apply(&b)
	if shared {
		s.opts.Precedence.kubeApplied(s.recheckFiles)
		s.shared, s.recheckFiles = false, false
	}
	return cs
}

func compareKeys(a, b ObjectKey) int {
	if a.Kind != b.Kind {
		return int(a.Kind) - int(b.Kind)
	}
	if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
		return c
	}
	return strings.Compare(a.Name, b.Name)
}

// apply converts one object's latest state (nil: deleted) into b; in a
// shared flush, an object the directory also defines is settled with it.
func (s *KubeSource) apply(b *index.Batch, k ObjectKey, obj any) {
	if p := s.opts.Precedence; s.shared && p.definedLocked(k) {
		if p.applyShared(b, k, obj, s.applyOwn) {
			s.recheckFiles = true
		}
		return
	}
	s.applyOwn(b, k, obj)
}

// applyOwn converts one object's latest state (nil: deleted) into b.
func (s *KubeSource) applyOwn(b *index.Batch, k ObjectKey, obj any) {
	if obj == nil || !s.admitted(k) {
		// Deleted, or in a namespace the discovery selectors leave out.
		s.conv.Delete(b, k)
		s.setErrs(k, nil)
		s.setSkipped(k, "")
		return
	}
	if _, isStub := obj.(*kubeStub); isStub {
		// Cached while its namespace was not selected: fetched whole
		// after this batch (kube_stub.go).
		s.stubbed = append(s.stubbed, k)
		return
	}
	o, ok := kubeObject(obj)
	if !ok {
		s.log.Warn("unexpected object type from an informer", "kind", k.Kind.String(), "object", k.String())
		return
	}
	if kinds[k.Kind].istio() && !inRevision(o.Meta.Labels, s.opts.Revision) {
		s.conv.Delete(b, k)
		s.setErrs(k, nil)
		s.setSkipped(k, o.Meta.Labels[labelRevision])
		return
	}
	s.setSkipped(k, "")
	// The API server validated the Kubernetes kinds already (and the
	// cached Pods are cut down past what Validate accepts); Istio objects
	// get pilotfish's own validation, as in the file source and webhook.
	// The fields pilotfish does not support are warnings (the field
	// ledger), kept with the object's errors until it changes.
	if kinds[k.Kind].istio() {
		warns := Unsupported(o)
		if errs := Validate(o); len(errs) > 0 {
			s.setErrs(k, append(errs, warns...))
			return
		}
		s.setErrs(k, warns)
	} else {
		s.setErrs(k, nil)
	}
	s.conv.Put(b, o)
}

// setErrs records an object's current problems (errors and warnings),
// replacing those of its previous version; nil clears them. Each is
// logged once, when it first appears.
func (s *KubeSource) setErrs(k ObjectKey, errs []error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.errs[k]
	if len(errs) == 0 {
		delete(s.errs, k)
		return
	}
	s.errs[k] = errs
	for _, err := range errs {
		if slices.ContainsFunc(old, func(o error) bool { return o.Error() == err.Error() }) {
			continue
		}
		if IsWarning(err) {
			s.log.Warn("config partly ignored", "warning", err.Error())
		} else {
			s.log.Warn("rejected config; the last good version is kept", "err", err.Error())
		}
	}
}

// reputOnNodes converts again the Pods and EndpointSlices on nodes whose
// locality changed (a node labelled, or seen after its pods), unless this
// batch already has their latest state.
func (s *KubeSource) reputOnNodes(b *index.Batch, moved map[string]bool, done map[ObjectKey]any) {
	s.mu.Lock()
	pods, slices := s.running[KindPod], s.running[KindEndpointSlice]
	s.mu.Unlock()
	if pods != nil {
		for _, obj := range pods.informer.GetStore().List() {
			p, ok := s.view(pods, obj).(*kubePod)
			if !ok || !moved[p.NodeName] {
				continue
			}
			if k, _ := objectKey(KindPod, p); !hasKey(done, k) {
				s.apply(b, k, p)
			}
		}
	}
	if slices != nil {
		for _, obj := range slices.informer.GetStore().List() {
			k, ok := objectKey(KindEndpointSlice, obj)
			if !ok || hasKey(done, k) || !sliceOnNodes(obj, moved) {
				continue
			}
			s.apply(b, k, s.view(slices, obj))
		}
	}
}

// view is the transformed object: the cached one, or with
// KeepWholeObjects a transformed copy of it.
func (s *KubeSource) view(w *kubeWatch, obj any) any {
	if !s.opts.KeepWholeObjects {
		return obj
	}
	if o, ok := obj.(runtime.Object); ok {
		out, _ := w.transform(o.DeepCopyObject())
		return out
	}
	return obj
}

// defines reports whether the API server defines k: its informer holds k
// (valid or not), or the index still holds this source's version of it (a
// deletion not applied yet). Precedence says who may call it.
func (s *KubeSource) defines(k ObjectKey) bool {
	if s.conv.Known(k) {
		return true
	}
	s.mu.Lock()
	w := s.running[k.Kind]
	s.mu.Unlock()
	if w == nil || k.Kind == KindUnknown || w.stopped.Load() {
		return false
	}
	key := k.Name
	if k.Namespace != "" {
		key = k.Namespace + "/" + k.Name
	}
	_, ok, _ := w.informer.GetStore().GetByKey(key)
	return ok
}

func hasKey(m map[ObjectKey]any, k ObjectKey) bool {
	_, ok := m[k]
	return ok
}

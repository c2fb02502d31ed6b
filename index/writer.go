package index

import (
	"cmp"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
)

// selectedSource is the endpoint group a ServiceEntry's workloadSelector
// contributes (the WorkloadEntries and Pods it selects).
const selectedSource = "(workloadSelector)"

// Writer is the single writer of the index. Apply serializes itself; every
// other method is safe for concurrent use.
type Writer struct {
	mu          sync.Mutex // serializes Apply and guards subscribers
	cur         atomic.Pointer[Snapshot]
	syms        *Symbols
	labels      *LabelSets
	subscribers []func(*Snapshot, *ChangeSet) // guarded by mu
	// incremental makes Apply take the one-row path for every row, never
	// the shortcuts of a build from empty: the reference the tests compare
	// bulk builds with.
	incremental bool
}

// NewWriter returns a writer whose current snapshot is empty (version 0).
func NewWriter() *Writer {
	w := &Writer{syms: NewSymbols(), labels: NewLabelSets()}
	w.cur.Store(&Snapshot{Symbols: w.syms, Labels: w.labels})
	return w
}

// NewWriterSharing returns a writer with empty tables that shares w's symbol
// and label-set tables, so that rows of both use the same IDs (indexes of
// several sources or clusters, benchmarks of a rebuild with warm symbols).
func NewWriterSharing(w *Writer) *Writer {
	n := &Writer{syms: w.syms, labels: w.labels}
	n.cur.Store(&Snapshot{Symbols: n.syms, Labels: n.labels})
	return n
}

// Symbols returns the symbol table shared by all snapshots.
func (w *Writer) Symbols() *Symbols { return w.syms }

// Labels returns the label-set table shared by all snapshots.
func (w *Writer) Labels() *LabelSets { return w.labels }

// Snapshot returns the current snapshot: an atomic load, no lock.
func (w *Writer) Snapshot() *Snapshot { return w.cur.Load() }

// Subscribe registers fn to be called, on the writer's goroutine and in
// order, after each non-empty snapshot is published. fn must not block: hand
// the change set to a queue.
func (w *Writer) Subscribe(fn func(*Snapshot, *ChangeSet)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.subscribers = append(w.subscribers, fn)
}

// Apply builds the next snapshot from the current one and the batch,
// publishes it, and returns what changed. A batch that changes nothing
// publishes nothing and returns an empty change set.
func (w *Writer) Apply(b *Batch) *ChangeSet {
	w.mu.Lock()
	defer w.mu.Unlock()
	prev := w.cur.Load()
	checkPublished(prev)
	a := newApplier(w, prev)
	a.apply(b)
	next, cs := a.finish()
	if cs.Empty() {
		return cs
	}
	sealPublished(next)
	w.cur.Store(next)
	for _, fn := range w.subscribers {
		fn(next, cs)
	}
	return cs
}

// applier holds the transactions of one Apply.
type applier struct {
	w          *Writer
	prev       *Snapshot
	services   *tableTxn[ServiceKey, Service]
	workloads  *tableTxn[WorkloadKey, Workload]
	namespaces *tableTxn[symKey, Namespace]
	configs    [NumConfigKinds]*tableTxn[ConfigKey, Config]
	endpoints  *pmapTxn[ServiceKey, *EndpointShard]
	cs         ChangeSet
	// shardsChanged collects services whose shard changed, with repeats.
	shardsChanged []ServiceKey
	selected      Sym
	// shardSlab holds new shards allocated ahead for a batch of many
	// endpoint groups; shardsAhead is how many more the batch may need.
	shardSlab   []EndpointShard
	shardsAhead int
	// nsEntries memoizes hasWorkloadEntries for this batch.
	nsEntries map[Sym]bool
}

// shardSlabLen bounds one allocation of new shards (and so what one
// long-lived shard can keep pinned after its neighbours are replaced).
const shardSlabLen = 64

// newShard returns a zeroed shard. A bulk build takes them from slabs: one
// allocation per 64 services instead of one per service; a batch of one or
// two groups (the endpoint fast path) allocates just its own.
func (a *applier) newShard() *EndpointShard {
	if len(a.shardSlab) == 0 {
		if a.shardsAhead <= 1 {
			return new(EndpointShard)
		}
		n := min(a.shardsAhead, shardSlabLen)
		a.shardSlab = make([]EndpointShard, n)
		a.shardsAhead -= n
	}
	s := &a.shardSlab[0]
	a.shardSlab = a.shardSlab[1:]
	return s
}

func newApplier(w *Writer, prev *Snapshot) *applier {
	a := &applier{
		w:          w,
		prev:       prev,
		services:   prev.services.txn(serviceSpec),
		workloads:  prev.workloads.txn(workloadSpec),
		namespaces: prev.namespaces.txn(namespaceSpec),
		endpoints:  prev.endpoints.txn(),
		selected:   w.syms.Intern(selectedSource),
	}
	a.services.noBulk = w.incremental
	a.workloads.noBulk = w.incremental
	a.namespaces.noBulk = w.incremental
	return a
}

// config returns the transaction of a config kind's table, begun on first
// use: most batches touch one or two of the kinds.
func (a *applier) config(kind ConfigKind) *tableTxn[ConfigKey, Config] {
	if a.configs[kind] == nil {
		a.configs[kind] = a.prev.configs[kind].txn(configSpec)
		a.configs[kind].noBulk = a.w.incremental
	}
	return a.configs[kind]
}

// reserve sizes the transactions for the batch's puts.
func (a *applier) reserve(b *Batch) {
	a.namespaces.reserve(b.namespaces.n)
	a.workloads.reserve(b.workloads.n)
	a.services.reserve(b.services.n)
	var perKind [NumConfigKinds]int
	for op := range b.configs.all {
		perKind[op.row.Kind]++
	}
	for k, n := range perKind {
		if n > 0 {
			a.config(ConfigKind(k)).reserve(n)
		}
	}
	a.endpoints.reserve(b.endpoints.n)
	a.shardsAhead = b.endpoints.n
	a.shardsChanged = slices.Grow(a.shardsChanged, b.endpoints.n)
}

func (a *applier) apply(b *Batch) {
	a.reserve(b)
	for op := range b.namespaces.all {
		if op.delete {
			a.namespaces.delete(symKey(op.row.Name))
		} else {
			a.namespaces.put(&op.row)
		}
	}
	var workloadsChanged []workloadChange
	for op := range b.workloads.all {
		var old Workload
		if r, _, ok := a.workloads.get(op.row.Key); ok {
			old = *r
		}
		var changed bool
		if op.delete {
			_, changed = a.workloads.delete(op.row.Key)
		} else {
			_, changed = a.workloads.put(&op.row)
		}
		if changed {
			workloadsChanged = append(workloadsChanged, workloadChange{old: old, new: op.row, deleted: op.delete})
		}
	}
	var selectorServices []ServiceKey
	for op := range b.services.all {
		if op.delete {
			if old, _, ok := a.services.get(op.row.Key); ok && old.HasSelector {
				selectorServices = append(selectorServices, op.row.Key)
			}
			a.services.delete(op.row.Key)
			continue
		}
		if _, changed := a.services.put(&op.row); changed && op.row.HasSelector &&
			(op.row.Origin == OriginServiceEntry || a.hasWorkloadEntries(op.row.Key.Namespace)) {
			selectorServices = append(selectorServices, op.row.Key)
		}
	}
	for op := range b.configs.all {
		t := a.config(op.row.Kind)
		if op.delete {
			t.delete(op.row.Key)
		} else {
			t.put(&op.row)
		}
	}
	for op := range b.endpoints.all {
		a.putGroup(op.service, op.group, op.delete, true)
	}
	// Joins: endpoints that reference changed workloads, and ServiceEntries
	// whose selected workloads may have changed.
	for _, wc := range workloadsChanged {
		if wc.new.Key.Kind == WorkloadPod {
			a.reresolvePod(wc)
		}
		selectorServices = append(selectorServices, a.selectorServicesIn(wc.new.Key.Namespace, wc.new.Key.Kind == WorkloadEntry)...)
	}
	for _, svc := range dedupSorted(selectorServices) {
		a.reselect(svc)
	}
}

// putGroup replaces (or removes) one source's endpoints in a service's shard,
// resolving what the endpoints' workloads own.
//
// owned says g.Endpoints belongs to this Apply (a batch's group): it is
// resolved in place. A group taken from a published shard is copied first.
func (a *applier) putGroup(svc ServiceKey, g EndpointGroup, remove, owned bool) {
	old, _ := a.endpoints.Get(svc)
	var oldGroup *EndpointGroup
	if old != nil {
		if i, ok := slices.BinarySearchFunc(old.Groups, g.Source, func(x EndpointGroup, s Sym) int { return cmp.Compare(x.Source, s) }); ok {
			oldGroup = &old.Groups[i]
		}
	}
	if !remove {
		if !owned {
			g.Endpoints = slices.Clone(g.Endpoints)
		}
		a.resolve(svc.Namespace, &g)
		g.Hash = g.computeHash()
		if oldGroup != nil && oldGroup.Hash == g.Hash {
			return
		}
	} else if oldGroup == nil {
		return
	}
	var next *EndpointShard
	if old == nil && !remove {
		next = a.newShard()
		next.initOne(svc, g)
	} else {
		next = old.with(svc, g, remove)
	}
	if len(next.Groups) == 0 {
		a.endpoints.Delete(svc)
	} else {
		a.endpoints.Set(svc, next)
	}
	a.shardsChanged = append(a.shardsChanged, svc)
}

// resolve fills the endpoint attributes their workload owns: for a group of
// Kubernetes pod endpoints, the Pod with the endpoint's address in ns; for
// endpoints naming a workload, that Pod or WorkloadEntry.
func (a *applier) resolve(ns Sym, g *EndpointGroup) {
	for i := range g.Endpoints {
		e := &g.Endpoints[i]
		var w *Workload
		switch {
		case g.Pods:
			w = a.podByAddr(ns, e.Addr)
		case e.Workload != 0:
			w, _, _ = a.workloads.get(WorkloadKey{Kind: WorkloadPod, Namespace: ns, Name: e.Workload})
			if w == nil {
				w, _, _ = a.workloads.get(WorkloadKey{Kind: WorkloadEntry, Namespace: ns, Name: e.Workload})
			}
		}
		if w == nil {
			continue
		}
		e.Workload = w.Key.Name // interned already by the workload row
		e.Labels = w.Labels
		e.ServiceAccount = w.ServiceAccount
		e.TLSMode = w.TLSMode
		if w.Network != 0 {
			e.Network = w.Network
		}
		if e.Locality == 0 {
			e.Locality = w.Locality
		}
	}
}

// podByAddr finds the Pod of ns with address addr, as of this batch.
func (a *applier) podByAddr(ns Sym, addr netip.Addr) *Workload {
	var found *Workload
	a.workloads.lookup(indexPos(workloadSpec.indexes, WorkloadsByAddr), addrKey(addr), func(w *Workload) bool {
		if w.Key.Kind == WorkloadPod && w.Key.Namespace == ns && w.Addr == addr {
			found = w
			return false
		}
		return true
	})
	return found
}

// workloadChange is one workload put or deleted in this batch.
type workloadChange struct {
	old, new Workload // old is zero for an addition
	deleted  bool
}

// reresolvePod re-applies the pod endpoint groups that contain a changed
// Pod's address (old or new), in the services of its namespace whose
// selector matches its labels (old or new): Kubernetes puts a Pod in a
// service's EndpointSlices only when the service selects it.
func (a *applier) reresolvePod(wc workloadChange) {
	ns := wc.new.Key.Namespace
	for _, svc := range a.servicesIn(ns) {
		if !svc.HasSelector || svc.Origin != OriginKubernetes {
			continue
		}
		if !a.w.labels.Matches(svc.Selector, wc.new.Labels) && !a.w.labels.Matches(svc.Selector, wc.old.Labels) {
			continue
		}
		sh, _ := a.endpoints.Get(svc.Key)
		if sh == nil {
			continue
		}
		for _, g := range sh.Groups {
			if g.Pods && slices.ContainsFunc(g.Endpoints, func(e Endpoint) bool {
				return (wc.new.Addr.IsValid() && e.Addr == wc.new.Addr) || (wc.old.Addr.IsValid() && e.Addr == wc.old.Addr)
			}) {
				a.putGroup(svc.Key, g, false, false)
			}
		}
	}
}

// selectorServicesIn returns the ServiceEntries with a workload selector in
// ns, and with entries set the Kubernetes Services with one too (they
// select WorkloadEntries, as istiod's PILOT_ENABLE_K8S_SELECT_WORKLOAD_ENTRIES
// does by default; their Pods come from EndpointSlices).
func (a *applier) selectorServicesIn(ns Sym, entries bool) []ServiceKey {
	var out []ServiceKey
	for _, s := range a.servicesIn(ns) {
		if s.HasSelector && (s.Origin == OriginServiceEntry || entries && s.Origin == OriginKubernetes) {
			out = append(out, s.Key)
		}
	}
	return out
}

// hasWorkloadEntries reports whether ns holds a WorkloadEntry as of this
// batch (memoized per Apply): only then can a Kubernetes Service select
// one, so namespaces of Pods only pay nothing.
func (a *applier) hasWorkloadEntries(ns Sym) bool {
	if v, ok := a.nsEntries[ns]; ok {
		return v
	}
	found := false
	a.workloads.lookup(indexPos(workloadSpec.indexes, WorkloadsByNamespace), uint64(ns), func(w *Workload) bool {
		found = w.Key.Kind == WorkloadEntry
		return !found
	})
	if a.nsEntries == nil {
		a.nsEntries = map[Sym]bool{}
	}
	a.nsEntries[ns] = found
	return found
}

// servicesIn returns the live services of ns as of this batch.
func (a *applier) servicesIn(ns Sym) []*Service {
	var out []*Service
	a.services.lookup(indexPos(serviceSpec.indexes, ServicesByNamespace), uint64(ns), func(s *Service) bool {
		out = append(out, s)
		return true
	})
	return out
}

// reselect recomputes the endpoint group a workload selector contributes:
// for a ServiceEntry every WorkloadEntry and Pod of its namespace that
// matches, for a Kubernetes Service every matching WorkloadEntry.
func (a *applier) reselect(svc ServiceKey) {
	s, _, ok := a.services.get(svc)
	if !ok || !s.HasSelector || (s.Origin != OriginServiceEntry && s.Origin != OriginKubernetes) {
		a.putGroup(svc, EndpointGroup{Source: a.selected}, true, true)
		return
	}
	var eps []Endpoint
	var ports []EndpointPort
	for _, id := range a.workloadIDsIn(svc.Namespace) {
		w := &a.workloads.rows.v.At(id).row
		if !a.w.labels.Matches(s.Selector, w.Labels) || (s.Origin == OriginKubernetes && w.Key.Kind != WorkloadEntry) {
			continue
		}
		eps = append(eps, Endpoint{Addr: w.Addr, Workload: w.Key.Name, Locality: w.Locality})
		if len(w.Ports) > 0 && ports == nil {
			ports = w.Ports
		}
	}
	if len(eps) == 0 {
		a.putGroup(svc, EndpointGroup{Source: a.selected}, true, true)
		return
	}
	slices.SortFunc(eps, func(x, y Endpoint) int { return x.Addr.Compare(y.Addr) })
	a.putGroup(svc, EndpointGroup{Source: a.selected, Ports: ports, Endpoints: eps}, false, true)
}

// workloadIDsIn returns the live workload IDs of ns as of this batch.
func (a *applier) workloadIDsIn(ns Sym) []uint32 {
	var out []uint32
	a.workloads.lookupIDs(indexPos(workloadSpec.indexes, WorkloadsByNamespace), uint64(ns), func(id uint32) bool {
		out = append(out, id)
		return true
	})
	slices.Sort(out)
	return out
}

// finish commits every transaction into the next snapshot and the change set.
func (a *applier) finish() (*Snapshot, *ChangeSet) {
	next := &Snapshot{
		Version: a.prev.Version + 1,
		Symbols: a.w.syms,
		Labels:  a.w.labels,
	}
	cs := &a.cs
	cs.Version = next.Version
	cs.Namespaces = changedKeys(a.namespaces, func(n *Namespace) symKey { return symKey(n.Name) }, &a.prev.namespaces, func(k symKey) Sym { return Sym(k) }, func(n Sym) symKey { return symKey(n) })
	cs.Workloads = changedKeys(a.workloads, func(w *Workload) WorkloadKey { return w.Key }, &a.prev.workloads, identity[WorkloadKey], identity[WorkloadKey])
	cs.Services = changedKeys(a.services, func(s *Service) ServiceKey { return s.Key }, &a.prev.services, identity[ServiceKey], identity[ServiceKey])
	for k, x := range a.configs {
		if x != nil {
			cs.Configs[k] = changedKeys(x, func(c *Config) ConfigKey { return c.Key }, &a.prev.configs[k], identity[ConfigKey], identity[ConfigKey])
		}
	}
	cs.Endpoints = a.changedShards()
	next.namespaces = a.namespaces.commit()
	next.workloads = a.workloads.commit()
	next.services = a.services.commit()
	for k, x := range a.configs {
		if x != nil {
			next.configs[k] = x.commit()
		} else {
			next.configs[k] = a.prev.configs[k]
		}
	}
	next.endpoints = a.endpoints.commit()
	next.ConfigVersion = a.prev.ConfigVersion
	if cs.scopeChanged() { // secret.go
		next.ConfigVersion = next.Version
	}
	return next, cs
}

// changedShards returns the services whose endpoint shard differs from the
// previous snapshot's, sorted.
func (a *applier) changedShards() []ServiceKey {
	if len(a.shardsChanged) == 0 {
		return nil
	}
	keys := dedupSorted(a.shardsChanged)
	if a.prev.endpoints.Len() == 0 && a.endpoints.m.Len() == len(keys) && !a.w.incremental {
		// Built from empty, and every candidate still has a shard (the map
		// holds only candidates, and as many): each is a new shard, no
		// lookup needed.
		return keys
	}
	var out []ServiceKey
	for _, k := range keys {
		before, _ := a.prev.endpoints.Get(k)
		after, _ := a.endpoints.Get(k)
		if (before == nil) != (after == nil) || (before != nil && before.Hash != after.Hash) {
			out = append(out, k)
		}
	}
	return out
}

// changedKeys maps a transaction's changed IDs to sorted, unique keys whose
// row really differs from the previous snapshot's (a row put and deleted, or
// changed and changed back, within one batch is no change).
func changedKeys[K keyer, R any, O interface {
	comparable
	ordered[O]
}](x *tableTxn[K, R], key func(*R) K, prev *table[K, R], out func(K) O, in func(O) K) []O {
	if len(x.changed) == 0 {
		return nil
	}
	// Candidate keys first (deduplicated by sorting), then one hash
	// comparison each: no map, one slice.
	res := make([]O, 0, len(x.changed))
	for _, id := range x.changed {
		if sl := x.rows.v.At(id); sl.live {
			res = append(res, out(key(&sl.row)))
		}
		if id < prev.next {
			if sl := prev.rows.At(id); sl.live {
				res = append(res, out(key(&sl.row)))
			}
		}
	}
	res = dedupSorted(res)
	if prev.next == 0 {
		// Built from an empty table: every live row is new.
		return res
	}
	kept := res[:0]
	for _, o := range res {
		k := in(o)
		before, _, had := prev.get(k)
		after, _, has := x.get(k)
		if had != has || (had && *x.spec.getHash(before) != *x.spec.getHash(after)) {
			kept = append(kept, o)
		}
	}
	if len(kept) == 0 {
		return nil
	}
	return kept
}

func identity[T any](x T) T { return x }

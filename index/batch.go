package index

// Batch collects changes to apply as one snapshot. A batch takes ownership
// of the rows and slices put into it: the caller must not modify them after
// the call (the index publishes them as they are, without copying). Operations apply in the
// order of their tables (namespaces, workloads, services, configs,
// endpoints), and in call order within a table, so a batch may reference
// rows it adds (an EndpointSlice and its Pods).
type Batch struct {
	namespaces opList[nsOp]
	workloads  opList[workloadOp]
	services   opList[serviceOp]
	configs    opList[configOp]
	endpoints  opList[endpointOp]
}

// opList is an append-only list of a batch's operations, in chunks that
// double in size (4, 4, 8, 16, ... up to 1,024 ops). Rows are large (a
// config or service op is ~150 bytes): growing one slice would copy every
// op ~once more and allocate twice the final size; chunks copy nothing.
type opList[T any] struct {
	chunks [][]T
	n      int
}

const (
	opChunkMin = 4
	opChunkMax = 1024
)

func (l *opList[T]) add(x T) {
	if k := len(l.chunks); k == 0 || len(l.chunks[k-1]) == cap(l.chunks[k-1]) {
		l.chunks = append(l.chunks, make([]T, 0, min(max(l.n, opChunkMin), opChunkMax)))
	}
	last := &l.chunks[len(l.chunks)-1]
	*last = append(*last, x)
	l.n++
}

// all yields every op in order, by pointer (ops are large).
func (l *opList[T]) all(yield func(*T) bool) {
	for _, c := range l.chunks {
		for i := range c {
			if !yield(&c[i]) {
				return
			}
		}
	}
}

type nsOp struct {
	row    Namespace
	delete bool
}

type workloadOp struct {
	row    Workload
	delete bool
}

type serviceOp struct {
	row    Service
	delete bool
}

type configOp struct {
	row    Config
	delete bool
}

type endpointOp struct {
	service ServiceKey
	group   EndpointGroup
	delete  bool
}

// PutNamespace adds or replaces a namespace.
func (b *Batch) PutNamespace(n Namespace) { b.namespaces.add(nsOp{row: n}) }

// DeleteNamespace removes a namespace.
func (b *Batch) DeleteNamespace(name Sym) {
	b.namespaces.add(nsOp{row: Namespace{Name: name}, delete: true})
}

// PutWorkload adds or replaces a workload.
func (b *Batch) PutWorkload(w Workload) { b.workloads.add(workloadOp{row: w}) }

// DeleteWorkload removes a workload.
func (b *Batch) DeleteWorkload(k WorkloadKey) {
	b.workloads.add(workloadOp{row: Workload{Key: k}, delete: true})
}

// PutService adds or replaces a service.
func (b *Batch) PutService(s Service) { b.services.add(serviceOp{row: s}) }

// DeleteService removes a service (its endpoint shard stays: endpoints may
// outlive their service, as EndpointSlices may outlive a Service briefly).
func (b *Batch) DeleteService(k ServiceKey) {
	b.services.add(serviceOp{row: Service{Key: k}, delete: true})
}

// PutConfig adds or replaces a config object; c.Hash must be set.
func (b *Batch) PutConfig(c Config) { b.configs.add(configOp{row: c}) }

// DeleteConfig removes a config object.
func (b *Batch) DeleteConfig(kind ConfigKind, k ConfigKey) {
	b.configs.add(configOp{row: Config{Kind: kind, Key: k}, delete: true})
}

// PutEndpoints replaces the endpoints that g.Source contributes to service.
// Endpoints with a Workload name get that workload's labels, service account,
// network and TLS mode (and locality, if they have none) from the workloads
// table, now and whenever the workload changes.
func (b *Batch) PutEndpoints(service ServiceKey, g EndpointGroup) {
	b.endpoints.add(endpointOp{service: service, group: g})
}

// DeleteEndpoints removes what source contributes to service.
func (b *Batch) DeleteEndpoints(service ServiceKey, source Sym) {
	b.endpoints.add(endpointOp{service: service, group: EndpointGroup{Source: source}, delete: true})
}

// Len returns the number of operations in the batch.
func (b *Batch) Len() int {
	return b.namespaces.n + b.workloads.n + b.services.n + b.configs.n + b.endpoints.n
}

// ChangeSet names what one Apply changed. Rows are named by primary key, not
// ID: IDs are reused after deletes, keys are not. Each list is sorted and
// free of duplicates.
type ChangeSet struct {
	// Version is the version of the snapshot the batch produced.
	Version    uint64
	Namespaces []Sym
	Workloads  []WorkloadKey
	Services   []ServiceKey
	Configs    [NumConfigKinds][]ConfigKey
	// Endpoints lists the services whose endpoint shard changed.
	Endpoints []ServiceKey
}

// Empty reports whether nothing changed.
func (c *ChangeSet) Empty() bool {
	return len(c.Endpoints) == 0 && c.onlyEndpoints()
}

// EndpointsOnly reports whether endpoint shards are all that changed: the
// case the endpoint fast path serves.
func (c *ChangeSet) EndpointsOnly() bool {
	return len(c.Endpoints) > 0 && c.onlyEndpoints()
}

func (c *ChangeSet) onlyEndpoints() bool {
	if len(c.Namespaces)+len(c.Workloads)+len(c.Services) > 0 {
		return false
	}
	for _, k := range c.Configs {
		if len(k) > 0 {
			return false
		}
	}
	return true
}

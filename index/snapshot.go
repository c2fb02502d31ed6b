package index

import "net/netip"

// Secondary indexes, declared as values next to their tables.
var (
	// ServicesByHost: hostname Sym → services (one per namespace defining it).
	ServicesByHost = &Index[Service]{Name: "host", Keys: func(s *Service, dst []uint64) []uint64 {
		return append(dst, uint64(s.Key.Host))
	}}
	// ServicesByNamespace: namespace Sym → services.
	ServicesByNamespace = &Index[Service]{Name: "namespace", Keys: func(s *Service, dst []uint64) []uint64 {
		return append(dst, uint64(s.Key.Namespace))
	}}
	// WorkloadsByNamespace: namespace Sym → workloads.
	WorkloadsByNamespace = &Index[Workload]{Name: "namespace", Keys: func(w *Workload, dst []uint64) []uint64 {
		return append(dst, uint64(w.Key.Namespace))
	}}
	// WorkloadsByAddr: a hash of the address → workloads (check Addr).
	WorkloadsByAddr = &Index[Workload]{Name: "addr", Keys: func(w *Workload, dst []uint64) []uint64 {
		if !w.Addr.IsValid() {
			return dst
		}
		return append(dst, addrKey(w.Addr))
	}}
	// ConfigsByNamespace: namespace Sym → configs of one kind.
	ConfigsByNamespace = &Index[Config]{Name: "namespace", Keys: func(c *Config, dst []uint64) []uint64 {
		return append(dst, uint64(c.Key.Namespace))
	}}
	// ConfigsByHost: host Sym, as written in the spec → configs of one kind.
	ConfigsByHost = &Index[Config]{Name: "host", Keys: func(c *Config, dst []uint64) []uint64 {
		for _, h := range c.Hosts {
			dst = append(dst, uint64(h))
		}
		return dst
	}}
	// ConfigsBySelector: (namespace, selector) → configs with that workload
	// selector, so that a selector shared by many policies is evaluated once.
	// Configs without a selector are not in this index.
	ConfigsBySelector = &Index[Config]{Name: "selector", Keys: func(c *Config, dst []uint64) []uint64 {
		if !c.HasSelector {
			return dst
		}
		return append(dst, uint64(c.Key.Namespace)<<32|uint64(c.Selector))
	}}
	// ConfigsWithSourceLabels: the configs with SourceLabelKeys (all under
	// one key), so that a proxy's class can ask which label keys routes
	// look at without walking every VirtualService.
	ConfigsWithSourceLabels = &Index[Config]{Name: "source-labels", Keys: func(c *Config, dst []uint64) []uint64 {
		if len(c.SourceLabelKeys) == 0 {
			return dst
		}
		return append(dst, 1)
	}}
)

var (
	serviceSpec = &tableSpec[ServiceKey, Service]{
		name: "services", key: func(s *Service) ServiceKey { return s.Key },
		hash: (*Service).computeHash, getHash: func(s *Service) *uint64 { return &s.Hash },
		indexes: []*Index[Service]{ServicesByHost, ServicesByNamespace},
	}
	workloadSpec = &tableSpec[WorkloadKey, Workload]{
		name: "workloads", key: func(w *Workload) WorkloadKey { return w.Key },
		hash: (*Workload).computeHash, getHash: func(w *Workload) *uint64 { return &w.Hash },
		indexes: []*Index[Workload]{WorkloadsByNamespace, WorkloadsByAddr},
	}
	namespaceSpec = &tableSpec[symKey, Namespace]{
		name: "namespaces", key: func(n *Namespace) symKey { return symKey(n.Name) },
		hash: (*Namespace).computeHash, getHash: func(n *Namespace) *uint64 { return &n.Hash },
	}
	configSpec = &tableSpec[ConfigKey, Config]{
		name: "configs", key: func(c *Config) ConfigKey { return c.Key },
		getHash: func(c *Config) *uint64 { return &c.Hash },
		indexes: []*Index[Config]{ConfigsByNamespace, ConfigsByHost, ConfigsBySelector, ConfigsWithSourceLabels},
	}
)

func indexPos[R any](list []*Index[R], ix *Index[R]) int {
	for i, x := range list {
		if x == ix {
			return i
		}
	}
	panic("index: " + ix.Name + " is not an index of this table")
}

// Snapshot is an immutable view of the whole index. All methods are safe for
// concurrent use and never lock; the pointers they return point into the
// snapshot and must not be written through.
type Snapshot struct {
	// Version increases by one with every published snapshot.
	Version uint64
	// ConfigVersion is the Version of the latest snapshot in which anything
	// other than endpoint shards and Secrets changed. Readers that depend
	// only on services, workloads, namespaces and config other than Secrets
	// (a proxy's scope) can reuse what they computed for an earlier snapshot
	// with the same ConfigVersion.
	ConfigVersion uint64
	// Symbols and Labels are shared by all snapshots of one writer.
	Symbols *Symbols
	Labels  *LabelSets

	services   table[ServiceKey, Service]
	workloads  table[WorkloadKey, Workload]
	namespaces table[symKey, Namespace]
	configs    [NumConfigKinds]table[ConfigKey, Config]
	endpoints  pmap[ServiceKey, *EndpointShard]
}

// Service returns the service with key k.
func (s *Snapshot) Service(k ServiceKey) (*Service, ServiceID, bool) {
	r, id, ok := s.services.get(k)
	return r, ServiceID(id), ok
}

// ServiceByID returns the live service with that ID, or nil.
func (s *Snapshot) ServiceByID(id ServiceID) *Service { return s.services.at(uint32(id)) }

// ServicesByHost returns the IDs of the services with that hostname, one per
// namespace that defines it, sorted. The slice is shared.
func (s *Snapshot) ServicesByHost(host Sym) []ServiceID {
	return asServiceIDs(s.services.byIndex(indexPos(serviceSpec.indexes, ServicesByHost), uint64(host)))
}

// ServicesInNamespace returns the IDs of the services in ns, sorted.
func (s *Snapshot) ServicesInNamespace(ns Sym) []ServiceID {
	return asServiceIDs(s.services.byIndex(indexPos(serviceSpec.indexes, ServicesByNamespace), uint64(ns)))
}

// LookupService finds a service by hostname and namespace strings without
// allocating.
func (s *Snapshot) LookupService(host, namespace string) (*Service, ServiceID, bool) {
	h, ok := s.Symbols.Lookup(host)
	if !ok {
		return nil, 0, false
	}
	n, ok := s.Symbols.Lookup(namespace)
	if !ok {
		return nil, 0, false
	}
	return s.Service(ServiceKey{Host: h, Namespace: n})
}

// Services calls fn for every service in ID order until fn returns false.
func (s *Snapshot) Services(fn func(ServiceID, *Service) bool) {
	s.services.all(func(id uint32, r *Service) bool { return fn(ServiceID(id), r) })
}

// NumServices returns the number of services.
func (s *Snapshot) NumServices() int { return s.services.len() }

// Endpoints returns the endpoint shard of a service, or nil.
func (s *Snapshot) Endpoints(k ServiceKey) *EndpointShard {
	sh, _ := s.endpoints.Get(k)
	return sh
}

// EndpointShards calls fn for every endpoint shard, in unspecified order.
func (s *Snapshot) EndpointShards(fn func(*EndpointShard) bool) {
	s.endpoints.All(func(_ ServiceKey, sh *EndpointShard) bool { return fn(sh) })
}

// NumEndpointShards returns the number of endpoint shards.
func (s *Snapshot) NumEndpointShards() int { return s.endpoints.Len() }

// Workload returns the workload with key k.
func (s *Snapshot) Workload(k WorkloadKey) (*Workload, bool) {
	r, _, ok := s.workloads.get(k)
	return r, ok
}

// WorkloadsByAddr calls fn for the workloads with that address.
func (s *Snapshot) WorkloadsByAddr(a netip.Addr, fn func(*Workload) bool) {
	for _, id := range s.workloads.byIndex(indexPos(workloadSpec.indexes, WorkloadsByAddr), addrKey(a)) {
		w := s.workloads.at(id)
		if w != nil && w.Addr == a && !fn(w) {
			return
		}
	}
}

// WorkloadsInNamespace calls fn for the workloads of ns in ID order.
func (s *Snapshot) WorkloadsInNamespace(ns Sym, fn func(*Workload) bool) {
	for _, id := range s.workloads.byIndex(indexPos(workloadSpec.indexes, WorkloadsByNamespace), uint64(ns)) {
		if w := s.workloads.at(id); w != nil && !fn(w) {
			return
		}
	}
}

// Workloads calls fn for every workload in ID order.
func (s *Snapshot) Workloads(fn func(*Workload) bool) {
	s.workloads.all(func(_ uint32, w *Workload) bool { return fn(w) })
}

// NumWorkloads returns the number of workloads.
func (s *Snapshot) NumWorkloads() int { return s.workloads.len() }

// Namespace returns the namespace row of name.
func (s *Snapshot) Namespace(name Sym) (*Namespace, bool) {
	r, _, ok := s.namespaces.get(symKey(name))
	return r, ok
}

// Namespaces calls fn for every namespace in ID order.
func (s *Snapshot) Namespaces(fn func(*Namespace) bool) {
	s.namespaces.all(func(_ uint32, n *Namespace) bool { return fn(n) })
}

// Config returns the config of kind with key k.
func (s *Snapshot) Config(kind ConfigKind, k ConfigKey) (*Config, bool) {
	r, _, ok := s.configs[kind].get(k)
	return r, ok
}

// Configs calls fn for every config of kind in ID order.
func (s *Snapshot) Configs(kind ConfigKind, fn func(*Config) bool) {
	s.configs[kind].all(func(_ uint32, c *Config) bool { return fn(c) })
}

// NumConfigs returns the number of configs of kind.
func (s *Snapshot) NumConfigs(kind ConfigKind) int { return s.configs[kind].len() }

// ConfigsByHost calls fn for the configs of kind that name host.
func (s *Snapshot) ConfigsByHost(kind ConfigKind, host Sym, fn func(*Config) bool) {
	s.configsBy(kind, ConfigsByHost, uint64(host), fn)
}

// ConfigsInNamespace calls fn for the configs of kind in ns.
func (s *Snapshot) ConfigsInNamespace(kind ConfigKind, ns Sym, fn func(*Config) bool) {
	s.configsBy(kind, ConfigsByNamespace, uint64(ns), fn)
}

// ConfigsBySelector calls fn for the configs of kind in ns with that selector.
func (s *Snapshot) ConfigsBySelector(kind ConfigKind, ns Sym, sel LabelSetID, fn func(*Config) bool) {
	s.configsBy(kind, ConfigsBySelector, uint64(ns)<<32|uint64(sel), fn)
}

// ConfigsWithSourceLabels calls fn for the configs of kind with
// SourceLabelKeys.
func (s *Snapshot) ConfigsWithSourceLabels(kind ConfigKind, fn func(*Config) bool) {
	s.configsBy(kind, ConfigsWithSourceLabels, 1, fn)
}

func (s *Snapshot) configsBy(kind ConfigKind, ix *Index[Config], key uint64, fn func(*Config) bool) {
	t := &s.configs[kind]
	for _, id := range t.byIndex(indexPos(configSpec.indexes, ix), key) {
		if c := t.at(id); c != nil && !fn(c) {
			return
		}
	}
}

// String returns the string of an interned symbol.
func (s *Snapshot) String(id Sym) string { return s.Symbols.String(id) }

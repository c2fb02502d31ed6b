package index

import "net/netip"

// WorkloadKind says what a workload row came from.
type WorkloadKind uint8

const (
	WorkloadPod WorkloadKind = iota + 1
	WorkloadEntry
)

// WorkloadKey is the primary key of a workload: kind, namespace and name.
type WorkloadKey struct {
	Kind      WorkloadKind
	Namespace Sym
	Name      Sym
}

func (k WorkloadKey) shard() uint64 {
	return mix64(uint64(k.Namespace)<<32 | uint64(k.Name) ^ uint64(k.Kind)<<62)
}

// Workload is a Pod or WorkloadEntry: an instance that can back services and
// run a proxy.
type Workload struct {
	Key            WorkloadKey
	Addr           netip.Addr
	Labels         LabelSetID
	ServiceAccount Sym
	Node           Sym
	Locality       Sym
	Network        Sym
	TLSMode        TLSMode
	// Ports are WorkloadEntry port overrides (port name → number).
	Ports []EndpointPort
	Ready bool
	Hash  uint64
}

func (w *Workload) computeHash() uint64 {
	h := newHasher()
	h.u32(uint32(w.Key.Kind))
	h.sym(w.Key.Namespace)
	h.sym(w.Key.Name)
	h.addr(w.Addr)
	h.u32(uint32(w.Labels))
	h.sym(w.ServiceAccount)
	h.sym(w.Node)
	h.sym(w.Locality)
	h.sym(w.Network)
	h.u32(uint32(w.TLSMode))
	h.u32(uint32(len(w.Ports)))
	for _, p := range w.Ports {
		h.sym(p.Name)
		h.u32(p.Port)
		h.u32(uint32(p.Protocol))
	}
	h.boolean(w.Ready)
	return h.sum()
}

// Namespace is a row of the namespaces table.
type Namespace struct {
	Name   Sym
	Labels LabelSetID
	Hash   uint64
}

func (n *Namespace) computeHash() uint64 {
	h := newHasher()
	h.sym(n.Name)
	h.u32(uint32(n.Labels))
	return h.sum()
}

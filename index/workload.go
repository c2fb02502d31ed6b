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
	h.pair(uint32(w.Key.Namespace), uint32(w.Key.Name))
	h.u64(uint64(w.Key.Kind) | uint64(w.TLSMode)<<8 | bit(w.Ready)<<16 | uint64(uint32(len(w.Ports)))<<32)
	h.addr(w.Addr)
	h.pair(uint32(w.Labels), uint32(w.ServiceAccount))
	h.pair(uint32(w.Node), uint32(w.Locality))
	h.u32(uint32(w.Network))
	hashEndpointPorts(&h, w.Ports)
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
	h.pair(uint32(n.Name), uint32(n.Labels))
	return h.sum()
}

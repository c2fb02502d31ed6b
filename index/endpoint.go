package index

import (
	"net/netip"
	"slices"
)

// Health is an endpoint's health as EDS reports it.
type Health uint8

const (
	HealthHealthy Health = iota
	HealthUnhealthy
	HealthDraining // terminating but still serving
)

// TLSMode is the value of the endpoint's `security.istio.io/tlsMode` label,
// which EDS passes on as `istio` transport socket match metadata.
type TLSMode uint8

const (
	TLSModeDisabled TLSMode = iota
	TLSModeIstio
)

// Endpoint is one backend address of a service. It is 56 bytes; ports live
// in the [EndpointGroup] it belongs to, and labels are an interned set, so
// the per-endpoint heap stays small at 100,000 endpoints.
type Endpoint struct {
	// Addr is the endpoint's IP; invalid when Hostname is set instead (a
	// DNS-resolved ServiceEntry endpoint).
	Addr     netip.Addr
	Hostname Sym
	// Workload names the Pod or WorkloadEntry behind the endpoint (in the
	// group's namespace), 0 when unknown.
	Workload       Sym
	Labels         LabelSetID
	ServiceAccount Sym
	Locality       Sym // "region/zone/subzone"
	Network        Sym
	Weight         uint16 // 0 means the default (1)
	Health         Health
	TLSMode        TLSMode
}

// EndpointPort maps a service port name to the endpoint's port number.
type EndpointPort struct {
	Name     Sym
	Port     uint32
	Protocol Protocol
}

// EndpointGroup is the set of endpoints one source contributes to a service:
// one EndpointSlice, a ServiceEntry's inline endpoints, or the workload entries
// a ServiceEntry selects. Endpoints of a group share their ports.
type EndpointGroup struct {
	// Source names the contributing object, e.g. the EndpointSlice's name.
	Source Sym
	// Pods: the endpoints are Kubernetes pods (an EndpointSlice). Their
	// labels, service account, network and TLS mode come from the Pod with
	// the endpoint's address, now and whenever that Pod changes; the slice
	// need not name it, so an endpoint carries no per-pod string.
	Pods      bool
	Ports     []EndpointPort
	Endpoints []Endpoint
	Hash      uint64
}

func (g *EndpointGroup) computeHash() uint64 {
	h := newHasher()
	h.pair(uint32(g.Source), uint32(bit(g.Pods)))
	// The lengths frame the lists that follow.
	h.pair(uint32(len(g.Ports)), uint32(len(g.Endpoints)))
	hashEndpointPorts(&h, g.Ports)
	for i := range g.Endpoints {
		e := &g.Endpoints[i]
		h.addr(e.Addr)
		h.pair(uint32(e.Hostname), uint32(e.Workload))
		h.pair(uint32(e.Labels), uint32(e.ServiceAccount))
		h.pair(uint32(e.Locality), uint32(e.Network))
		h.u64(uint64(e.Weight) | uint64(e.Health)<<16 | uint64(e.TLSMode)<<24)
	}
	return h.sum()
}

func hashEndpointPorts(h *hasher, ports []EndpointPort) {
	for _, p := range ports {
		h.pair(uint32(p.Name), p.Port)
		h.u32(uint32(p.Protocol))
	}
}

// EndpointShard holds every endpoint of one service, grouped by source and
// sorted by source. It is the unit of the endpoint fast path: a change to one
// EndpointSlice replaces one shard and leaves every other table untouched.
// A shard may exist before (or without) its service.
type EndpointShard struct {
	Service ServiceKey
	Groups  []EndpointGroup // sorted by Source
	Hash    uint64          // combines the groups' hashes
	// one backs Groups when the shard has a single group (most shards):
	// shard and group list in one allocation.
	one [1]EndpointGroup
}

// Len returns the number of endpoints in the shard.
func (s *EndpointShard) Len() int {
	n := 0
	for i := range s.Groups {
		n += len(s.Groups[i].Endpoints)
	}
	return n
}

// initOne makes s the shard of svc holding only g.
func (s *EndpointShard) initOne(svc ServiceKey, g EndpointGroup) {
	*s = EndpointShard{Service: svc}
	s.one[0] = g
	s.Groups = s.one[:]
	s.Hash = combineHash(0, g.Hash)
}

// with returns a copy of s with group g put (replacing the group of the same
// source), or removed when g has no endpoints and no ports.
func (s *EndpointShard) with(svc ServiceKey, g EndpointGroup, remove bool) *EndpointShard {
	var groups []EndpointGroup
	if s != nil {
		groups = s.Groups
	}
	i, found := slices.BinarySearchFunc(groups, g.Source, func(x EndpointGroup, src Sym) int {
		return int(x.Source) - int(src)
	})
	if s == nil && !remove {
		out := &EndpointShard{}
		out.initOne(svc, g)
		return out
	}
	var next []EndpointGroup
	switch {
	case remove && !found:
		return s
	case remove:
		next = make([]EndpointGroup, 0, len(groups)-1)
		next = append(append(next, groups[:i]...), groups[i+1:]...)
	case found:
		next = slices.Clone(groups)
		next[i] = g
	default:
		next = make([]EndpointGroup, 0, len(groups)+1)
		next = append(append(append(next, groups[:i]...), g), groups[i:]...)
	}
	out := &EndpointShard{Service: svc, Groups: next}
	var h uint64
	for i := range next {
		h = combineHash(h, next[i].Hash)
	}
	out.Hash = h
	return out
}

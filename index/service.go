package index

import "net/netip"

// ServiceID addresses a row of the services table. IDs are dense and may be
// reused after a delete; (ID, Hash) identifies a row's content.
type ServiceID uint32

// ServiceKey is the primary key of a service: its hostname and namespace.
// Kubernetes Services and ServiceEntry hosts share this key space, as they do
// in istiod (one service per host).
type ServiceKey struct {
	Host      Sym
	Namespace Sym
}

func (k ServiceKey) shard() uint64 { return mix64(uint64(k.Host)<<32 | uint64(k.Namespace)) }

// Origin says which kind of object a service came from.
type Origin uint8

const (
	OriginKubernetes Origin = iota + 1
	OriginServiceEntry
)

// Resolution is how a proxy finds a service's endpoints.
type Resolution uint8

const (
	// ResolutionClientSideLB: endpoints come from the index (EDS).
	ResolutionClientSideLB Resolution = iota
	// ResolutionDNS: the proxy resolves the host or endpoint hostnames (STRICT_DNS).
	ResolutionDNS
	// ResolutionDNSRoundRobin: LOGICAL_DNS.
	ResolutionDNSRoundRobin
	// ResolutionPassthrough: original destination (ServiceEntry NONE, headless).
	ResolutionPassthrough
)

// Protocol is a port's application protocol, as Istio names them.
type Protocol uint8

const (
	ProtocolUnknown Protocol = iota // auto-detect (Istio's "" / unnamed)
	ProtocolHTTP
	ProtocolHTTP2
	ProtocolHTTPS
	ProtocolGRPC
	ProtocolGRPCWeb
	ProtocolTCP
	ProtocolTLS
	ProtocolMongo
	ProtocolRedis
	ProtocolMySQL
	ProtocolUDP
)

var protocolNames = [...]string{"UNKNOWN", "HTTP", "HTTP2", "HTTPS", "GRPC", "GRPC-Web", "TCP", "TLS", "Mongo", "Redis", "MySQL", "UDP"}

func (p Protocol) String() string {
	if int(p) < len(protocolNames) {
		return protocolNames[p]
	}
	return "UNKNOWN"
}

// IsHTTP reports whether the protocol is served by an HTTP connection manager.
func (p Protocol) IsHTTP() bool {
	return p == ProtocolHTTP || p == ProtocolHTTP2 || p == ProtocolGRPC || p == ProtocolGRPCWeb
}

// Port is one service port.
type Port struct {
	Name       Sym
	Number     uint32
	TargetPort uint32 // Kubernetes targetPort when numeric, else 0
	Protocol   Protocol
}

// ExportTo is a service's or config's visibility. The zero value means
// visible to all namespaces ("*").
type ExportTo struct {
	// Unset: the object sets no exportTo. The mesh's default for its kind
	// (meshConfig default*ExportTo) applies, which rules resolves at lookup
	// time so that a mesh change needs no new rows; VisibleTo reads it as
	// "*", istiod's default when the mesh sets none.
	Unset bool
	// Private: visible only in its own namespace (".").
	Private bool
	// Namespaces, when non-empty, lists the namespaces it is exported to
	// (besides its own when Private is also set). "~" (none) is represented
	// by Private with no namespaces and None set.
	Namespaces []Sym
	// None: exported nowhere ("~").
	None bool
}

// VisibleTo reports whether an object in namespace home with this exportTo
// is visible from namespace ns.
func (e *ExportTo) VisibleTo(home, ns Sym) bool {
	if e.None {
		return false
	}
	if !e.Private && len(e.Namespaces) == 0 {
		return true
	}
	if e.Private && ns == home {
		return true
	}
	for _, n := range e.Namespaces {
		if n == ns {
			return true
		}
	}
	return false
}

// Service is a row of the services table: one host of a Kubernetes Service
// or ServiceEntry. Rows and the slices they reference are immutable once
// applied.
type Service struct {
	Key    ServiceKey
	Name   Sym // the Service's or ServiceEntry's metadata.name
	Origin Origin
	// Addresses are the VIPs: a Kubernetes ClusterIP, or ServiceEntry
	// addresses (which may be CIDRs).
	Addresses    []netip.Prefix
	Ports        []Port
	Resolution   Resolution
	MeshExternal bool
	ExportTo     ExportTo
	Labels       LabelSetID
	// Selector selects workloads (Kubernetes spec.selector or ServiceEntry
	// workloadSelector). HasSelector distinguishes "none" from "empty".
	Selector     LabelSetID
	HasSelector  bool
	ExternalName Sym // Kubernetes ExternalName target
	// SubjectAltNames are a ServiceEntry's subjectAltNames, as written:
	// upstream TLS verifies them with the endpoints' identities.
	SubjectAltNames []Sym
	// Hash is the content hash, computed by the writer when the row is put.
	Hash uint64
}

// PortByNumber returns the port with that number, or nil.
func (s *Service) PortByNumber(n uint32) *Port {
	for i := range s.Ports {
		if s.Ports[i].Number == n {
			return &s.Ports[i]
		}
	}
	return nil
}

func (s *Service) computeHash() uint64 {
	h := newHasher()
	h.pair(uint32(s.Key.Host), uint32(s.Key.Namespace))
	h.pair(uint32(s.Name), uint32(s.ExternalName))
	h.pair(uint32(s.Labels), uint32(s.Selector))
	h.u64(uint64(s.Origin) | uint64(s.Resolution)<<8 | bit(s.MeshExternal)<<16 | bit(s.HasSelector)<<17 |
		bit(s.ExportTo.Private)<<18 | bit(s.ExportTo.None)<<19 | bit(s.ExportTo.Unset)<<20 | uint64(uint32(len(s.ExportTo.Namespaces)))<<32)
	// The lengths frame the lists that follow.
	h.pair(uint32(len(s.Addresses)), uint32(len(s.Ports)))
	for _, a := range s.Addresses {
		h.addr(a.Addr())
		h.u32(uint32(a.Bits()))
	}
	for _, p := range s.Ports {
		h.pair(uint32(p.Name), p.Number)
		h.pair(p.TargetPort, uint32(p.Protocol))
	}
	hashSyms(&h, s.ExportTo.Namespaces)
	h.u32(uint32(len(s.SubjectAltNames)))
	hashSyms(&h, s.SubjectAltNames)
	return h.sum()
}

// hashSyms hashes a list of symbols two by two (its length is hashed
// already, with the row's scalars).
func hashSyms(h *hasher, syms []Sym) {
	for len(syms) >= 2 {
		h.pair(uint32(syms[0]), uint32(syms[1]))
		syms = syms[2:]
	}
	if len(syms) == 1 {
		h.u32(uint32(syms[0]))
	}
}

package engine

import (
	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/index"
)

// Scope is what one proxy class can see of a snapshot: the services exported
// to its namespace. It is computed once per (class, snapshot) and shared by
// every generator's key builder.
//
// A Sidecar resource (the class's Sidecar) narrows it to its egress hosts
// plus the destinations of the VirtualServices they import (sidecar.go);
// without one a proxy sees every service exported to its namespace, as
// istiod does.
type Scope struct {
	Snapshot  *index.Snapshot
	Class     *encode.ProxyClass
	Namespace index.Sym
	// Services lists the visible services sorted by hostname, then by
	// namespace: the order istiod emits clusters in is by hostname too.
	Services []index.ServiceID
	// ByHost maps a hostname to the visible service that wins for it: the
	// one in the proxy's namespace, else the oldest (lowest ID) exported one.
	ByHost map[index.Sym]index.ServiceID
	// Instances are the service ports the proxy itself backs (its inbound
	// side), found by the proxy's IP or workload; empty for routers and for
	// proxies no service selects. Sorted by port number.
	Instances []Instance
	// Egress is the class's Sidecar egress; nil when no Sidecar applies.
	Egress *egress
}

// Instance is one service port a proxy backs.
type Instance struct {
	Service *index.Service
	Port    index.Port
	// TargetPort is the port the workload listens on (the endpoint's port
	// for this service port).
	TargetPort uint32
	// Endpoint is the proxy's own endpoint row in the service's shard.
	Endpoint index.Endpoint
}

// NewScope computes the scope of class in snap.
func NewScope(snap *index.Snapshot, class *encode.ProxyClass) *Scope {
	ns, _ := snap.Symbols.Lookup(class.Namespace)
	s := &Scope{Snapshot: snap, Class: class, Namespace: ns, ByHost: map[index.Sym]index.ServiceID{}}
	s.Egress = newEgress(snap, class.Sidecar, ns)
	visit := func(id index.ServiceID, svc *index.Service) bool {
		if !svc.ExportTo.VisibleTo(svc.Key.Namespace, ns) {
			return true
		}
		cur, ok := s.ByHost[svc.Key.Host]
		if !ok {
			s.ByHost[svc.Key.Host] = id
			return true
		}
		// A service in the proxy's own namespace shadows the same host
		// elsewhere; otherwise the oldest (lowest ID) wins.
		mine, curMine := svc.Key.Namespace == ns, snap.ServiceByID(cur).Key.Namespace == ns
		if (mine && !curMine) || (mine == curMine && id < cur) {
			s.ByHost[svc.Key.Host] = id
		}
		return true
	}
	s.Egress.visitServices(snap, ns, visit)
	s.Services = make([]index.ServiceID, 0, len(s.ByHost))
	for _, id := range s.ByHost {
		s.Services = append(s.Services, id)
	}
	sortServicesByHost(snap, s.Services)
	return s
}

// Service returns the visible service for host, or nil.
func (s *Scope) Service(host index.Sym) *index.Service {
	id, ok := s.ByHost[host]
	if !ok {
		return nil
	}
	return s.Snapshot.ServiceByID(id)
}

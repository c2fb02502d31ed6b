package rules

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
	// GatewayTargets are, for a router, the service ports it backs (its
	// Gateway servers listen on their target ports); empty otherwise.
	GatewayTargets []Instance
	// Egress is the class's Sidecar egress; nil when no Sidecar applies.
	Egress *egress

	// view is the config version's derived state, memo the scope's own,
	// shared with the scope's copies for endpoint-only snapshots (view.go).
	view *configView
	memo *scopeMemo
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

// NewScope computes the scope of class in snap, with derived state of its
// own (an engine's scopes share theirs per config version: NewScopeIn).
func NewScope(snap *index.Snapshot, class *encode.ProxyClass) *Scope {
	return NewScopeIn(nil, snap, class)
}

// NewScopeIn computes the scope of class in snap, sharing view (of snap's
// config version; nil: a view of its own). The scope and its memo (and its
// own view) are allocated together.
//
// It sorts the visible candidates by hostname once (scope_hosts.go) and keeps
// one service per host, so that ByHost is filled once per host and Services
// needs no sort of its own.
func NewScopeIn(view *configView, snap *index.Snapshot, class *encode.ProxyClass) *Scope {
	ns, _ := snap.Symbols.Lookup(class.Namespace)
	var s *Scope
	if view == nil {
		blk := &struct {
			s Scope
			m scopeMemo
			v configView
		}{}
		blk.v.init(snap.ConfigVersion, encode.VerifyFromEnv(), nil, nil)
		s, blk.s.memo, view = &blk.s, &blk.m, &blk.v
	} else {
		blk := &struct {
			s Scope
			m scopeMemo
		}{}
		s, blk.s.memo = &blk.s, &blk.m
	}
	s.Snapshot, s.Class, s.Namespace, s.view = snap, class, ns, view
	s.Egress = newEgress(snap, class.Sidecar, ns)
	o := scopeHostsPool.Get().(*scopeHosts)
	defer scopeHostsPool.Put(o)
	defer o.reset()
	s.Egress.visitServices(view, snap, ns, func(id index.ServiceID, svc *index.Service) bool {
		if view.serviceVisible(snap, svc, ns) {
			o.add(id, svc)
		}
		return true
	})
	o.sort(snap)
	hosts := 0
	for i := range o.keys {
		if i == 0 || o.at(i).host != o.at(i-1).host {
			hosts++
		}
	}
	s.Services = make([]index.ServiceID, 0, hosts)
	s.ByHost = make(map[index.Sym]index.ServiceID, hosts)
	for i := 0; i < len(o.keys); {
		win := o.at(i)
		for i++; i < len(o.keys) && o.at(i).host == win.host; i++ {
			// A service in the proxy's own namespace shadows the same host
			// elsewhere; otherwise the oldest (lowest ID) wins.
			c := o.at(i)
			mine, winMine := c.ns == ns, win.ns == ns
			if (mine && !winMine) || (mine == winMine && c.id < win.id) {
				win = c
			}
		}
		s.Services = append(s.Services, win.id)
		s.ByHost[win.host] = win.id
	}
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

package rules

import (
	"net/netip"
	"strings"

	networking "istio.io/api/networking/v1alpha3"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/index"
)

// A Sidecar's egress listeners, one by one (istiod's
// IstioEgressListenerWrapper). The scope is their union (sidecar.go); the
// outbound listeners (build_lds.go) and each port's route configuration
// (build_rds.go) are built per listener, as istiod builds them:
//
//   - a listener with a port imports, of the services its hosts name, those
//     with that port, and only that port; its listener takes the egress
//     port's protocol, not the service's;
//   - the catch-all listener (no port, the last) gets every other service
//     port, but no bind address and port a listener with a port already
//     holds;
//   - bind sets the listener address; captureMode NONE (or a unix socket)
//     makes the listener bind its port itself (bind_to_port), on the bind
//     address or 127.0.0.1 (::1), instead of receiving connections the
//     virtual outbound listener redirects by original destination.
//
// Only the services a listener's hosts name get listeners and virtual
// hosts; the destinations of its VirtualServices get clusters only (the
// scope's), as in istiod.

// egressListener is one egress listener of a Sidecar.
type egressListener struct {
	hosts []egressHost
	// hasPort is false for the catch-all listener.
	hasPort bool
	port    uint32
	// protocol is the egress port's protocol (SidecarPort.protocol).
	protocol index.Protocol
	// bind is the listener address ("" for istiod's choice).
	bind netip.Addr
	// bindToPort: captureMode NONE, the listener binds its own socket.
	bindToPort bool
	// unsupported: a unix socket or HTTP_PROXY listener, which pilotfish
	// does not build (it builds no listener rather than a wider one).
	unsupported bool
}

// matchPort reports whether the listener imports only its own port of the
// services it names (istiod's needsPortMatch).
func (l *egressListener) matchPort() bool { return l.hasPort && !l.unsupported }

// newEgressListener reads one egress listener; hosts are parsed by the caller.
func newEgressListener(in *networking.IstioEgressListener) egressListener {
	l := egressListener{}
	if p := in.GetPort(); p != nil {
		l.hasPort, l.port = true, p.GetNumber()
		l.protocol = encode.SidecarProtocol(p.GetProtocol())
		if p.GetNumber() == 0 || strings.EqualFold(p.GetProtocol(), "HTTP_PROXY") {
			l.unsupported = true
		}
	}
	if b := in.GetBind(); b != "" {
		if strings.HasPrefix(b, "unix://") {
			l.unsupported = true
		} else if a, err := netip.ParseAddr(b); err == nil {
			l.bind = a
		} else {
			l.unsupported = true // validation rejects it; build nothing rather than guess
		}
	}
	l.bindToPort = in.GetCaptureMode() == networking.CaptureMode_NONE
	return l
}

// sees reports whether the listener's hosts import an object of namespace
// ns named host.
func (l *egressListener) sees(snap *index.Snapshot, ns index.Sym, host index.Sym) bool {
	h := snap.String(host)
	for i := range l.hosts {
		eh := &l.hosts[i]
		if (eh.anyNS || eh.ns == ns) && hostMatches(eh.host, h) {
			return true
		}
	}
	return false
}

// seesConfig reports whether the listener imports a VirtualService.
func (l *egressListener) seesConfig(snap *index.Snapshot, c *index.Config) bool {
	for _, h := range c.Hosts {
		if l.sees(snap, c.Key.Namespace, h) {
			return true
		}
	}
	return false
}

// portScoped reports whether some listener imports one port only: only
// then can a scope's service have ports the proxy does not see.
func (e *egress) portScoped() bool {
	if e == nil {
		return false
	}
	for i := range e.listeners {
		if e.listeners[i].matchPort() {
			return true
		}
	}
	return false
}

// portImported reports whether port of svc (a service of the scope) is
// imported: a listener without port matching imports every port, a
// listener with one imports that port (istiod's serviceMatchingListenerPort,
// merged across listeners by appendSidecarServices). A service the scope
// holds only as a VirtualService destination keeps every port when a
// catch-all listener exists, else the listeners' ports.
func (sc *Scope) portImported(svc *index.Service, port uint32) bool {
	e := sc.Egress
	if !e.portScoped() {
		return true
	}
	seen, catchAll := false, false
	for i := range e.listeners {
		l := &e.listeners[i]
		if l.unsupported {
			continue
		}
		if !l.hasPort {
			catchAll = true
		}
		if !l.sees(sc.Snapshot, svc.Key.Namespace, svc.Key.Host) {
			continue
		}
		seen = true
		if !l.hasPort || l.port == port {
			return true
		}
	}
	if seen {
		return false
	}
	if catchAll {
		return true
	}
	for i := range e.listeners {
		if l := &e.listeners[i]; !l.unsupported && l.port == port {
			return true
		}
	}
	return false
}

// routeListener is the egress listener whose services and VirtualServices
// make the route configuration of port (istiod's GetEgressListenerForRDS):
// the listener with that port, else the catch-all; nil without a Sidecar.
// ok is false when a Sidecar has no listener for the port.
func (sc *Scope) routeListener(port uint32) (l *egressListener, ok bool) {
	e := sc.Egress
	if e == nil {
		return nil, true
	}
	for i := range e.listeners {
		l := &e.listeners[i]
		if l.unsupported {
			continue
		}
		if !l.hasPort || l.port == port {
			return l, true
		}
	}
	return nil, false
}

// routeSees reports whether a route configuration built for listener l
// holds a virtual host of svc (nil l: every scope service).
func (l *egressListener) routeSees(snap *index.Snapshot, svc *index.Service) bool {
	return l == nil || l.sees(snap, svc.Key.Namespace, svc.Key.Host)
}

// routeSeesConfig reports whether l imports the VirtualService c (nil l:
// every one the scope sees).
func (l *egressListener) routeSeesConfig(snap *index.Snapshot, c *index.Config) bool {
	return l == nil || l.seesConfig(snap, c)
}

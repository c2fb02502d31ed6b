package rules

import (
	"cmp"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/puzpuzpuz/xsync/v4"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/envoypatch"
	"github.com/pilotfish-mesh/pilotfish/index"
)

// buildListeners generates a proxy's listeners.
//
// A sidecar subscribes to all of them (wildcard): one outbound listener per
// HTTP port (0.0.0.0_PORT, routes by RDS), one per TCP, TLS or sniffed
// service port with a VIP (VIP_PORT), wildcard listeners for services
// without one, and the virtualOutbound (15001) and virtualInbound (15006)
// listeners that iptables redirects to. A proxyless gRPC client asks for
// listeners by name, "HOST:PORT" (client) or
// "xds.istio.io/grpc/lds/inbound/IP:PORT" (server). A router gets its
// Gateways' listeners (build_gateway.go).
func buildListeners(sc *Scope, mesh *encode.Mesh, cache *encode.Cache, names []string, wildcard bool, dst []Resource) ([]Resource, error) {
	switch sc.Class.Type {
	case encode.ProxyGRPC:
		return buildGRPCListeners(sc, mesh, cache, names, wildcard, dst)
	case encode.ProxyRouter:
		return buildGatewayListeners(sc, mesh, cache, names, wildcard, dst)
	}
	b := ldsBuilders.Get().(*ldsBuilder)
	defer b.release()
	b.sc, b.mesh, b.cache = sc, mesh, cache
	b.view = routeViewOf(sc, mesh)
	b.names, b.wildcard = names, wildcard
	b.outbound()
	wasm := wasmPlugins(sc, mesh)                   // wasm.go
	clientTrace, serverTrace := tracingOf(sc, mesh) // tracing.go
	tel := telemetryOf(sc, mesh)                    // rules/telemetry.go
	lp := sc.Patches(mesh).Family(envoypatch.Listeners)
	var err error
	for i := range b.groups {
		g := &b.groups[i]
		k := &b.key
		*k = encode.OutboundListenerKey{
			Namespace:                sc.Class.Namespace,
			DomainSuffix:             mesh.DomainSuffix,
			OutboundAllowAny:         mesh.OutboundAllowAny,
			EgressCluster:            sc.egressProxyCluster(mesh),
			ProtocolDetectionTimeout: mesh.ProtocolDetectionTimeout,
			PathNormalization:        mesh.PathNormalization,
			Telemetry:                tel,
			Tracing:                  clientTrace,
			Bind:                     addrString(g.bind),
			Port:                     g.port,
			EgressPort:               g.opts.egress,
			EgressProtocol:           g.opts.protocol,
			BindToPort:               g.opts.bindToPort,
			Services:                 g.services,
			Wasm:                     wasmClient(wasm, g.port),
		}
		k.Patches = mayPatchListener(lp, envoypatch.Outbound, g.port)
		if !b.wildcard && len(b.names) > 0 && !slices.Contains(b.names, k.Name()) {
			continue
		}
		if dst, err = appendResource(dst, cache, sc.Snapshot.Names(), k, encode.OutboundListenerGen); err != nil {
			return dst, err
		}
	}
	if b.wanted(encode.VirtualOutboundListenerName) {
		k := &encode.VirtualOutboundKey{OutboundAllowAny: mesh.OutboundAllowAny, EgressCluster: sc.egressProxyCluster(mesh), IPv6: sc.Class.IPv6, Telemetry: tel,
			Patches: mayPatchListener(lp, envoypatch.Outbound, 0)}
		if dst, err = appendResource(dst, cache, sc.Snapshot.Names(), k, encode.VirtualOutboundGen); err != nil {
			return dst, err
		}
	}
	if b.wanted(encode.VirtualInboundListenerName) {
		sec := securityOf(sc, mesh)
		k := &encode.VirtualInboundKey{
			TrustDomain:              mesh.TrustDomain,
			IPv6:                     sc.Class.IPv6,
			ProtocolDetectionTimeout: mesh.ProtocolDetectionTimeout,
			PathNormalization:        mesh.PathNormalization,
			Telemetry:                tel,
			Tracing:                  serverTrace,
			Instances:                inboundInstances(sc, sec),
			MTLS:                     sec.mtls,
			PassthroughPorts:         sec.passthroughPorts(sc),
			Authz:                    sec.authz,
			RequestAuthn:             sec.ra,
			MeshMTLS:                 mesh.MeshMTLS,
			PeerTrustDomains:         mesh.PeerTrustDomains(),
			Wasm:                     wasmServer(wasm),
		}
		setSidecarInbound(sc, sec, k) // a Sidecar's ingress listeners (sidecar_ingress.go)
		k.Patches = mayPatchListener(lp, envoypatch.Inbound, 0)
		if dst, err = appendResource(dst, cache, sc.Snapshot.Names(), k, encode.VirtualInboundGen); err != nil {
			return dst, err
		}
		if dst, err = sidecarIngressListeners(cache, sc.Snapshot.Names(), k, lp, names, wildcard, dst); err != nil {
			return dst, err
		}
	}
	return addedListeners(cache, sc.Snapshot.Names(), lp, []envoypatch.Context{envoypatch.Outbound, envoypatch.Inbound}, names, wildcard, dst)
}

// appendResource appends the cached resource of k, generating it on a miss.
func appendResource[K encode.Key](dst []Resource, cache *encode.Cache, n index.Names, k K, gen encode.ResourceGen[K]) ([]Resource, error) {
	e, err := encode.Resource(cache, n, k, gen)
	if err != nil {
		return dst, fmt.Errorf("listener: %w", err)
	}
	if e.Removed() {
		return dst, nil // an EnvoyFilter REMOVE
	}
	return append(dst, resourceOf(e)), nil
}

// inboundInstances are the proxy's service ports, by target port.
func inboundInstances(sc *Scope, sec *workloadSecurity) []encode.InboundInstance {
	if len(sc.Instances) == 0 {
		return nil
	}
	out := make([]encode.InboundInstance, 0, len(sc.Instances))
	for _, in := range sc.Instances {
		out = append(out, encode.InboundInstance{Service: in.Service, Port: in.Port, TargetPort: in.TargetPort, MTLS: sec.portMTLS(in.TargetPort)})
	}
	slices.SortStableFunc(out, func(a, b encode.InboundInstance) int { return cmp.Compare(a.TargetPort, b.TargetPort) })
	return out
}

// ldsBuilder groups a scope's service ports into outbound listeners.
type ldsBuilder struct {
	sc       *Scope
	mesh     *encode.Mesh
	cache    *encode.Cache
	view     *routeView
	names    []string
	wildcard bool

	groups []ldsGroup
	index  map[ldsGroupKey]int
	key    encode.OutboundListenerKey // reused: keys are not retained
}

type ldsGroupKey struct {
	bind netip.Addr
	port uint32
}

type ldsGroup struct {
	bind     netip.Addr
	port     uint32
	opts     groupOpts
	locked   bool
	services []encode.ListenerService
}

var ldsBuilders = sync.Pool{New: func() any { return &ldsBuilder{index: map[ldsGroupKey]int{}} }}

func (b *ldsBuilder) release() {
	for i := range b.groups {
		clear(b.groups[i].services) // keep the arrays, drop the row pointers
	}
	b.groups = b.groups[:0]
	clear(b.index)
	b.sc, b.mesh, b.cache, b.view, b.names = nil, nil, nil, nil, nil
	b.key = encode.OutboundListenerKey{}
	ldsBuilders.Put(b)
}

func (b *ldsBuilder) wanted(name string) bool {
	return b.wildcard || len(b.names) == 0 || slices.Contains(b.names, name)
}

// outbound places every visible service port on its listener, in scope
// order: istiod's buildSidecarOutboundListeners, one egress listener after
// the other (sidecar_egress.go); without a Sidecar, one catch-all over every
// scope service.
func (b *ldsBuilder) outbound() {
	e := b.sc.Egress
	if e == nil {
		b.catchAll(nil)
		return
	}
	for i := range e.listeners {
		l := &e.listeners[i]
		switch {
		case l.unsupported:
			continue
		case l.hasPort:
			b.portListener(l)
		default:
			// Ports the listeners before took are theirs alone.
			for j := range b.groups {
				b.groups[j].locked = true
			}
			b.catchAll(l)
		}
	}
}

// wildcardAddr is the proxy's wildcard address, localAddr its loopback.
func (b *ldsBuilder) wildcardAddr() netip.Addr {
	if b.sc.Class.IPv6 {
		return netip.IPv6Unspecified()
	}
	return netip.IPv4Unspecified()
}

func (b *ldsBuilder) localAddr() netip.Addr {
	if b.sc.Class.IPv6 {
		return netip.IPv6Loopback()
	}
	return netip.AddrFrom4([4]byte{127, 0, 0, 1})
}

// listenerService is the key part of one service on a listener.
func (b *ldsBuilder) listenerService(svc *index.Service) encode.ListenerService {
	ls := encode.ListenerService{Service: svc, DestinationRules: b.view.tcpRules[svc.Key.Host], SourceLabels: b.view.tcpSourceLabels[svc.Key.Host]}
	if vss := b.view.tcpRoutes[svc.Key.Host]; len(vss) > 0 {
		ls.VirtualServices = vss
		for _, c := range vss {
			ls.Destinations = appendUnique(ls.Destinations, b.view.tcpDestinations[c])
		}
	}
	return ls
}

// binding is where a listener of an egress listener goes: its bind
// address, or with captureMode NONE the loopback; invalid: per service.
func (b *ldsBuilder) binding(l *egressListener) (netip.Addr, bool) {
	switch {
	case l == nil:
		return netip.Addr{}, false
	case l.bind.IsValid():
		return l.bind, l.bindToPort
	case l.bindToPort:
		return b.localAddr(), true
	}
	return netip.Addr{}, false
}

// portListener places the services an egress listener with a port imports
// on that port, with the egress port's protocol: HTTP on the wildcard
// address, others on the service's VIP (or the wildcard without one),
// unless the listener binds an address of its own.
func (b *ldsBuilder) portListener(l *egressListener) {
	snap := b.sc.Snapshot
	bind, toPort := b.binding(l)
	for _, id := range b.sc.Services {
		svc := snap.ServiceByID(id)
		if isAlias(svc) || svc.PortByNumber(l.port) == nil || !l.sees(snap, svc.Key.Namespace, svc.Key.Host) {
			continue
		}
		at := bind
		if !at.IsValid() {
			at = b.wildcardAddr()
			if !l.protocol.IsHTTP() && hasVIP(svc) {
				at = svc.Addresses[0].Addr()
			}
		}
		b.add(at, l.port, groupOpts{egress: true, protocol: l.protocol, bindToPort: toPort}, b.listenerService(svc))
	}
}

// catchAll places every service port an egress listener without a port
// imports (every scope service when l is nil): HTTP ports on the wildcard
// address, other ports on the service's VIP, on the wildcard address without
// one (CIDR addresses match by prefix), or on each endpoint of a headless
// Kubernetes service; all on the listener's bind address when it has one.
func (b *ldsBuilder) catchAll(l *egressListener) {
	snap := b.sc.Snapshot
	wildcard := b.wildcardAddr()
	bind, toPort := b.binding(l)
	opts := groupOpts{bindToPort: toPort}
	for _, id := range b.sc.Services {
		svc := snap.ServiceByID(id)
		if isAlias(svc) || (l != nil && !l.sees(snap, svc.Key.Namespace, svc.Key.Host)) {
			continue
		}
		ls := b.listenerService(svc)
		for _, p := range svc.Ports {
			if p.Protocol == index.ProtocolUDP {
				continue
			}
			switch {
			case bind.IsValid():
				b.add(bind, p.Number, opts, ls)
			case p.Protocol.IsHTTP():
				b.add(wildcard, p.Number, opts, ls)
			case hasVIP(svc):
				b.add(svc.Addresses[0].Addr(), p.Number, opts, ls)
			case len(svc.Addresses) > 0:
				b.add(wildcard, p.Number, opts, ls) // CIDR: prefix match on the wildcard listener
			case svc.Resolution == index.ResolutionPassthrough:
				b.headless(svc, p, ls, wildcard)
			default:
				b.add(wildcard, p.Number, opts, ls)
			}
		}
	}
}

// hasVIP reports whether a service has a single-address VIP.
func hasVIP(svc *index.Service) bool {
	return len(svc.Addresses) > 0 && svc.Addresses[0].IsSingleIP() && !svc.Addresses[0].Addr().IsUnspecified()
}

// headless gives a headless Kubernetes service's TCP or sniffed port one
// listener per endpoint address; a ServiceEntry with resolution NONE and
// no endpoints gets the wildcard listener.
func (b *ldsBuilder) headless(svc *index.Service, p index.Port, ls encode.ListenerService, wildcard netip.Addr) {
	sh := b.sc.Snapshot.Endpoints(svc.Key)
	if sh == nil || sh.Len() == 0 {
		if svc.Origin != index.OriginKubernetes && !svc.HasSelector {
			b.add(wildcard, p.Number, groupOpts{}, ls)
		}
		return
	}
	for _, g := range sh.Groups {
		for _, e := range g.Endpoints {
			if e.Addr.IsValid() {
				b.add(e.Addr, p.Number, groupOpts{}, ls)
			}
		}
	}
}

// groupOpts are a listener's settings besides its address: whether it
// is an egress listener's port (whose protocol then applies) and whether
// it binds its own socket.
type groupOpts struct {
	egress     bool
	protocol   index.Protocol
	bindToPort bool
}

// add puts a service on the listener of bind:port, creating it with opts;
// a listener an earlier egress listener locked takes no more services.
func (b *ldsBuilder) add(bind netip.Addr, port uint32, opts groupOpts, ls encode.ListenerService) {
	k := ldsGroupKey{bind: bind, port: port}
	i, ok := b.index[k]
	if !ok {
		i = len(b.groups)
		b.index[k] = i
		if i < cap(b.groups) {
			// Reuse the group's service list from an earlier build.
			b.groups = b.groups[:i+1]
			svcs := b.groups[i].services[:0]
			b.groups[i] = ldsGroup{bind: bind, port: port, opts: opts, services: svcs}
		} else {
			b.groups = append(b.groups, ldsGroup{bind: bind, port: port, opts: opts})
		}
	}
	g := &b.groups[i]
	if g.locked {
		return
	}
	// A service reaches a listener once per port; only a repeated port
	// number (or endpoint address) adds it twice in a row.
	if n := len(g.services); n == 0 || g.services[n-1].Service != ls.Service {
		g.services = append(g.services, ls)
	}
}

// addrStrings caches the text of listener addresses (VIPs, endpoint
// addresses), so that a build formats none: listener keys name their bind
// address as a string. It is dropped when it grows past a bound (addresses
// of deleted services and pods are never asked for again).
var addrStrings = xsync.NewMap[netip.Addr, string]()

const addrStringsMax = 1 << 16

func addrString(a netip.Addr) string {
	if s, ok := addrStrings.Load(a); ok {
		return s
	}
	s := a.String()
	if addrStrings.Size() > addrStringsMax {
		addrStrings.Clear()
	}
	addrStrings.Store(a, s)
	return s
}

func appendUnique(dst, src []*index.Service) []*index.Service {
	for _, s := range src {
		if !slices.Contains(dst, s) {
			dst = append(dst, s)
		}
	}
	return dst
}

// buildGRPCListeners is istiod's grpcgen BuildListeners: for each requested
// "HOST[:PORT]" (short names resolve in the client's namespace) the
// service's listeners, named as requested; for each requested server
// listener one on the proxy's service port.
func buildGRPCListeners(sc *Scope, mesh *encode.Mesh, cache *encode.Cache, names []string, wildcard bool, dst []Resource) ([]Resource, error) {
	snap := sc.Snapshot
	var err error
	if wildcard || len(names) == 0 {
		for _, id := range sc.Services {
			svc := snap.ServiceByID(id)
			host := snap.String(svc.Key.Host)
			for _, p := range svc.Ports {
				k := &encode.GRPCListenerKey{Name: encode.GRPCListenerName(host, p.Number), Service: svc, Port: p.Number}
				if dst, err = appendResource(dst, cache, sc.Snapshot.Names(), k, encode.GRPCListenerGen); err != nil {
					return dst, err
				}
			}
		}
		return dst, nil
	}
	for _, name := range names {
		if !utf8.ValidString(name) {
			continue // no resource can have this name
		}
		if addr, ok := strings.CutPrefix(name, encode.GRPCServerListenerPrefix); ok {
			if dst, err = grpcServerListener(sc, mesh, cache, name, addr, dst); err != nil {
				return dst, err
			}
			continue
		}
		host, portStr, err := net.SplitHostPort(name)
		hasPort := err == nil
		if !hasPort {
			host = name
		}
		svc := grpcService(sc, mesh, host)
		if svc == nil {
			continue
		}
		for _, p := range svc.Ports {
			if hasPort && strconv.FormatUint(uint64(p.Number), 10) != portStr {
				continue
			}
			k := &encode.GRPCListenerKey{Name: encode.GRPCListenerName(host, p.Number), Service: svc, Port: p.Number}
			if dst, err = appendResource(dst, cache, sc.Snapshot.Names(), k, encode.GRPCListenerGen); err != nil {
				return dst, err
			}
		}
	}
	return dst, nil
}

// grpcService finds the service a gRPC client names: the host itself, or
// the FQDN of a short name in the client's namespace (istiod's
// tryFindFQDN).
func grpcService(sc *Scope, mesh *encode.Mesh, host string) *index.Service {
	if h, ok := sc.Snapshot.Symbols.Lookup(host); ok {
		if svc := sc.Service(h); svc != nil {
			return svc
		}
	}
	ns := sc.Class.Namespace
	domain := ns + ".svc." + mesh.DomainSuffix
	var fqdn string
	switch {
	case !strings.Contains(host, "."):
		fqdn = host + "." + domain
	case strings.HasSuffix(host, "."+ns):
		fqdn = strings.TrimSuffix(host, "."+ns) + "." + domain
	case strings.HasSuffix(host, "."+ns+".svc"):
		fqdn = strings.TrimSuffix(host, "."+ns+".svc") + "." + domain
	default:
		return nil
	}
	if h, ok := sc.Snapshot.Symbols.Lookup(fqdn); ok {
		return sc.Service(h)
	}
	return nil
}

// grpcServerListener answers "xds.istio.io/grpc/lds/inbound/IP:PORT" when
// the proxy serves a service on PORT (istiod skips ports it does not).
func grpcServerListener(sc *Scope, mesh *encode.Mesh, cache *encode.Cache, name, addr string, dst []Resource) ([]Resource, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return dst, nil
	}
	// The name carries the server's listen address (istio-agent fills in
	// IP:PORT); anything else cannot be a listener address.
	if _, err := netip.ParseAddr(host); err != nil {
		return dst, nil
	}
	port, ok := parsePort(portStr)
	if !ok || !slices.ContainsFunc(sc.Instances, func(in Instance) bool { return in.TargetPort == port }) {
		return dst, nil
	}
	sec := securityOf(sc, mesh)
	k := &encode.GRPCServerListenerKey{Name: name, Host: host, Port: port, MTLS: grpcServerMTLS(sc, sec, port), Authz: sec.authz}
	return appendResource(dst, cache, sc.Snapshot.Names(), k, encode.GRPCServerListenerGen)
}

package rules

import (
	"cmp"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/envoypatch"
	"github.com/pilotfish-mesh/pilotfish/index"
)

// buildRoutes generates the RouteConfigurations a proxy asked for.
//
// Sidecars ask for the route configurations their listeners name: "PORT"
// for a port's shared HTTP listener, "HOST:PORT" for a protocol-sniffed
// service's own listener. A port's configuration is assembled from one
// cached virtual host per service (encode.VirtualHostKey) plus istiod's
// catch-all: when one service changes, one virtual host is re-encoded and
// the rest are concatenated from the cache. Proxyless gRPC clients ask for
// "outbound|PORT||HOST", a configuration with that service's virtual host.
//
// With wildcard set (a client subscribing to all routes), every port's
// configuration is built.
func buildRoutes(sc *Scope, mesh *encode.Mesh, cache *encode.Cache, names []string, wildcard bool, dst []Resource) ([]Resource, error) {
	b := rdsBuilders.Get().(*rdsBuilder)
	defer b.release()
	b.sc, b.mesh, b.cache, b.names = sc, mesh, cache, sc.Snapshot.Names()
	b.view = routeViewOf(sc, mesh)
	if wildcard && sc.Class.Type == encode.ProxyRouter {
		names = gatewayRouteNames(sc, mesh)
	} else if wildcard {
		names = b.allRouteNames()
	}
	var err error
	for _, name := range names {
		if dst, err = b.build(name, dst); err != nil {
			return dst, err
		}
	}
	return dst, nil
}

// rdsBuilder holds one build's scratch space; builders are pooled so that a
// warm build allocates only the resources it returns.
type rdsBuilder struct {
	sc    *Scope
	names index.Names
	mesh  *encode.Mesh
	cache *encode.Cache
	view  *routeView

	keys    []encode.VirtualHostKey
	parts   []*encode.Entry
	domains []encode.DomainHash
	known   map[uint64]struct{}
	claimed map[uint64]struct{}
	exclude []uint64
}

var rdsBuilders = sync.Pool{New: func() any {
	return &rdsBuilder{known: map[uint64]struct{}{}, claimed: map[uint64]struct{}{}}
}}

func (b *rdsBuilder) release() {
	clear(b.keys)
	b.keys = b.keys[:0]
	clear(b.parts)
	b.parts = b.parts[:0]
	b.sc, b.mesh, b.cache, b.view, b.names = nil, nil, nil, nil, index.Names{}
	rdsBuilders.Put(b)
}

func (b *rdsBuilder) build(name string, dst []Resource) ([]Resource, error) {
	if !utf8.ValidString(name) {
		return dst, nil // no resource can have this name
	}
	if b.sc.Class.Type == encode.ProxyGRPC {
		return b.buildGRPC(name, dst)
	}
	if b.sc.Class.Type == encode.ProxyRouter {
		return b.buildGatewayRoute(name, dst)
	}
	if port, ok := parsePort(name); ok {
		return b.buildPort(name, port, "", dst)
	}
	if host, portStr, err := net.SplitHostPort(name); err == nil {
		if port, ok := parsePort(portStr); ok {
			return b.buildPort(name, port, host, dst)
		}
	}
	// istiod answers an unknown name with an empty configuration.
	return b.emptyRoute(name, dst)
}

func parsePort(s string) (uint32, bool) {
	p, err := strconv.ParseUint(s, 10, 32)
	if err != nil || p == 0 || p > 65535 {
		return 0, false
	}
	return uint32(p), true
}

// routedPort reports whether a service port gets a virtual host in its
// port's route configuration: HTTP and protocol-sniffed ports do.
func routedPort(svc *index.Service, port uint32) bool {
	p := svc.PortByNumber(port)
	return p != nil && (p.Protocol.IsHTTP() || p.Protocol == index.ProtocolUnknown)
}

// buildPort builds the configuration for a port ("80"), or with sniffed
// set the configuration of one protocol-sniffed service ("HOST:80").
func (b *rdsBuilder) buildPort(name string, port uint32, sniffedHost string, dst []Resource) ([]Resource, error) {
	snap := b.sc.Snapshot
	b.keys = b.keys[:0]
	// A Sidecar's egress listener for the port decides which services and
	// VirtualServices the configuration holds (sidecar_egress.go).
	el, held := b.sc.routeListener(port)
	// VirtualService hosts first, in precedence order, then the services no
	// VirtualService routes, as istiod orders its virtual host wrappers.
	for i := range b.view.wrappers {
		w := &b.view.wrappers[i]
		if !held || !el.routeSeesConfig(snap, w.vs) {
			continue
		}
		n := len(b.keys)
		for _, svc := range w.services {
			if routedPort(svc, port) && !isAlias(svc) && el.routeSees(snap, svc) {
				b.keys = append(b.keys, b.key(port, svc, "", w.vs))
			}
		}
		if len(b.keys) > n || port == 80 {
			// istiod keeps a VirtualService's non-service hosts on the ports
			// of its services, or on port 80 when it has none there.
			for _, h := range w.hosts {
				b.keys = slices.Insert(b.keys, n, b.key(port, nil, h, w.vs))
				n++
			}
		}
	}
	for _, id := range b.sc.Services {
		svc := snap.ServiceByID(id)
		if !held || !routedPort(svc, port) || isAlias(svc) || !el.routeSees(snap, svc) {
			continue
		}
		if _, routed := b.view.routedBy[svc.Key.Host]; routed {
			continue
		}
		b.keys = append(b.keys, b.key(port, svc, "", nil))
	}
	if sniffedHost != "" {
		return b.buildSniffed(name, sniffedHost, dst)
	}
	// No service routes on the port, or the port is spelled with leading
	// zeros ("080"): names a client can invent without bound.
	transient := len(b.keys) == 0 || len(name)-strings.LastIndexByte(name, ':')-1 != decimalLen(port)
	b.dedupeDomains()

	b.parts = b.parts[:0]
	for i := range b.keys {
		e, err := encode.Part(b.cache, b.names, &b.keys[i], encode.VirtualHostGen)
		if err != nil {
			return dst, fmt.Errorf("route %s: %w", name, err)
		}
		if e.Name != "" {
			b.parts = append(b.parts, e)
		}
	}
	// Sorted by name as istiod sorts virtual hosts; of two with one name
	// (a host two VirtualServices claim) the first stays.
	slices.SortStableFunc(b.parts, func(x, y *encode.Entry) int { return cmp.Compare(x.Name, y.Name) })
	b.parts = slices.CompactFunc(b.parts, func(x, y *encode.Entry) bool { return x.Name == y.Name })
	if c := b.sc.egressProxyCluster(b.mesh); c != "" {
		e, err := encode.Part(b.cache, b.names, &encode.EgressCatchAllKey{Cluster: c}, encode.EgressCatchAllGen)
		if err != nil {
			return dst, fmt.Errorf("route %s: %w", name, err)
		}
		b.parts = append(b.parts, e)
	} else {
		b.parts = append(b.parts, encode.CatchAllVirtualHost(b.mesh.OutboundAllowAny))
	}
	if transient {
		return b.appendTransientRoute(name, encode.RouteConfigSidecar, dst)
	}
	return b.appendRouteConfig(name, encode.RouteConfigSidecar, dst)
}

// buildSniffed keeps the one virtual host of the sniffed service, with
// domain "*" (istiod's getVirtualHostsForSniffedServicePort).
func (b *rdsBuilder) buildSniffed(name, host string, dst []Resource) ([]Resource, error) {
	b.parts = b.parts[:0]
	for i := range b.keys {
		k := &b.keys[i]
		if k.Service == nil || b.sc.Snapshot.String(k.Service.Key.Host) != host {
			continue
		}
		k.Sniffed = true
		e, err := encode.Part(b.cache, b.names, k, encode.VirtualHostGen)
		if err != nil {
			return dst, fmt.Errorf("route %s: %w", name, err)
		}
		if e.Name != "" {
			b.parts = append(b.parts, e)
		}
		break
	}
	if len(b.parts) == 0 {
		return b.appendTransientRoute(name, encode.RouteConfigSidecar, dst) // no such service
	}
	return b.appendRouteConfig(name, encode.RouteConfigSidecar, dst)
}

func (b *rdsBuilder) key(port uint32, svc *index.Service, host string, vs *index.Config) encode.VirtualHostKey {
	k := encode.VirtualHostKey{
		Type:           b.sc.Class.Type,
		Namespace:      b.sc.Class.Namespace,
		DomainSuffix:   b.mesh.DomainSuffix,
		Port:           port,
		Service:        svc,
		Host:           host,
		VirtualService: vs,
		Retry:          b.mesh.DefaultRetry,
	}
	if svc != nil {
		k.Aliases = b.view.aliases[svc.Key.Host]
	}
	if vs != nil {
		k.Destinations = b.view.destinations[vs]
		k.DestinationRules = b.view.vsHashRules[vs]
		k.SourceLabels = b.view.sourceLabels[vs]
	}
	if svc != nil {
		// The service's own rule, for its default route (also the fallback
		// of a VirtualService with no route on this port).
		if own := b.view.hashRules[svc.Key.Host]; len(own) > 0 && !slices.Contains(k.DestinationRules, own[0]) {
			if len(k.DestinationRules) == 0 {
				k.DestinationRules = own
			} else {
				k.DestinationRules = append(slices.Clip(k.DestinationRules), own[0])
			}
		}
	}
	return k
}

// dedupeDomains gives each key the domains an earlier virtual host already
// claims (istiod's dedupeDomains): a domain is served by the first virtual
// host that lists it, and an expanded name yields to a service of that
// hostname. Domains are compared by hash, so nothing is built for it.
func (b *rdsBuilder) dedupeDomains() {
	clear(b.known)
	clear(b.claimed)
	var kb [2]uint64
	for i := range b.keys {
		for _, h := range b.keys[i].KnownHostHashes(b.names, kb[:0]) {
			b.known[h] = struct{}{}
		}
	}
	b.exclude = b.exclude[:0]
	for i := range b.keys {
		k := &b.keys[i]
		b.domains = k.AppendDomainHashes(b.names, b.domains[:0])
		start := len(b.exclude)
		for _, d := range b.domains {
			if _, ok := b.claimed[d.Hash]; ok {
				b.exclude = append(b.exclude, d.Hash)
				continue
			}
			if _, ok := b.known[d.Hash]; ok && d.Alt {
				b.exclude = append(b.exclude, d.Hash)
				continue
			}
			b.claimed[d.Hash] = struct{}{}
		}
		if len(b.exclude) > start {
			// A fresh slice: keys are hashed after this loop, and cached
			// parts must not share a scratch array.
			k.Exclude = slices.Clone(b.exclude[start:])
		}
	}
}

func (b *rdsBuilder) appendRouteConfig(name string, opts encode.RouteConfigOptions, dst []Resource) ([]Resource, error) {
	return b.appendRouteConfigTo(b.cache, name, opts, dst)
}

// appendTransientRoute is appendRouteConfig for a name no configuration
// defines (an unknown name, a host or port no service has): a client may
// invent any number of those, so their answers are not cached.
func (b *rdsBuilder) appendTransientRoute(name string, opts encode.RouteConfigOptions, dst []Resource) ([]Resource, error) {
	return b.appendRouteConfigTo(b.cache.Transient(), name, opts, dst)
}

func (b *rdsBuilder) appendRouteConfigTo(cache *encode.Cache, name string, opts encode.RouteConfigOptions, dst []Resource) ([]Resource, error) {
	k := &encode.RouteConfigKey{Name: name, Options: opts, VirtualHosts: b.parts}
	k.Patches, k.Context = b.routePatches(name)
	if k.Context == envoypatch.Gateway {
		k.ServerPorts = gatewayOf(b.sc, b.mesh).serverPorts(name) // gateway_ports.go
	}
	e, err := encode.RouteConfigurationEntry(cache, k)
	if err != nil {
		return dst, fmt.Errorf("route %s: %w", name, err)
	}
	if e.Removed() {
		return dst, nil // an EnvoyFilter REMOVE
	}
	return append(dst, resourceOf(e)), nil
}

// emptyRoute is istiod's answer to a route name it does not know.
func (b *rdsBuilder) emptyRoute(name string, dst []Resource) ([]Resource, error) {
	b.parts = b.parts[:0]
	return b.appendTransientRoute(name, encode.RouteConfigValidateOnly, dst)
}

// allRouteNames lists the sidecar route configurations the scope's
// listeners reference: one per HTTP or sniffed port.
func (b *rdsBuilder) allRouteNames() []string {
	var ports []uint32
	snap := b.sc.Snapshot
	for _, id := range b.sc.Services {
		svc := snap.ServiceByID(id)
		if b.sc.Class.Type == encode.ProxyGRPC {
			continue
		}
		for _, p := range svc.Ports {
			if (p.Protocol.IsHTTP() || p.Protocol == index.ProtocolUnknown) && !slices.Contains(ports, p.Number) {
				ports = append(ports, p.Number)
			}
		}
	}
	slices.Sort(ports)
	names := make([]string, 0, len(ports))
	for _, p := range ports {
		names = append(names, strconv.FormatUint(uint64(p), 10))
	}
	return names
}

// buildGRPC builds "outbound|PORT||HOST" for a proxyless gRPC client: the
// service's virtual host alone (istiod's grpcgen filters the port's virtual
// hosts to the requested host).
func (b *rdsBuilder) buildGRPC(name string, dst []Resource) ([]Resource, error) {
	port, host, ok := parseOutboundCluster(name)
	if !ok {
		return dst, nil // istiod ignores names it cannot parse
	}
	b.parts = b.parts[:0]
	if h, found := b.sc.Snapshot.Symbols.Lookup(host); found {
		if svc := b.sc.Service(h); svc != nil && svc.PortByNumber(port) != nil {
			k := b.key(port, svc, "", b.view.routedBy[h])
			e, err := encode.Part(b.cache, b.names, &k, encode.VirtualHostGen)
			if err != nil {
				return dst, fmt.Errorf("route %s: %w", name, err)
			}
			if e.Name != "" {
				b.parts = append(b.parts, e)
			}
			// Only "outbound|PORT||HOST" as pilotfish spells it is cached:
			// a subset or leading zeros make names a client can invent
			// without bound (the subset does not change the answer).
			if len(name) == len("outbound|||")+decimalLen(port)+len(host) {
				return b.appendRouteConfig(name, encode.RouteConfigPlain, dst)
			}
		}
	}
	return b.appendTransientRoute(name, encode.RouteConfigPlain, dst)
}

// parseOutboundCluster parses "outbound|PORT|SUBSET|HOST".
func parseOutboundCluster(name string) (port uint32, host string, ok bool) {
	rest, found := strings.CutPrefix(name, "outbound|")
	if !found {
		return 0, "", false
	}
	portStr, rest, found := strings.Cut(rest, "|")
	if !found {
		return 0, "", false
	}
	_, host, found = strings.Cut(rest, "|")
	if !found || host == "" {
		return 0, "", false
	}
	port, ok = parsePort(portStr)
	return port, host, ok
}

package encode

import (
	"fmt"
	"slices"

	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/pilotfish-mesh/pilotfish/index"
)

// A gateway virtual host is encoded directly: its name, domains, the
// encoded routes, require_tls and include_request_attempt_count, in field
// order. The routes are the costly part, and they are often shared: a
// Gateway with an HTTP and an HTTPS server for the same hosts gets the same
// routes in http.80 and in its https.443 configuration when no route
// depends on the listener port. The routes are therefore a cached part of
// their own (GatewayRoutesKey, Port 0 when port-free), translated and
// marshaled once for every virtual host that has them; a virtual host is
// a cached part whose key holds every input, hosts and RequireTLS included.

// VirtualHost field numbers (envoy.config.route.v3.VirtualHost).
const (
	vhName                       protowire.Number = 1
	vhDomains                    protowire.Number = 2
	vhRequireTLS                 protowire.Number = 4
	vhIncludeRequestAttemptCount protowire.Number = 14
)

// GatewayRoutesKey is every input of the routes of a gateway virtual
// host (GatewayVirtualHostKey without its hosts and RequireTLS, which only
// the virtual host around the routes reads), with Port 0 when no route
// depends on the port: the routes part it keys is then shared by the
// virtual hosts of one VirtualService on every port.
type GatewayRoutesKey struct {
	Namespace        string
	DomainSuffix     string
	Port             uint32
	Sources          []GatewayRouteSource
	Destinations     []*index.Service
	DestinationRules []HostDestinationRule
	SourceLabels     string
	// Retry is the mesh's defaultHttpRetryPolicy (VirtualHostKey.Retry).
	Retry HTTPRetry
}

// Hash feeds every field.
func (k *GatewayRoutesKey) Hash() uint64 {
	h := NewHasher("GatewayRoutesKey")
	h.Str(k.Namespace)
	h.Str(k.DomainSuffix)
	h.U32(k.Port)
	h.Int(len(k.Sources))
	for i := range k.Sources {
		h.Str(k.Sources[i].Gateway)
		hashCfgRow(&h, k.Sources[i].VirtualService)
	}
	hashSvcRows(&h, k.Destinations)
	hashHostRules(&h, k.DestinationRules)
	h.Str(k.SourceLabels)
	k.Retry.hashInto(&h)
	return h.Sum()
}

// hashHostRules feeds host-keyed DestinationRules (as VirtualHostKey's).
func hashHostRules(h *Hasher, rules []HostDestinationRule) {
	h.Int(len(rules))
	for i := range rules {
		h.Str(rules[i].Host)
		hashCfgRow(h, rules[i].Rule)
	}
}

// routesKeyAt is the routes key of k's virtual host on port.
func (k *GatewayVirtualHostKey) routesKeyAt(port uint32) *GatewayRoutesKey {
	rk := k.routesKeyValue(port)
	return &rk
}

func (k *GatewayVirtualHostKey) routesKeyValue(port uint32) GatewayRoutesKey {
	return GatewayRoutesKey{Namespace: k.Namespace, DomainSuffix: k.DomainSuffix, Port: port, Sources: k.Sources, Destinations: k.Destinations,
		DestinationRules: k.DestinationRules, SourceLabels: k.SourceLabels, Retry: k.Retry}
}

// SetRoutesPort sets k.RoutesPort: 0 when k's routes are the same on every
// port, else k.Port. The engine calls it once, when it builds the key.
func (k *GatewayVirtualHostKey) SetRoutesPort(n index.Names) {
	rk := k.routesKeyValue(k.Port)
	k.RoutesPort = k.Port
	if rk.portFree(n) {
		k.RoutesPort = 0
	}
}

// routesKey is the key of k's routes part.
func (k *GatewayVirtualHostKey) routesKey() GatewayRoutesKey {
	return k.routesKeyValue(k.RoutesPort)
}

// GatewayVirtualHostGen generates GatewayVirtualHostKey's part: encoded
// around the routes part of k.routesKey (translated and marshaled once for
// all the virtual hosts that share it), with GatewayVirtualHost as its
// reference. A key whose RoutesPort is neither 0 nor its Port is refused.
var GatewayVirtualHostGen = partGenComposed(KindVirtualHost, GatewayVirtualHost, appendGatewayVirtualHostPart)

// gatewayRoutesRef builds the routes part as a message: a VirtualHost
// holding only the routes, whose bare encoding is the routes field a
// virtual host embeds.
func gatewayRoutesRef(n index.Names, k *GatewayRoutesKey) (string, proto.Message) {
	return "", &route.VirtualHost{Routes: gatewayRoutes(n, k)}
}

// appendGatewayVirtualHostPart encodes k's virtual host around the routes
// part of k.routesKey. On a miss of that part it encodes the virtual host
// with its routes in one buffer and stores the routes as a view of it: one
// allocation, and no second copy of the routes (entries are immutable, so
// the view is too).
func appendGatewayVirtualHostPart(c *Cache, n index.Names, k *GatewayVirtualHostKey) (string, []byte, error) {
	if k.RoutesPort != 0 && k.RoutesPort != k.Port {
		return "", nil, fmt.Errorf("gateway virtual host %s: routes port %d, virtual host port %d", k.Name(), k.RoutesPort, k.Port)
	}
	rk := k.routesKey()
	var own []byte // the virtual host, when the routes were encoded here
	name := k.Name()
	routes, err := c.get(KindGatewayRoutes, rk.Hash()^namesMix(n), func() (string, []byte, error) {
		p := planGatewayRoutes(n, &rk)
		b := make([]byte, 0, vhSize(k, name, p.total))
		b = appendVHHead(b, k, name)
		start := len(b)
		b, err := p.append(b)
		if err != nil {
			return "", nil, err
		}
		r := b[start:len(b):len(b)]
		own = appendVHTail(b, k)
		if c.verify {
			_, ref := gatewayRoutesRef(n, &rk)
			if got := barePayload(r, func() (string, proto.Message) { return gatewayRoutesRef(n, &rk) }); !proto.Equal(got, ref) {
				panic("encode: verify: the direct encoding of gateway routes differs from its reference generator")
			}
		}
		return "", r, nil
	}, func(b []byte) proto.Message {
		return barePayload(b, func() (string, proto.Message) { return gatewayRoutesRef(n, &rk) })
	})
	if err != nil {
		return "", nil, err
	}
	if own != nil {
		return name, own, nil
	}
	return name, appendGatewayVirtualHost(nil, k, name, routes.Bytes), nil
}

// routesPortFree reports whether k's routes are the same on every port.
// The listener port enters a gateway route through a match's port, a
// redirect, the cluster of a destination without a port (unless its
// service has one port), an ExternalName destination, and the decorator of
// a route without a single destination cluster; a route using none of these
// is port-free. Conservative: false means only that sharing is not tried.
func (k *GatewayRoutesKey) portFree(n index.Names) bool {
	for _, d := range k.Destinations {
		if d.ExternalName != 0 {
			return false
		}
	}
	ports := newOnlyPorts(n, k.Destinations)
	destFree := func(d *networking.Destination, vsNS string) bool {
		if d.GetHost() == "" {
			return false
		}
		if d.GetPort() != nil {
			return true
		}
		_, ok := ports.get(rtResolveHost(d.GetHost(), vsNS, k.DomainSuffix))
		return ok
	}
	for i := range k.Sources {
		c := k.Sources[i].VirtualService
		vs, _ := c.Spec.(*networking.VirtualService)
		if vs == nil {
			continue
		}
		vsNS := n.String(c.Key.Namespace)
		for _, in := range vs.GetHttp() {
			if in.GetDelegate() != nil {
				continue // dropped (route.go)
			}
			if in.GetRedirect() != nil || in.GetDirectResponse() != nil || len(in.GetRoute()) != 1 {
				return false
			}
			for _, m := range in.GetMatch() {
				if m.GetPort() != 0 {
					return false
				}
			}
			if !destFree(in.GetRoute()[0].GetDestination(), vsNS) {
				return false
			}
			if in.GetMirror() != nil && !destFree(in.GetMirror(), vsNS) {
				return false
			}
			for _, m := range in.GetMirrors() {
				if m.GetDestination() != nil && !destFree(m.GetDestination(), vsNS) {
					return false
				}
			}
		}
	}
	return true
}

// AppendGatewayRoutes appends the encoding of k's routes as the routes
// field of a VirtualHost (each route tagged and length-prefixed). Routes are
// translated without their metadata, which is encoded once per
// VirtualService and spliced into each route at its field's place.
func AppendGatewayRoutes(dst []byte, n index.Names, k *GatewayRoutesKey) ([]byte, error) {
	p := planGatewayRoutes(n, k)
	return p.append(slices.Grow(dst, p.total))
}

// gwRoutesPlan is a virtual host's routes translated (or, simple ones,
// ready to write) and sized.
type gwRoutesPlan struct {
	items []gwRouteItem
	metas [][]byte // each source's metadata field (more than one source)
	meta0 []byte   // the one source's
	sizes []int    // each route's size without its metadata
	total int      // the encoding's size
}

func planGatewayRoutes(n index.Names, k *GatewayRoutesKey) gwRoutesPlan {
	var p gwRoutesPlan
	p.items = gatewayRouteItems(n, k, true, gwDirect)
	if len(k.Sources) > 1 {
		p.metas = make([][]byte, len(k.Sources))
	}
	p.sizes = make([]int, len(p.items))
	for i := range p.items {
		it := &p.items[i]
		md := p.meta(it.src)
		if md == nil {
			c := k.Sources[it.src].VirtualService
			md = appendRouteMetadataField(nil, n.String(c.Key.Namespace), n.String(c.Key.Name))
			if p.metas != nil {
				p.metas[it.src] = md
			} else {
				p.meta0 = md
			}
		}
		if it.r != nil {
			p.sizes[i] = routeSize(it.r)
		} else {
			p.sizes[i] = it.simpleSize()
		}
		p.total += protowire.SizeTag(gwVHRoutes) + protowire.SizeBytes(p.sizes[i]+len(md))
	}
	return p
}

// meta returns source i's metadata field (nil until encoded).
func (p *gwRoutesPlan) meta(i int) []byte {
	if p.metas != nil {
		return p.metas[i]
	}
	return p.meta0
}

func (p *gwRoutesPlan) append(dst []byte) ([]byte, error) {
	var err error
	for i := range p.items {
		it := &p.items[i]
		if it.r == nil {
			dst = it.appendSimple(dst, p.sizes[i], p.meta(it.src))
		} else if dst, err = appendRouteWithMetadata(dst, it.r, p.sizes[i], p.meta(it.src)); err != nil {
			return dst, err
		}
	}
	return dst, nil
}

// Route and Metadata field numbers.
const (
	gwVHRoutes            protowire.Number = 3
	routeMetadata         protowire.Number = 4
	mdFilterMetadata      protowire.Number = 1
	structFields          protowire.Number = 1
	mapKey                protowire.Number = 1
	mapValue              protowire.Number = 2
	valueStringValue      protowire.Number = 3
	rtConfigMetadataKey                    = "istio"
	rtConfigMetadataField                  = "config"
)

// appendRouteMetadataField appends Route.metadata holding
// rtConfigMetadata("virtual-service", ns, name): tag, length and the
// message, each map of one entry written key then value.
func appendRouteMetadataField(dst []byte, ns, name string) []byte {
	path := rtConfigPath("virtual-service", ns, name)
	value := protowire.SizeTag(valueStringValue) + protowire.SizeBytes(len(path))
	field := protowire.SizeTag(mapKey) + protowire.SizeBytes(len(rtConfigMetadataField)) + protowire.SizeTag(mapValue) + protowire.SizeBytes(value)
	strct := protowire.SizeTag(structFields) + protowire.SizeBytes(field)
	entry := protowire.SizeTag(mapKey) + protowire.SizeBytes(len(rtConfigMetadataKey)) + protowire.SizeTag(mapValue) + protowire.SizeBytes(strct)
	md := protowire.SizeTag(mdFilterMetadata) + protowire.SizeBytes(entry)
	dst = protowire.AppendTag(dst, routeMetadata, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(md))
	dst = protowire.AppendTag(dst, mdFilterMetadata, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(entry))
	dst = protowire.AppendTag(dst, mapKey, protowire.BytesType)
	dst = protowire.AppendString(dst, rtConfigMetadataKey)
	dst = protowire.AppendTag(dst, mapValue, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(strct))
	dst = protowire.AppendTag(dst, structFields, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(field))
	dst = protowire.AppendTag(dst, mapKey, protowire.BytesType)
	dst = protowire.AppendString(dst, rtConfigMetadataField)
	dst = protowire.AppendTag(dst, mapValue, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(value))
	dst = protowire.AppendTag(dst, valueStringValue, protowire.BytesType)
	return protowire.AppendString(dst, path)
}

// appendRouteWithMetadata appends r (which has no metadata, and encodes in
// size bytes) as a routes
// field with the encoded metadata field md inserted before r's first field
// numbered above it: the fields before it are the match and the action, the
// decorator (always set) follows, so the result is the encoding of r with
// its metadata in either marshaler's field order.
func appendRouteWithMetadata(dst []byte, r *route.Route, size int, md []byte) ([]byte, error) {
	dst = protowire.AppendTag(dst, gwVHRoutes, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(size+len(md)))
	start := len(dst)
	dst = slices.Grow(dst, size+len(md))
	var err error
	if vt, ok := any(r).(vtMarshaler); ok {
		dst = dst[:start+size]
		_, err = vt.MarshalToSizedBufferVTStrict(dst[start:])
	} else {
		dst, err = proto.MarshalOptions{Deterministic: true}.MarshalAppend(dst, r)
	}
	if err != nil {
		return dst[:start], err
	}
	at := len(dst)
	for i := start; i < len(dst); {
		num, typ, n := protowire.ConsumeTag(dst[i:])
		if n < 0 {
			return dst, protowire.ParseError(n)
		}
		if num > routeMetadata {
			at = i
			break
		}
		m := protowire.ConsumeFieldValue(num, typ, dst[i+n:])
		if m < 0 {
			return dst, protowire.ParseError(m)
		}
		i += n + m
	}
	dst = append(dst, md...)
	copy(dst[at+len(md):], dst[at:len(dst)-len(md)])
	copy(dst[at:], md)
	return dst, nil
}

// routeSize is the size of r's encoding.
func routeSize(r *route.Route) int {
	if vt, ok := any(r).(vtMarshaler); ok {
		return vt.SizeVT()
	}
	return proto.MarshalOptions{Deterministic: true}.Size(r)
}

// AppendGatewayVirtualHost appends the encoding of GatewayVirtualHost(k)
// given its encoded routes (the routes part of k.routesKey).
func AppendGatewayVirtualHost(dst []byte, k *GatewayVirtualHostKey, routes []byte) (string, []byte) {
	name := k.Name()
	return name, appendGatewayVirtualHost(dst, k, name, routes)
}

func appendGatewayVirtualHost(dst []byte, k *GatewayVirtualHostKey, name string, routes []byte) []byte {
	if dst == nil {
		dst = make([]byte, 0, vhSize(k, name, len(routes)))
	}
	dst = appendVHHead(dst, k, name)
	dst = append(dst, routes...)
	return appendVHTail(dst, k)
}

// vhSize bounds the size of a gateway virtual host with routes of size
// routes.
func vhSize(k *GatewayVirtualHostKey, name string, routes int) int {
	n := protowire.SizeTag(vhName) + protowire.SizeBytes(len(name)) + routes + 4
	for _, d := range k.Hosts {
		n += protowire.SizeTag(vhDomains) + protowire.SizeBytes(len(d))
	}
	return n
}

// appendVHHead appends the fields before routes: name and domains.
func appendVHHead(dst []byte, k *GatewayVirtualHostKey, name string) []byte {
	if name != "" {
		dst = protowire.AppendTag(dst, vhName, protowire.BytesType)
		dst = protowire.AppendString(dst, name)
	}
	for _, d := range k.Hosts {
		dst = protowire.AppendTag(dst, vhDomains, protowire.BytesType)
		dst = protowire.AppendString(dst, d)
	}
	return dst
}

// appendVHTail appends the fields after routes: require_tls and
// include_request_attempt_count.
func appendVHTail(dst []byte, k *GatewayVirtualHostKey) []byte {
	if k.RequireTLS {
		dst = protowire.AppendTag(dst, vhRequireTLS, protowire.VarintType)
		dst = protowire.AppendVarint(dst, uint64(route.VirtualHost_ALL))
	}
	dst = protowire.AppendTag(dst, vhIncludeRequestAttemptCount, protowire.VarintType)
	return protowire.AppendVarint(dst, 1)
}

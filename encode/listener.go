package encode

import (
	"slices"
	"strconv"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/pilotfish-mesh/pilotfish/envoypatch"
	"github.com/pilotfish-mesh/pilotfish/index"
)

// ListenerType is the type URL of LDS resources.
const ListenerType = "type.googleapis.com/envoy.config.listener.v3.Listener"

// ClusterType is the type URL of CDS resources.
const ClusterType = "type.googleapis.com/envoy.config.cluster.v3.Cluster"

// OutboundListenerKey is every input of one sidecar outbound listener: a
// bind address and port, and the services whose ports land on it in the
// order istiod adds them (which decides conflicts). An HTTP port's services
// share one wildcard listener whose routes come from RDS; a TCP or TLS
// service with a VIP gets a listener of its own.
type OutboundListenerKey struct {
	// Namespace is the proxy's namespace (VirtualService sourceNamespace).
	Namespace    string
	DomainSuffix string
	// OutboundAllowAny: unmatched traffic goes to PassthroughCluster, else
	// to BlackHoleCluster.
	OutboundAllowAny bool
	// EgressCluster replaces PassthroughCluster when set (a Sidecar's
	// outboundTrafficPolicy.egressProxy).
	EgressCluster string
	// ProtocolDetectionTimeout bounds HTTP inspection on sniffing listeners.
	ProtocolDetectionTimeout time.Duration
	// PathNormalization is the mesh's (meshConfig pathNormalization).
	PathNormalization PathNormalization
	// Telemetry is the class's stats filter and access logs (nil: none).
	Telemetry *Telemetry
	// Tracing is the HTTP chains' tracing (client side).
	Tracing Tracing
	// Bind is the listener's address: a wildcard ("0.0.0.0", "::"), a VIP,
	// or an endpoint address of a headless service.
	Bind string
	Port uint32
	// EgressPort: the listener is a Sidecar egress listener's port, whose
	// protocol (EgressProtocol) replaces the services' port protocols.
	EgressPort     bool
	EgressProtocol index.Protocol
	// BindToPort: the listener binds its own socket (an egress listener
	// with captureMode NONE) instead of taking connections the virtual
	// outbound listener hands over by original destination.
	BindToPort bool
	// Services contribute filter chains, in order.
	Services []ListenerService
	// Wasm are the WasmPlugins for this port of the sidecar's client side
	// (mode CLIENT): every service chain gets them, the catch-all chain
	// none, as in istiod.
	Wasm WasmFilters
	// Patches are the EnvoyFilter patches that may apply to the resource
	// (nil: none; envoyfilter.go).
	Patches *envoypatch.Set
}

// ListenerService is one service port on an outbound listener.
type ListenerService struct {
	Service *index.Service
	// VirtualServices are those with TCP or TLS routes for the service's
	// host, in precedence order.
	VirtualServices []*index.Config
	// Destinations are the services those routes name (a destination
	// without a port uses the service's only port).
	Destinations []*index.Service
	// DestinationRules are the rules of the service and of those
	// destinations that set TCP settings the proxy filter applies (idle
	// timeout, maximum connection duration, source IP hashing).
	DestinationRules []HostDestinationRule
	// SourceLabels are the proxy's labels whose keys the VirtualServices'
	// match sourceLabels name, as VirtualHostKey.SourceLabels.
	SourceLabels string
}

// Hash feeds every field.
func (k *OutboundListenerKey) Hash() uint64 {
	h := NewHasher("OutboundListenerKey")
	h.Str(k.Namespace)
	h.Str(k.DomainSuffix)
	h.Bool(k.OutboundAllowAny)
	h.Str(k.EgressCluster)
	h.U64(uint64(k.ProtocolDetectionTimeout))
	h.U32(uint32(k.PathNormalization))
	k.Telemetry.hashInto(&h)
	k.Tracing.hashInto(&h)
	h.Str(k.Bind)
	h.U32(k.Port)
	h.Bool(k.EgressPort)
	h.U32(uint32(k.EgressProtocol))
	h.Bool(k.BindToPort)
	h.Int(len(k.Services))
	for i := range k.Services {
		s := &k.Services[i]
		hashSvcRow(&h, s.Service)
		hashCfgRows(&h, s.VirtualServices)
		hashSvcRows(&h, s.Destinations)
		h.Int(len(s.DestinationRules))
		for j := range s.DestinationRules {
			h.Str(s.DestinationRules[j].Host)
			hashCfgRow(&h, s.DestinationRules[j].Rule)
		}
		h.Str(s.SourceLabels)
	}
	k.Wasm.hash(&h)
	hashPatches(&h, k.Patches)
	return h.Sum()
}

func (k *OutboundListenerKey) patchSet() (*envoypatch.Set, envoypatch.Context) {
	return k.Patches, envoypatch.Outbound
}

// Name returns istiod's listener name, "BIND_PORT".
func (k *OutboundListenerKey) Name() string {
	return k.Bind + "_" + strconv.FormatUint(uint64(k.Port), 10)
}

// lsChain is istiod's filterChainOpts: the match of a filter chain and
// either an HTTP connection manager or network filters.
type lsChain struct {
	sni       []string
	cidrs     []netipPrefixString
	alpn      []string
	transport string
	metadata  *core.Metadata
	http      *hcmOpts
	filters   []*listener.Filter
}

// netipPrefixString is a CIDR as text ("10.0.0.0/8").
type netipPrefixString = string

func (c *lsChain) matchAll() bool {
	return (len(c.sni) == 0 || slices.Contains(c.sni, "*")) && len(c.alpn) == 0 && c.transport == "" && len(c.cidrs) == 0
}

// conflicts is istiod's filterChainOpts.conflictsWith: equal matches.
func (c *lsChain) conflicts(o *lsChain) bool {
	if c.transport != o.transport || !slices.Equal(c.alpn, o.alpn) {
		return false
	}
	return lsSameSet(c.sni, o.sni, "*") && lsSameSet(c.cidrs, o.cidrs, "")
}

func lsSameSet(a, b []string, ignore string) bool {
	norm := func(s []string) []string {
		out := make([]string, 0, len(s))
		for _, x := range s {
			if x != ignore && x != "*" {
				out = append(out, x)
			}
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	return slices.Equal(norm(a), norm(b))
}

func (c *lsChain) filterChainMatch() *listener.FilterChainMatch {
	if c.matchAll() {
		return nil
	}
	m := &listener.FilterChainMatch{ApplicationProtocols: c.alpn, TransportProtocol: c.transport}
	if len(c.sni) > 0 && !slices.Contains(c.sni, "*") {
		m.ServerNames = slices.Sorted(slices.Values(c.sni))
	}
	for _, s := range slices.Sorted(slices.Values(c.cidrs)) {
		if r := lsCidrRange(s); r != nil && r.AddressPrefix != "0.0.0.0" {
			m.PrefixRanges = append(m.PrefixRanges, r)
		}
	}
	return m
}

// Listener protocol classes, as istiod's ModelProtocolToListenerProtocol.
type lsClass uint8

const (
	lsSkip lsClass = iota
	lsHTTP
	lsTCP
	lsAuto
)

func lsClassOf(p index.Protocol) lsClass {
	switch {
	case p.IsHTTP():
		return lsHTTP
	case p == index.ProtocolUnknown:
		return lsAuto
	case p == index.ProtocolUDP:
		return lsSkip
	}
	return lsTCP
}

// lsEntry is istiod's outboundListenerEntry: the chains of the listener so
// far and its protocol (ProtocolUnknown once it sniffs).
type lsEntry struct {
	protocol index.Protocol
	chains   []*lsChain
}

// Conflict kinds between a service and the listener already on its port.
const (
	lsNoConflict = iota
	lsHTTPOverTCP
	lsTCPOverHTTP
	lsTCPOverTCP
	lsTCPOverAuto
	lsAutoOverHTTP
	lsAutoOverTCP
)

// OutboundListenerGen generates OutboundListenerKey's listener.
var OutboundListenerGen = resourceGen(KindListener, ListenerType, OutboundListener)

// OutboundListener generates a sidecar outbound listener: istiod's
// buildSidecarOutboundListener over the key's services, then
// buildListenerFromEntry.
func OutboundListener(n index.Names, key *OutboundListenerKey) (string, proto.Message) {
	k := olIn{key, n}
	var e *lsEntry
	for i := range k.Services {
		e = k.add(e, &k.Services[i])
	}
	if e == nil {
		return k.Name(), &listener.Listener{Name: k.Name()}
	}
	return k.Name(), k.build(e)
}

func (k *OutboundListenerKey) wildcard() bool { return k.Bind == "0.0.0.0" || k.Bind == "::" }

// protocolOf is the protocol svc's port takes on the listener: the egress
// port's, else the service port's (the service has the port).
func (k *OutboundListenerKey) protocolOf(svc *index.Service) index.Protocol {
	if k.EgressPort {
		return k.EgressProtocol
	}
	return svc.PortByNumber(k.Port).Protocol
}

func (k olIn) add(e *lsEntry, ls *ListenerService) *lsEntry {
	if ls.Service.PortByNumber(k.Port) == nil {
		return e
	}
	p := k.protocolOf(ls.Service)
	listenerProto := p
	conflict := lsNoConflict
	var opts []*lsChain
	switch lsClassOf(p) {
	case lsHTTP:
		if e != nil {
			if lsClassOf(e.protocol) != lsTCP {
				return e // the port's HTTP listener exists: RDS carries the host
			}
			conflict = lsHTTPOverTCP
		}
		opts = []*lsChain{k.httpChain(ls, false)}
		if k.wildcard() {
			opts[0].alpn = lsPlaintextHTTPALPNs
			opts[0].transport = "raw_buffer"
			listenerProto = index.ProtocolUnknown
		}
	case lsTCP:
		opts = k.tcpChains(ls)
		if e != nil {
			switch lsClassOf(e.protocol) {
			case lsHTTP:
				conflict = lsTCPOverHTTP
			case lsTCP:
				conflict = lsTCPOverTCP
			default:
				conflict = lsTCPOverAuto
			}
		}
	case lsAuto:
		if e != nil {
			switch lsClassOf(e.protocol) {
			case lsHTTP:
				conflict = lsAutoOverHTTP
			case lsTCP:
				conflict = lsAutoOverTCP
			default:
				conflict = lsTCPOverAuto
				opts = k.tcpChains(ls)
			}
		}
		if opts == nil {
			opts = k.tcpChains(ls)
			hc := k.httpChain(ls, true)
			hc.alpn = lsPlaintextHTTPALPNs
			hc.transport = "raw_buffer"
			opts = append(opts, hc)
		}
	default:
		return e
	}
	// Mongo and MySQL never share a port with other protocols.
	if e != nil && conflict != lsNoConflict && p != e.protocol &&
		(lsWellKnown(p) || lsWellKnown(e.protocol)) {
		return e
	}
	switch conflict {
	case lsNoConflict, lsAutoOverHTTP:
		return &lsEntry{protocol: listenerProto, chains: opts}
	case lsHTTPOverTCP, lsTCPOverHTTP, lsAutoOverTCP:
		e.chains = lsMerge(e.chains, opts)
		e.protocol = index.ProtocolUnknown
	default:
		e.chains = lsMerge(e.chains, opts)
	}
	return e
}

func lsWellKnown(p index.Protocol) bool { return p == index.ProtocolMongo || p == index.ProtocolMySQL }

// lsMerge is istiod's mergeTCPFilterChains: incoming chains whose match
// duplicates an existing one are dropped.
func lsMerge(cur, incoming []*lsChain) []*lsChain {
	out := slices.Clip(cur)
	for _, in := range incoming {
		if !slices.ContainsFunc(out, in.conflicts) {
			out = append(out, in)
		}
	}
	return out
}

var lsPlaintextHTTPALPNs = []string{"http/1.1", "h2c"}

// httpChain is istiod's buildSidecarOutboundHTTPListenerOpts: RDS named
// after the port, or "HOST:PORT" for a sniffed service on its own VIP.
func (k olIn) httpChain(ls *ListenerService, auto bool) *lsChain {
	rds := strconv.FormatUint(uint64(k.Port), 10)
	if auto && !k.wildcard() {
		rds = k.names.String(ls.Service.Key.Host) + ":" + rds
	}
	return &lsChain{http: &hcmOpts{rds: rds, protocol: k.protocolOf(ls.Service)}}
}

// build is istiod's buildListenerFromEntry.
func (k olIn) build(e *lsEntry) *listener.Listener {
	name := k.Name()
	l := &listener.Listener{
		Name:                             name,
		Address:                          lsAddress(k.Bind, k.Port),
		TrafficDirection:                 core.TrafficDirection_OUTBOUND,
		ContinueOnListenerFiltersTimeout: true,
	}
	if k.BindToPort {
		// Only a listener that binds a socket reads the accept batch size.
		l.MaxConnectionsToAcceptPerSocketEvent = wrapperspb.UInt32(1)
	} else {
		l.BindToPort = wrapperspb.Bool(false)
	}
	needTLS, needHTTP := false, false
	for _, c := range e.chains {
		needTLS = needTLS || len(c.sni) > 0
		needHTTP = needHTTP || len(c.alpn) > 0
	}
	if needTLS {
		l.ListenerFilters = append(l.ListenerFilters, lfTLSInspector)
	}
	if needHTTP {
		l.ListenerFilters = append(l.ListenerFilters, lfHTTPInspector)
		l.ListenerFiltersTimeout = durationpb.New(k.ProtocolDetectionTimeout)
	} else {
		l.ListenerFiltersTimeout = durationpb.New(0)
	}
	var def *listener.FilterChain
	for _, c := range e.chains {
		fc := &listener.FilterChain{
			Metadata:                      c.metadata,
			TransportSocketConnectTimeout: lsTransportSocketConnectTimeout,
		}
		if c.http != nil {
			o := *c.http
			o.statPrefix = "outbound_" + name + ";"
			o.path = k.PathNormalization
			o.tel = k.Telemetry
			o.wasm = k.Wasm
			o.tracing = &k.Tracing
			fc.Filters = []*listener.Filter{lsHCMFilter(lsHCM(o))}
			if k.Wasm.hasNet(k.Port) {
				fc.Filters = append(k.Wasm.netAround(nil, k.Port, nil, nil), fc.Filters...)
			}
		} else {
			filters := c.filters
			if k.Wasm.hasNet(k.Port) {
				filters = append(k.Wasm.netAround(nil, k.Port, nil, nil), filters...)
			}
			fc.Filters = withTelemetryTCP(k.Telemetry, sideOutbound, true, filters)
		}
		if c.matchAll() {
			def = fc
		} else {
			fc.FilterChainMatch = c.filterChainMatch()
			l.FilterChains = append(l.FilterChains, fc)
		}
	}
	switch {
	case def != nil && len(l.FilterChains) == 0:
		l.FilterChains = []*listener.FilterChain{def}
	case def != nil:
		l.DefaultFilterChain = def
	default:
		l.DefaultFilterChain = &listener.FilterChain{
			FilterChainMatch: &listener.FilterChainMatch{},
			Name:             "PassthroughFilterChain",
			Filters:          withTelemetryTCP(k.Telemetry, sideOutbound, true, []*listener.Filter{k.fallthroughFilter()}),
		}
	}
	return l
}

// lsTransportSocketConnectTimeout is istiod's 15s handshake bound.
var lsTransportSocketConnectTimeout = durationpb.New(15 * time.Second)

// fallthroughFilter sends unmatched traffic to PassthroughCluster or the
// egress proxy (ALLOW_ANY), or BlackHoleCluster (REGISTRY_ONLY).
func (k olIn) fallthroughFilter() *listener.Filter {
	c := catchAllCluster(k.OutboundAllowAny, k.EgressCluster)
	return lsTCPProxy(c, c)
}

// catchAllCluster is istiod's egress cluster for unknown destinations.
func catchAllCluster(allowAny bool, egress string) string {
	switch {
	case !allowAny:
		return blackholeCluster
	case egress != "":
		return egress
	}
	return passthroughCluster
}

// lsCidrRange converts "10.0.0.0/8" or an address to a CidrRange.
func lsCidrRange(s string) *core.CidrRange {
	p, err := parsePrefixOrAddr(s)
	if err != nil {
		return nil
	}
	return &core.CidrRange{AddressPrefix: p.Addr().String(), PrefixLen: wrapperspb.UInt32(uint32(p.Bits()))}
}

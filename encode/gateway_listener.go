package encode

import (
	"strconv"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tcp "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	matcher "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/pilotfish-mesh/pilotfish/envoypatch"
	"github.com/pilotfish-mesh/pilotfish/index"
)

// GatewayListenerKey is every input of a router's listener on one port:
// the merged servers of the Gateways that select it on that port.
type GatewayListenerKey struct {
	// Namespace is the router's namespace (sourceNamespace matches).
	Namespace    string
	DomainSuffix string
	Port         uint32
	// IPv6 binds "::" instead of "0.0.0.0".
	IPv6 bool
	// Topology is the router's gatewayTopology (PROXY_CONFIG).
	Topology GatewayTopology
	Servers  []GatewayServer
	// Authz and RequestAuthn are the security policies selecting the
	// router (its HTTP servers get their jwt_authn and RBAC filters).
	Authz        AuthzPolicies
	RequestAuthn JWTRules
	// PathNormalization is the mesh's (meshConfig pathNormalization).
	PathNormalization PathNormalization
	// Telemetry is the class's stats filter and access logs (nil: none).
	Telemetry *Telemetry
	// Tracing is the HTTP servers' tracing (client side, as istiod's
	// gateway class).
	Tracing Tracing
	// TLSDefaults is meshConfig.tlsDefaults (Mesh.TLSDefaults): curves,
	// suites and minimum version of SIMPLE and MUTUAL servers, under the
	// server's own.
	TLSDefaults TLSDefaults
	// Wasm are the WasmPlugins for this port of the router (mode CLIENT,
	// as istiod takes a gateway's).
	Wasm WasmFilters
	// Patches are the EnvoyFilter patches that may apply to the resource
	// (nil: none; envoyfilter.go).
	Patches *envoypatch.Set
}

// Hash feeds every field.
func (k *GatewayListenerKey) Hash() uint64 {
	h := NewHasher("GatewayListenerKey")
	h.Str(k.Namespace)
	h.Str(k.DomainSuffix)
	h.U32(k.Port)
	h.Bool(k.IPv6)
	k.Topology.hashInto(&h)
	h.Int(len(k.Servers))
	for i := range k.Servers {
		s := &k.Servers[i]
		hashCfgRow(&h, s.Gateway)
		h.Int(s.Index)
		h.Str(s.RouteName)
		hashCfgRows(&h, s.VirtualServices)
		hashSvcRows(&h, s.Services)
	}
	k.Authz.hashInto(&h)
	k.RequestAuthn.hashInto(&h)
	h.U32(uint32(k.PathNormalization))
	k.Telemetry.hashInto(&h)
	k.Tracing.hashInto(&h)
	k.TLSDefaults.hashInto(&h)
	k.Wasm.hash(&h)
	hashPatches(&h, k.Patches)
	return h.Sum()
}

func (k *GatewayListenerKey) patchSet() (*envoypatch.Set, envoypatch.Context) {
	return k.Patches, envoypatch.Gateway
}

func (k *GatewayListenerKey) bind() string {
	if k.IPv6 {
		return "::"
	}
	return "0.0.0.0"
}

// Name is istiod's gateway listener name, "0.0.0.0_PORT".
func (k *GatewayListenerKey) Name() string {
	return k.bind() + "_" + strconv.FormatUint(uint64(k.Port), 10)
}

// ALPN values istiod sets on gateway TLS servers and on AUTO_PASSTHROUGH
// chains (every Istio mTLS ALPN).
var (
	gwALPNHTTP      = []string{"h2", "http/1.1"}
	gwALPNIstioMTLS = []string{"istio", "istio-peer-exchange", "istio-http/1.0", "istio-http/1.1", "istio-h2"}
)

// GatewayListenerGen generates GatewayListenerKey's listener, encoded
// directly.
var GatewayListenerGen = resourceGenAppend(KindListener, ListenerType, GatewayListener, AppendGatewayListener)

// GatewayListener generates a router's listener for one port (istiod's
// buildGatewayListeners): one HTTP filter chain for plain HTTP servers,
// one TLS-terminating chain per HTTPS server matched by SNI, TCP proxies for
// TCP servers and for the tls routes of PASSTHROUGH servers, and one chain
// per service port for AUTO_PASSTHROUGH. AppendGatewayListener encodes the
// same listener directly.
func GatewayListener(n index.Names, key *GatewayListenerKey) (string, proto.Message) {
	k := gwlIn{key, n}
	name, l, chains, parts := gatewayListener(k)
	for i := range chains {
		l.FilterChains = append(l.FilterChains, chains[i].filterChain(k, parts))
	}
	return name, l
}

// gwChain is one filter chain of a gateway listener: built (fc), or an
// HTTP connection manager chain (http) that AppendGatewayListener encodes
// without building it.
type gwChain struct {
	fc   *listener.FilterChain
	http *gwHTTPChain
}

// gwHTTPChain is a chain of one HTTP connection manager: matched by SNI
// server names (none: no match) and terminating TLS with socket (nil: no
// TLS).
type gwHTTPChain struct {
	names           []string
	socket          *core.TransportSocket
	statPrefix, rds string
}

// filterChain returns c as a message.
func (c *gwChain) filterChain(k gwlIn, parts *gwHCMParts) *listener.FilterChain {
	if c.fc != nil {
		return c.fc
	}
	h := c.http
	fc := &listener.FilterChain{
		TransportSocket: h.socket, Filters: k.httpFilters(parts.filter(k, h.statPrefix, h.rds)),
		TransportSocketConnectTimeout: lsTransportSocketConnectTimeout,
	}
	if len(h.names) > 0 {
		fc.FilterChainMatch = &listener.FilterChainMatch{ServerNames: h.names}
	}
	return fc
}

// gatewayListener returns k's listener without its filter chains, and the
// chains; no chain (name "") means no listener: nothing to serve on the
// port.
func gatewayListener(k gwlIn) (string, *listener.Listener, []gwChain, *gwHCMParts) {
	name := k.Name()
	l := &listener.Listener{
		Name:             name,
		Address:          lsAddress(k.bind(), k.Port),
		TrafficDirection: core.TrafficDirection_OUTBOUND,
		AccessLog:        k.Telemetry.accessLogs(sideGateway, true),
	}
	var chains []gwChain
	httpDone := false
	needTLSInspector := false
	// Servers with equal TLS settings share one transport socket (one Any
	// marshaled once): a gateway with a thousand ISTIO_MUTUAL servers has
	// one.
	sockets := map[string]*core.TransportSocket{}
	tlsSocket := func(t *networking.ServerTLSSettings) *core.TransportSocket {
		b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(t)
		if ts, ok := sockets[string(b)]; ok {
			return ts
		}
		ts := gatewayTLS(t, gwALPNHTTP, &k.TLSDefaults)
		sockets[string(b)] = ts
		return ts
	}
	// Every HTTP chain's HCM is composed from one marshal (gateway_hcm.go).
	var parts *gwHCMParts
	httpChain := func(h *gwHTTPChain) gwChain {
		if parts == nil {
			p := k.hcmParts()
			parts = &p
		}
		if !parts.ok || h.rds == "" {
			return gwChain{fc: (&gwChain{http: h}).filterChain(k, parts)}
		}
		return gwChain{http: h}
	}
	for i := range k.Servers {
		s := &k.Servers[i]
		srv := s.Server()
		if srv == nil {
			continue
		}
		p := GatewayProtocol(srv)
		switch {
		case p.IsHTTP():
			if httpDone {
				continue // all plain HTTP servers of a port share http.PORT
			}
			httpDone = true
			// istiod's default: the direction and listener name, then its
			// delimiter (";"), which Istio's stats tag extraction reads.
			chains = append(chains, httpChain(&gwHTTPChain{statPrefix: "outbound_" + name + ";", rds: s.RouteName}))
		case p == index.ProtocolHTTPS && !IsPassthrough(srv):
			needTLSInspector = true
			statPrefix := srv.GetName()
			if statPrefix == "" {
				statPrefix = "outbound_" + name + ";"
			}
			chains = append(chains, httpChain(&gwHTTPChain{
				names:      sniNames(HostsForNamespace(srv.GetHosts(), "*", "")),
				socket:     tlsSocket(srv.GetTls()),
				statPrefix: statPrefix,
				rds:        s.RouteName,
			}))
		case srv.GetTls().GetMode() == networking.ServerTLSSettings_AUTO_PASSTHROUGH:
			needTLSInspector = true
			for _, fc := range k.autoPassthroughChains(s) {
				chains = append(chains, gwChain{fc: fc})
			}
		case IsPassthrough(srv):
			needTLSInspector = true
			for _, fc := range k.passthroughChains(s, srv) {
				chains = append(chains, gwChain{fc: fc})
			}
		default: // TCP, or TLS terminated then forwarded as TCP
			f := k.tcpRouteFilter(s, srv)
			if f == nil {
				continue
			}
			fc := &listener.FilterChain{Filters: k.tcpFilters(f)}
			if srv.GetTls() != nil {
				needTLSInspector = true
				fc.FilterChainMatch = sniMatch(HostsForNamespace(srv.GetHosts(), "*", ""))
				fc.TransportSocket = tlsSocket(srv.GetTls())
			}
			chains = append(chains, gwChain{fc: fc})
		}
	}
	if len(chains) == 0 {
		return "", l, nil, parts // nothing to serve on this port: no listener
	}
	for _, c := range chains {
		if c.fc != nil {
			// istiod bounds every gateway chain's handshake
			// (PILOT_GATEWAY_TRANSPORT_SOCKET_CONNECT_TIMEOUT, 15s).
			c.fc.TransportSocketConnectTimeout = lsTransportSocketConnectTimeout
		}
	}
	if k.Topology.ProxyProtocol {
		// The PROXY header comes before anything TLS inspection reads.
		l.ListenerFilters = append(l.ListenerFilters, lfProxyProtocol)
	}
	if needTLSInspector {
		l.ListenerFilters = append(l.ListenerFilters, lfTLSInspector)
	}
	return name, l, chains, parts
}

// sniMatch matches the server's hosts by SNI; "*" matches anything (no
// server_names).
func sniMatch(hosts []string) *listener.FilterChainMatch {
	names := sniNames(hosts)
	if len(names) == 0 {
		return nil
	}
	return &listener.FilterChainMatch{ServerNames: names}
}

// sniNames are the server names an SNI match lists: none when a host is
// "*".
func sniNames(hosts []string) []string {
	for _, h := range hosts {
		if h == "*" {
			return nil
		}
	}
	return hosts
}

// gatewayHCM is istiod's buildGatewayConnectionManager: the client's
// address is trusted (use_remote_address), or the one numTrustedProxies
// hops back in X-Forwarded-For; client certificate details are sanitized
// and set, or as gatewayTopology.forwardClientCertDetails says; routes
// come from RDS.
func (k gwlIn) gatewayHCM(statPrefix, rds string) *hcm.HttpConnectionManager {
	h := lsHCM(hcmOpts{statPrefix: statPrefix, rds: rds, path: k.PathNormalization, tracing: &k.Tracing})
	h.HttpFilters = gatewayHTTPFilters(k.grpcWebPort(), k.Telemetry.statsHTTP(sideGateway))
	h.AccessLog = k.Telemetry.accessLogs(sideGateway, false)
	h = (&inboundSecurity{http: k.securityHTTPFilters()}).withHTTP(h, k.Port)
	h.UseRemoteAddress = wrapperspb.Bool(true)
	h.ServerName = "istio-envoy"
	h.XffNumTrustedHops = k.Topology.NumTrustedProxies
	var setCurrent bool
	h.ForwardClientCertDetails, setCurrent = k.Topology.forwardClientCert()
	if setCurrent {
		h.SetCurrentClientCertDetails = &hcm.HttpConnectionManager_SetCurrentClientCertDetails{
			Subject: wrapperspb.Bool(true), Cert: true, Dns: true, Uri: true,
		}
	}
	h.HttpProtocolOptions = &core.Http1ProtocolOptions{}
	h.Proxy_100Continue = false
	return h
}

// grpcWebPort: the port's first plain HTTP server speaks GRPC-WEB. istiod
// merges a port's plain HTTP servers into the first one's server port,
// whose protocol decides its connection manager's grpc_web filter; an
// HTTPS server's protocol is HTTPS, never GRPC-WEB.
func (k gwlIn) grpcWebPort() bool {
	for i := range k.Servers {
		srv := k.Servers[i].Server()
		if srv == nil {
			continue
		}
		if p := GatewayProtocol(srv); p.IsHTTP() {
			return p == index.ProtocolGRPCWeb
		}
	}
	return false
}

// adsSDS is a credentialName secret served by the control plane over ADS.
func adsSDS(name string) *tlsv3.SdsSecretConfig {
	return &tlsv3.SdsSecretConfig{Name: name, SdsConfig: lsADS}
}

// gatewayTLS is istiod's BuildListenerTLSContext for a gateway server:
// ISTIO_MUTUAL uses the workload certificate and mesh root from
// istio-agent; SIMPLE, MUTUAL and OPTIONAL_MUTUAL use the credentialName
// secret from the control plane ("kubernetes://NAME", and
// "kubernetes://NAME-cacert" or caCertCredentialName to validate clients),
// or the files the server names (each of tlsCertificates, else
// serverCertificate, else the workload's; clients validated against
// caCertificates, else the mesh root).
func gatewayTLS(t *networking.ServerTLSSettings, alpn []string, defaults *TLSDefaults) *core.TransportSocket {
	mode := t.GetMode()
	ctx := &tlsv3.DownstreamTlsContext{
		CommonTlsContext:         &tlsv3.CommonTlsContext{AlpnProtocols: alpn},
		RequireClientCertificate: wrapperspb.Bool(mode == networking.ServerTLSSettings_MUTUAL || mode == networking.ServerTLSSettings_ISTIO_MUTUAL),
	}
	validate := mode == networking.ServerTLSSettings_MUTUAL || mode == networking.ServerTLSSettings_ISTIO_MUTUAL ||
		mode == networking.ServerTLSSettings_OPTIONAL_MUTUAL
	def := &tlsv3.CertificateValidationContext{}
	for _, san := range t.GetSubjectAltNames() {
		def.MatchSubjectAltNames = append(def.MatchSubjectAltNames, &matcher.StringMatcher{MatchPattern: &matcher.StringMatcher_Exact{Exact: san}})
	}
	if t.GetInsecureSkipVerify().GetValue() {
		def.TrustChainVerification = tlsv3.CertificateValidationContext_ACCEPT_UNTRUSTED
	}
	cc := ctx.CommonTlsContext
	combined := func(root *tlsv3.SdsSecretConfig) {
		cc.ValidationContextType = &tlsv3.CommonTlsContext_CombinedValidationContext{
			CombinedValidationContext: &tlsv3.CommonTlsContext_CombinedCertificateValidationContext{
				DefaultValidationContext:         def,
				ValidationContextSdsSecretConfig: root,
			},
		}
	}
	switch {
	case mode == networking.ServerTLSSettings_ISTIO_MUTUAL:
		gwFileCRL(def, t)
		cc.TlsCertificateSdsSecretConfigs = []*tlsv3.SdsSecretConfig{lsSDS("default")}
		combined(lsSDS("ROOTCA"))
	case t.GetCredentialName() != "" || len(t.GetCredentialNames()) > 0:
		names := t.GetCredentialNames()
		if len(names) == 0 {
			names = []string{t.GetCredentialName()}
		}
		for _, n := range names {
			cc.TlsCertificateSdsSecretConfigs = append(cc.TlsCertificateSdsSecretConfigs, adsSDS(gwCredentialPrefix+n))
		}
		ca := names[0] + clCredentialCA
		if n := t.GetCaCertCredentialName(); n != "" {
			ca = n
		}
		switch {
		case mode == networking.ServerTLSSettings_MUTUAL || mode == networking.ServerTLSSettings_OPTIONAL_MUTUAL:
			// Client certificate pinning; the CRL comes with the CA
			// secret's ca.crl (crl) over SDS, not from caCrl (istiod's
			// ApplyCredentialSDSToServerCommonTLSContext).
			def.VerifyCertificateSpki = t.GetVerifyCertificateSpki()
			def.VerifyCertificateHash = t.GetVerifyCertificateHash()
			combined(adsSDS(gwCredentialPrefix + ca))
		case len(def.MatchSubjectAltNames) > 0:
			// SIMPLE: the names alone, no trust chain (istiod's static
			// validation context).
			cc.ValidationContextType = &tlsv3.CommonTlsContext_ValidationContext{
				ValidationContext: &tlsv3.CertificateValidationContext{MatchSubjectAltNames: def.MatchSubjectAltNames},
			}
		}
	default:
		// File-mounted certificates, as istio-agent's file SDS names them
		// (istiod's ApplyToCommonTLSContext for a server's files).
		if certs := t.GetTlsCertificates(); len(certs) > 0 {
			for _, c := range certs {
				cc.TlsCertificateSdsSecretConfigs = append(cc.TlsCertificateSdsSecretConfigs, lsSDS(gwFileCert(c.GetServerCertificate(), c.GetPrivateKey())))
			}
		} else {
			cc.TlsCertificateSdsSecretConfigs = []*tlsv3.SdsSecretConfig{lsSDS(gwFileCert(t.GetServerCertificate(), t.GetPrivateKey()))}
		}
		if validate {
			gwFileCRL(def, t)
			root := "ROOTCA" // no caCertificates: the mesh root, as istiod
			if f := t.GetCaCertificates(); f != "" {
				root = "file-root:" + f
			}
			combined(lsSDS(root))
		}
	}
	if mode == networking.ServerTLSSettings_SIMPLE || mode == networking.ServerTLSSettings_MUTUAL ||
		mode == networking.ServerTLSSettings_OPTIONAL_MUTUAL {
		gwTLSParams(cc, t, defaults)
	}
	return &core.TransportSocket{
		Name:       "envoy.transport_sockets.tls",
		ConfigType: &core.TransportSocket_TypedConfig{TypedConfig: rtAny(ctx)},
	}
}

// gwTLSParams sets the TLS parameters of a SIMPLE, MUTUAL or
// OPTIONAL_MUTUAL server: meshConfig.tlsDefaults, then the server's own
// settings over them (istiod's applyDownstreamTLSDefaults and
// applyServerTLSSettings); none when neither sets anything.
func gwTLSParams(cc *tlsv3.CommonTlsContext, t *networking.ServerTLSSettings, d *TLSDefaults) {
	params := func() *tlsv3.TlsParameters {
		if cc.TlsParams == nil {
			cc.TlsParams = &tlsv3.TlsParameters{}
		}
		return cc.TlsParams
	}
	if len(d.EcdhCurves) > 0 {
		params().EcdhCurves = d.EcdhCurves
	}
	if len(d.CipherSuites) > 0 {
		params().CipherSuites = d.CipherSuites
	}
	if v, ok := d.minVersion(); ok {
		params().TlsMinimumProtocolVersion = v
	}
	// The API's TLS versions number as Envoy's do.
	if v := t.GetMinProtocolVersion(); v != networking.ServerTLSSettings_TLS_AUTO {
		params().TlsMinimumProtocolVersion = tlsv3.TlsParameters_TlsProtocol(v)
	}
	if len(t.GetCipherSuites()) > 0 {
		params().CipherSuites = t.GetCipherSuites()
	}
	if v := t.GetMaxProtocolVersion(); v != networking.ServerTLSSettings_TLS_AUTO {
		params().TlsMaximumProtocolVersion = tlsv3.TlsParameters_TlsProtocol(v)
	}
}

// gwFileCert is istio-agent's SDS name of a certificate and key file
// pair; without both, the workload's certificate ("default").
func gwFileCert(cert, key string) string {
	if cert == "" || key == "" {
		return "default"
	}
	return "file-cert:" + cert + "~" + key
}

// gwFileCRL sets the revocation list a server names by file (caCrl, a
// path in the gateway's file system), as istiod's ApplyToCommonTLSContext
// does for file certificates and ISTIO_MUTUAL. istiod sets no pinning
// (verifyCertificateSpki/Hash) on these paths.
func gwFileCRL(def *tlsv3.CertificateValidationContext, t *networking.ServerTLSSettings) {
	if f := t.GetCaCrl(); f != "" {
		def.Crl = &core.DataSource{Specifier: &core.DataSource_Filename{Filename: f}}
	}
}

// gwMatchesGateway reports whether a route match's gateways (if any) name
// the server's Gateway; short names are relative to the VirtualService.
func gwMatchesGateway(gateways []string, gwName, vsNS string) bool {
	if len(gateways) == 0 {
		return true
	}
	for _, g := range gateways {
		if g == gwName || vsNS+"/"+g == gwName {
			return true
		}
	}
	return false
}

// tcpRouteFilter is istiod's buildGatewayNetworkFiltersFromTCPRoutes: the
// first tcp route of a bound VirtualService whose hosts meet the server's
// and whose match applies to this port and Gateway.
func (k gwlIn) tcpRouteFilter(s *GatewayServer, srv *networking.Server) *listener.Filter {
	gwName := GatewayName(k.names, s.Gateway)
	gwNS := k.names.String(s.Gateway.Key.Namespace)
	for _, c := range s.VirtualServices {
		vs, _ := c.Spec.(*networking.VirtualService)
		vsNS := k.names.String(c.Key.Namespace)
		if vs == nil || len(IntersectHosts(HostsForNamespace(srv.GetHosts(), vsNS, gwNS), VirtualServiceHosts(k.names, c, nil))) == 0 {
			continue
		}
		for _, r := range vs.GetTcp() {
			ok := len(r.GetMatch()) == 0
			for _, m := range r.GetMatch() {
				// istiod's l4SingleMatch: port and gateways only (a
				// gateway's TCP and TLS routes ignore sourceLabels and
				// sourceNamespace).
				if (m.GetPort() == 0 || m.GetPort() == srv.GetPort().GetNumber()) && gwMatchesGateway(m.GetGateways(), gwName, vsNS) {
					ok = true
					break
				}
			}
			if ok && len(r.GetRoute()) > 0 {
				return k.tcpProxy(c, vsNS, r.GetRoute(), srv.GetPort().GetNumber())
			}
		}
	}
	return nil
}

// passthroughChains is istiod's buildGatewayNetworkFiltersFromTLSRoutes for
// PASSTHROUGH: a chain per tls route match, by SNI, first claim wins.
func (k gwlIn) passthroughChains(s *GatewayServer, srv *networking.Server) []*listener.FilterChain {
	gwName := GatewayName(k.names, s.Gateway)
	gwNS := k.names.String(s.Gateway.Key.Namespace)
	var out []*listener.FilterChain
	seen := map[string]bool{}
	for _, c := range s.VirtualServices {
		vs, _ := c.Spec.(*networking.VirtualService)
		vsNS := k.names.String(c.Key.Namespace)
		if vs == nil || len(IntersectHosts(HostsForNamespace(srv.GetHosts(), vsNS, gwNS), VirtualServiceHosts(k.names, c, nil))) == 0 {
			continue
		}
		for _, r := range vs.GetTls() {
			if len(r.GetRoute()) == 0 {
				continue
			}
			for _, m := range r.GetMatch() {
				if !(m.GetPort() == 0 || m.GetPort() == srv.GetPort().GetNumber()) || !gwMatchesGateway(m.GetGateways(), gwName, vsNS) {
					continue
				}
				dup := false
				for _, sni := range m.GetSniHosts() {
					dup = dup || seen[sni]
				}
				if dup || len(m.GetSniHosts()) == 0 {
					continue
				}
				for _, sni := range m.GetSniHosts() {
					seen[sni] = true
				}
				out = append(out, &listener.FilterChain{
					FilterChainMatch: &listener.FilterChainMatch{ServerNames: m.GetSniHosts()},
					Filters:          k.tcpFilters(k.tcpProxy(c, vsNS, r.GetRoute(), srv.GetPort().GetNumber())),
				})
			}
		}
	}
	return out
}

// autoPassthroughChains: one chain per service port, matched by the SNI
// istio sidecars send for it (outbound_.PORT_._.HOST), forwarded to the
// cluster of that name.
func (k gwlIn) autoPassthroughChains(s *GatewayServer) []*listener.FilterChain {
	var out []*listener.FilterChain
	for _, svc := range s.Services {
		host := k.names.String(svc.Key.Host)
		for _, p := range svc.Ports {
			if p.Protocol == index.ProtocolUDP {
				continue
			}
			name := "outbound_." + strconv.FormatUint(uint64(p.Number), 10) + "_._." + host
			out = append(out, &listener.FilterChain{
				FilterChainMatch: &listener.FilterChainMatch{ServerNames: []string{name}, ApplicationProtocols: gwALPNIstioMTLS},
				Filters:          k.tcpFilters(lsTCPProxy(name, name)),
			})
		}
	}
	return out
}

// tcpProxy forwards to a tcp or tls route's destinations: one cluster, or
// weighted clusters.
func (k gwlIn) tcpProxy(c *index.Config, vsNS string, routes []*networking.RouteDestination, port uint32) *listener.Filter {
	cluster := func(d *networking.Destination) string {
		if d.GetHost() == "" {
			return "UnknownService"
		}
		p := port
		if d.GetPort() != nil {
			p = d.GetPort().GetNumber()
		}
		return outboundClusterName(p, d.GetSubset(), rtResolveHost(d.GetHost(), vsNS, k.DomainSuffix))
	}
	if len(routes) == 1 {
		name := cluster(routes[0].GetDestination())
		return lsTCPProxy(name, name)
	}
	w := &tcp.TcpProxy_WeightedCluster{}
	for _, r := range routes {
		if r.GetWeight() > 0 {
			w.Clusters = append(w.Clusters, &tcp.TcpProxy_WeightedCluster_ClusterWeight{Name: cluster(r.GetDestination()), Weight: uint32(r.GetWeight())})
		}
	}
	return lsTCPProxyFilter(&tcp.TcpProxy{
		StatPrefix:       k.names.String(c.Key.Name) + "." + vsNS,
		ClusterSpecifier: &tcp.TcpProxy_WeightedClusters{WeightedClusters: w},
	})
}

// gwCredentialPrefix names a credentialName secret in SDS, as istiod does.
const gwCredentialPrefix = "kubernetes://"

package ingest

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net"
	"path"
	"strconv"
	"strings"

	networking "istio.io/api/networking/v1alpha3"
)

// ServiceEntry, WorkloadEntry, Gateway and Sidecar, after istiod's rules
// and the CEL rules of Istio's CRDs.

func (v *validator) serviceEntry(p *fieldPath, se *networking.ServiceEntry) {
	res := se.GetResolution()
	if se.GetWorkloadSelector() != nil {
		v.workloadSelector(p.f("workloadSelector").f("labels"), se.GetWorkloadSelector().GetLabels())
		if len(se.GetEndpoints()) > 0 {
			v.errorf(p.f("endpoints"), "cannot be set together with workloadSelector")
		}
	}
	if len(se.GetHosts()) == 0 {
		v.errorf(p.f("hosts"), "at least one host is required")
	}
	for i, h := range se.GetHosts() {
		if h == "*" {
			v.errorf(p.f("hosts").i(i), "invalid host \"*\": a ServiceEntry cannot match every host")
		} else if msg := hostError(h); msg != "" {
			v.errorf(p.f("hosts").i(i), "invalid host %q: %s", h, msg)
		}
	}
	for i, a := range se.GetAddresses() {
		if msg := ipOrCIDRError(a); msg != "" {
			v.errorf(p.f("addresses").i(i), "%s", msg)
		} else if strings.Contains(a, "/") && res != networking.ServiceEntry_NONE && res != networking.ServiceEntry_STATIC {
			v.errorf(p.f("addresses").i(i), "CIDR blocks are allowed only with resolution NONE or STATIC")
		}
	}
	portNames := make(map[string]bool, len(se.GetPorts()))
	portNumbers := make(map[uint32]bool, len(se.GetPorts()))
	for i, port := range se.GetPorts() {
		pp := p.f("ports").i(i)
		if port == nil {
			v.errorf(pp, "must not be null")
			continue
		}
		if portNames[port.GetName()] {
			v.errorf(pp.f("name"), "duplicate port name %q", port.GetName())
		} else {
			v.portName(pp.f("name"), port.GetName())
		}
		if portNumbers[port.GetNumber()] {
			v.errorf(pp.f("number"), "duplicate port number %d", port.GetNumber())
		} else {
			v.port(pp.f("number"), int64(port.GetNumber()))
		}
		portNames[port.GetName()], portNumbers[port.GetNumber()] = true, true
		if port.GetTargetPort() != 0 {
			v.port(pp.f("targetPort"), int64(port.GetTargetPort()))
		}
		v.protocol(pp.f("protocol"), port.GetProtocol())
	}
	v.serviceEntryResolution(p, se, portNames)
	// With plain TCP, nothing tells the hosts apart (no Host header, no
	// SNI), so several hosts need resolution NONE.
	if res != networking.ServiceEntry_NONE && len(se.GetHosts()) > 1 {
		for i, port := range se.GetPorts() {
			proto := parseProtocol(port.GetProtocol())
			if port.GetProtocol() != "" && proto == "" {
				continue // unknown: reported above
			}
			if !isHTTPProtocol(proto) && !isTLSProtocol(proto) {
				v.errorf(p.f("ports").i(i).f("protocol"), "a ServiceEntry with several hosts needs HTTP or TLS ports unless resolution is NONE (protocol %q)", port.GetProtocol())
				break
			}
		}
	}
	v.exportTo(p.f("exportTo"), se.GetExportTo(), true, false)
}

func (v *validator) serviceEntryResolution(p *fieldPath, se *networking.ServiceEntry, portNames map[string]bool) {
	res := se.GetResolution()
	eps := se.GetEndpoints()
	switch res {
	case networking.ServiceEntry_NONE:
		if len(eps) > 0 {
			v.errorf(p.f("endpoints"), "must be empty when resolution is NONE")
		}
	case networking.ServiceEntry_STATIC:
		for i, ep := range eps {
			v.endpoint(p.f("endpoints").i(i), ep, portNames, false)
		}
	case networking.ServiceEntry_DNS, networking.ServiceEntry_DNS_ROUND_ROBIN:
		if len(eps) == 0 {
			for i, h := range se.GetHosts() {
				if msg := fqdnError(h); msg != "" && h != "*" && hostError(h) == "" {
					v.errorf(p.f("hosts").i(i), "with resolution %s and no endpoints, hosts must be resolvable names (%s)", res, msg)
					break
				}
			}
		}
		if res == networking.ServiceEntry_DNS_ROUND_ROBIN && len(eps) > 1 {
			v.errorf(p.f("endpoints"), "resolution DNS_ROUND_ROBIN allows at most one endpoint, not %d", len(eps))
		}
		for i, ep := range eps {
			v.endpoint(p.f("endpoints").i(i), ep, portNames, true)
		}
	case networking.ServiceEntry_DYNAMIC_DNS:
		for i, h := range se.GetHosts() {
			if !strings.HasPrefix(h, "*") {
				v.errorf(p.f("hosts").i(i), "must be a wildcard host with resolution DYNAMIC_DNS")
			}
		}
		if len(se.GetAddresses()) > 0 {
			v.errorf(p.f("addresses"), "must be empty with resolution DYNAMIC_DNS")
		}
		if len(eps) > 0 {
			v.errorf(p.f("endpoints"), "must be empty with resolution DYNAMIC_DNS")
		}
		for i, port := range se.GetPorts() {
			switch parseProtocol(port.GetProtocol()) {
			case "HTTP", "TLS", "GRPC", "HTTP2":
			default:
				v.errorf(p.f("ports").i(i).f("protocol"), "resolution DYNAMIC_DNS supports HTTP, TLS, GRPC and HTTP2, not %q", port.GetProtocol())
			}
		}
		if loc := se.GetLocation(); loc != networking.ServiceEntry_MESH_EXTERNAL && loc != networking.ServiceEntry_MESH_INTERNAL {
			v.errorf(p.f("location"), "must be MESH_EXTERNAL or MESH_INTERNAL with resolution DYNAMIC_DNS")
		}
	default:
		v.errorf(p.f("resolution"), "unsupported resolution %d", int32(res))
	}
}

// endpoint checks a ServiceEntry endpoint; its port names must be ports
// of the ServiceEntry. dns allows host names as addresses.
func (v *validator) endpoint(p *fieldPath, ep *networking.WorkloadEntry, portNames map[string]bool, dns bool) {
	if ep == nil {
		v.errorf(p, "must not be null")
		return
	}
	v.workloadAddress(p, ep, dns)
	for _, name := range sortedMapKeys(ep.GetPorts()) {
		if !portNames[name] {
			v.errorf(p.f("ports").k(name), "port %q is not one of the ServiceEntry's ports", name)
		}
	}
}

func (v *validator) workloadEntry(p *fieldPath, we *networking.WorkloadEntry) {
	v.workloadAddress(p, we, true)
}

// workloadAddress checks a WorkloadEntry (standalone or a ServiceEntry
// endpoint): an IP address, a unix socket, or (dns) a host name; the
// address may be empty only on another network, reached through its
// gateway.
func (v *validator) workloadAddress(p *fieldPath, we *networking.WorkloadEntry, dns bool) {
	addr := we.GetAddress()
	switch {
	case addr == "":
		if we.GetNetwork() == "" {
			v.errorf(p.f("address"), "required (unless network is set)")
		}
	case strings.HasPrefix(addr, "unix://"):
		v.unixAddress(p.f("address"), strings.TrimPrefix(addr, "unix://"))
		if len(we.GetPorts()) > 0 {
			v.errorf(p.f("ports"), "a unix socket address cannot have ports")
		}
	case isIP(addr):
	case !dns:
		v.errorf(p.f("address"), "%q is not an IP address (resolution STATIC needs IPs)", addr)
	default:
		if msg := fqdnError(addr); msg != "" {
			v.errorf(p.f("address"), "%q is neither an IP address nor a host name: %s", addr, msg)
		}
	}
	for _, name := range sortedMapKeys(we.GetPorts()) {
		v.portName(p.f("ports").k(name), name)
		v.port(p.f("ports").k(name), int64(we.GetPorts()[name]))
	}
	v.labels(p.f("labels"), we.GetLabels())
}

func (v *validator) unixAddress(p *fieldPath, addr string) {
	switch {
	case addr == "":
		v.errorf(p, "unix socket path must not be empty")
	case strings.HasPrefix(addr, "@"):
	case !path.IsAbs(addr) || strings.HasSuffix(addr, "/"):
		v.errorf(p, "unix socket %q is not an absolute path to a file", addr)
	}
}

func (v *validator) gateway(p *fieldPath, gw *networking.Gateway) {
	if len(gw.GetServers()) == 0 {
		v.errorf(p.f("servers"), "at least one server is required")
	}
	names := map[string]int{}
	for i, s := range gw.GetServers() {
		sp := p.f("servers").i(i)
		if s == nil {
			v.errorf(sp, "must not be null")
			continue
		}
		v.server(sp, s)
		if s.GetPort() != nil {
			name := s.GetPort().GetName()
			if j, dup := names[name]; dup {
				v.errorf(sp.f("port").f("name"), "duplicate port name %q (also servers[%d]); port names must be unique across servers", name, j)
			} else {
				names[name] = i
			}
		}
	}
	v.labels(p.f("selector"), gw.GetSelector())
}

func (v *validator) server(p *fieldPath, s *networking.Server) {
	if len(s.GetHosts()) == 0 {
		v.errorf(p.f("hosts"), "at least one host is required")
	}
	for i, h := range s.GetHosts() {
		v.nsHost(p.f("hosts").i(i), h, true)
	}
	bind, unix := strings.CutPrefix(s.GetBind(), "unix://")
	port := s.GetPort()
	if port == nil {
		v.errorf(p.f("port"), "required")
	} else {
		pp := p.f("port")
		if parseProtocol(port.GetProtocol()) == "" {
			v.errorf(pp.f("protocol"), "unsupported protocol %q, want one of %s", port.GetProtocol(), strings.Join(istioProtocols, ", "))
		}
		if port.GetNumber() > 0 || !unix {
			v.port(pp.f("number"), int64(port.GetNumber()))
		}
		if port.GetTargetPort() > 0 { //nolint:staticcheck // rejected precisely because it is deprecated
			v.errorf(pp.f("targetPort"), "has no effect on a Gateway; remove it")
		}
		if port.GetName() == "" {
			v.errorf(pp.f("name"), "required")
		}
	}
	switch {
	case unix:
		v.unixAddress(p.f("bind"), bind)
		if port.GetNumber() != 0 {
			v.errorf(p.f("port").f("number"), "must be 0 when binding to a unix socket")
		}
	case bind != "" && !isIP(bind):
		v.errorf(p.f("bind"), "%q is not an IP address", bind)
	}
	v.serverTLS(p.f("tls"), s.GetTls())
	if port == nil || parseProtocol(port.GetProtocol()) == "" {
		return
	}
	proto := parseProtocol(port.GetProtocol())
	switch tls := s.GetTls(); {
	case isTLSProtocol(proto) && tls == nil:
		v.errorf(p.f("tls"), "required for %s servers", proto)
	case !isTLSProtocol(proto) && tls != nil && isHTTPProtocol(proto):
		// Only an HTTPS redirect makes sense on a plain HTTP server.
		passthrough := tls.GetMode() == networking.ServerTLSSettings_PASSTHROUGH || tls.GetMode() == networking.ServerTLSSettings_AUTO_PASSTHROUGH
		if !passthrough || tls.GetCaCertificates() != "" || tls.GetPrivateKey() != "" || tls.GetServerCertificate() != "" {
			v.errorf(p.f("tls"), "a plain-text %s server cannot have TLS settings other than httpsRedirect", proto)
		}
	case !isTLSProtocol(proto) && tls != nil:
		v.errorf(p.f("tls"), "a %s server cannot have TLS settings; use protocol HTTPS or TLS", proto)
	}
}

// nsHost checks a "namespace/host" reference (Gateway servers, Sidecar
// egress). Gateways also accept a bare host (any namespace) and IPs.
func (v *validator) nsHost(p *fieldPath, h string, gateway bool) {
	ns, host, qualified := strings.Cut(h, "/")
	if !qualified {
		if !gateway {
			v.errorf(p, "invalid host %q: must be namespace/host, e.g. \"./*\" or \"istio-system/*.example.com\"", h)
			return
		}
		ns, host = "*", h
	}
	if ns == "" || host == "" {
		v.errorf(p, "invalid host %q: namespace and host cannot be empty", h)
		return
	}
	// A Sidecar may exclude a namespace ("~ns/...", or "~/*" for none).
	if n := strings.TrimPrefix(ns, "~"); gateway && ns != "*" && ns != "." && !isIstioLabel(ns) ||
		!gateway && n != "" && n != "*" && n != "." && !isIstioLabel(n) {
		v.errorf(p, "invalid host %q: namespace %q must be \".\", \"*\" or a namespace name", h, ns)
		return
	}
	switch {
	case host != "*" && !strings.Contains(host, "."):
		v.errorf(p, "invalid host %q: short names are not allowed, use a fully qualified name", h)
	case strings.Contains(host, "*") && host != "*" && !strings.HasPrefix(host, "*."):
		v.errorf(p, "invalid host %q: a wildcard must be a whole leading label (\"*.example.com\")", h)
	default:
		if msg := hostError(host); msg != "" && !(gateway && isIP(host)) {
			v.errorf(p, "invalid host %q: %s", h, msg)
		}
	}
}

// serverTLS checks TLS settings of a Gateway server or Sidecar ingress:
// certificates come from exactly one source, which SIMPLE and MUTUAL need
// and ISTIO_MUTUAL must not have.
func (v *validator) serverTLS(p *fieldPath, t *networking.ServerTLSSettings) {
	if t == nil {
		return
	}
	mode := t.GetMode()
	if mode == networking.ServerTLSSettings_ISTIO_MUTUAL {
		for _, f := range []struct {
			name string
			set  bool
		}{
			{"serverCertificate", t.GetServerCertificate() != ""}, {"privateKey", t.GetPrivateKey() != ""},
			{"caCertificates", t.GetCaCertificates() != ""}, {"tlsCertificates", len(t.GetTlsCertificates()) > 0},
			{"credentialName", t.GetCredentialName() != ""}, {"credentialNames", len(t.GetCredentialNames()) > 0},
		} {
			if f.set {
				v.errorf(p.f(f.name), "must not be set in ISTIO_MUTUAL mode (Istio provides the certificates)")
			}
		}
		return
	}
	sources := 0
	for _, set := range []bool{t.GetServerCertificate() != "" && t.GetPrivateKey() != "", t.GetCredentialName() != "",
		len(t.GetCredentialNames()) > 0, len(t.GetTlsCertificates()) > 0} {
		if set {
			sources++
		}
	}
	if sources > 1 {
		v.errorf(p, "set only one of credentialName, credentialNames, serverCertificate/privateKey and tlsCertificates")
	}
	needsCerts := mode == networking.ServerTLSSettings_SIMPLE || mode == networking.ServerTLSSettings_MUTUAL ||
		mode == networking.ServerTLSSettings_OPTIONAL_MUTUAL
	if needsCerts && t.GetCredentialName() == "" && len(t.GetCredentialNames()) == 0 {
		if mode != networking.ServerTLSSettings_SIMPLE && t.GetCaCertificates() == "" {
			v.errorf(p.f("caCertificates"), "required in %s mode (or set credentialName)", mode)
		}
		if certs := t.GetTlsCertificates(); len(certs) > 0 {
			for i, c := range certs {
				if c.GetServerCertificate() == "" {
					v.errorf(p.f("tlsCertificates").i(i).f("serverCertificate"), "required")
				}
				if c.GetPrivateKey() == "" {
					v.errorf(p.f("tlsCertificates").i(i).f("privateKey"), "required")
				}
			}
		} else {
			if t.GetServerCertificate() == "" {
				v.errorf(p.f("serverCertificate"), "required in %s mode (or set credentialName)", mode)
			}
			if t.GetPrivateKey() == "" {
				v.errorf(p.f("privateKey"), "required in %s mode (or set credentialName)", mode)
			}
		}
	}
	v.certPins(p, t)
	if t.GetCaCrl() != "" {
		if t.GetCredentialName() != "" {
			v.errorf(p.f("caCrl"), "cannot be used with credentialName; put the CRL in the credential")
		}
		if mode == networking.ServerTLSSettings_SIMPLE {
			v.errorf(p.f("caCrl"), "is not supported in SIMPLE mode")
		}
	}
}

func (v *validator) sidecar(p *fieldPath, sc *networking.Sidecar) {
	if sel := sc.GetWorkloadSelector(); sel != nil {
		v.workloadSelector(p.f("workloadSelector").f("labels"), sel.GetLabels())
	}
	if len(sc.GetEgress()) == 0 && len(sc.GetIngress()) == 0 && sc.GetOutboundTrafficPolicy() == nil && sc.GetInboundConnectionPool() == nil {
		v.errorf(p, "empty Sidecar: set egress, ingress, outboundTrafficPolicy or inboundConnectionPool")
		return
	}
	ports := map[uint32]bool{}
	for i, in := range sc.GetIngress() {
		ip := p.f("ingress").i(i)
		if in == nil {
			v.errorf(ip, "must not be null")
			continue
		}
		port := in.GetPort()
		if port == nil {
			v.errorf(ip.f("port"), "required for ingress listeners")
			continue
		}
		v.sidecarPort(ip.f("port"), port)
		if in.GetBind() != "" && !isIP(in.GetBind()) {
			v.errorf(ip.f("bind"), "%q is not an IP address", in.GetBind())
		}
		if ports[port.GetNumber()] {
			v.errorf(ip.f("port").f("number"), "duplicate ingress port %d", port.GetNumber())
		}
		ports[port.GetNumber()] = true
		v.defaultEndpoint(ip.f("defaultEndpoint"), in.GetDefaultEndpoint())
		if t := in.GetTls(); t != nil {
			tp := ip.f("tls")
			switch {
			case len(t.GetSubjectAltNames()) > 0:
				v.errorf(tp.f("subjectAltNames"), "not supported in Sidecar ingress TLS")
			case t.GetHttpsRedirect():
				v.errorf(tp.f("httpsRedirect"), "not supported in Sidecar ingress TLS")
			case t.GetCredentialName() != "" || len(t.GetCredentialNames()) > 0 || len(t.GetTlsCertificates()) > 0:
				v.errorf(tp, "credentialName, credentialNames and tlsCertificates are not supported in Sidecar ingress TLS")
			case t.GetMode() == networking.ServerTLSSettings_ISTIO_MUTUAL || t.GetMode() == networking.ServerTLSSettings_AUTO_PASSTHROUGH:
				v.errorf(tp.f("mode"), "%s is not supported in Sidecar ingress TLS", t.GetMode())
			}
			if !isTLSProtocol(parseProtocol(port.GetProtocol())) {
				v.errorf(tp, "TLS settings need an HTTPS or TLS port")
			}
			v.serverTLS(tp, t)
		}
		v.connectionPool(ip.f("connectionPool"), in.GetConnectionPool())
	}
	v.connectionPool(p.f("inboundConnectionPool"), sc.GetInboundConnectionPool())
	v.sidecarEgress(p, sc.GetEgress())
	if tp := sc.GetOutboundTrafficPolicy(); tp != nil && tp.GetEgressProxy() != nil {
		ep := p.f("outboundTrafficPolicy").f("egressProxy")
		switch {
		case tp.GetMode() != networking.OutboundTrafficPolicy_ALLOW_ANY:
			v.errorf(ep, "can only be set with mode ALLOW_ANY")
		case tp.GetEgressProxy().GetPort() == nil:
			v.errorf(ep.f("port"), "required")
		default:
			if msg := fqdnError(tp.GetEgressProxy().GetHost()); msg != "" {
				v.errorf(ep.f("host"), "invalid host %q: %s", tp.GetEgressProxy().GetHost(), msg)
			} else {
				v.destination(ep, tp.GetEgressProxy())
			}
		}
	}
}

func (v *validator) sidecarEgress(p *fieldPath, egress []*networking.IstioEgressListener) {
	ports := map[uint32]bool{}
	sockets := map[string]bool{}
	for i, eg := range egress {
		ep := p.f("egress").i(i)
		if eg == nil {
			v.errorf(ep, "must not be null")
			continue
		}
		if port := eg.GetPort(); port == nil {
			// The catch-all listener: at most one, the last.
			if i != len(egress)-1 {
				v.errorf(ep, "only the last egress listener may leave out port (it catches all other traffic)")
			}
		} else if port.GetNumber() == 0 {
			bind, unix := strings.CutPrefix(eg.GetBind(), "unix://")
			if port.GetName() != "" {
				v.portName(ep.f("port").f("name"), port.GetName())
			}
			v.protocol(ep.f("port").f("protocol"), port.GetProtocol())
			if !unix {
				v.errorf(ep.f("bind"), "port 0 needs a unix:// bind address")
			} else {
				v.unixAddress(ep.f("bind"), bind)
			}
			if m := eg.GetCaptureMode(); m != networking.CaptureMode_DEFAULT && m != networking.CaptureMode_NONE {
				v.errorf(ep.f("captureMode"), "must be DEFAULT or NONE for unix socket listeners")
			}
			if sockets[eg.GetBind()] {
				v.errorf(ep.f("bind"), "duplicate unix socket %q", eg.GetBind())
			}
			sockets[eg.GetBind()] = true
		} else {
			v.sidecarPort(ep.f("port"), port)
			if eg.GetBind() != "" && !isIP(eg.GetBind()) {
				v.errorf(ep.f("bind"), "%q is not an IP address", eg.GetBind())
			}
			if ports[port.GetNumber()] {
				v.errorf(ep.f("port").f("number"), "duplicate egress port %d", port.GetNumber())
			}
			ports[port.GetNumber()] = true
		}
		if len(eg.GetHosts()) == 0 {
			v.errorf(ep.f("hosts"), "at least one host is required")
		}
		for j, h := range eg.GetHosts() {
			v.nsHost(ep.f("hosts").i(j), h, false)
		}
	}
}

func (v *validator) sidecarPort(p *fieldPath, port *networking.SidecarPort) {
	if port.GetName() != "" {
		v.portName(p.f("name"), port.GetName())
	}
	v.protocol(p.f("protocol"), port.GetProtocol())
	v.port(p.f("number"), int64(port.GetNumber()))
	if port.GetTargetPort() > 0 { //nolint:staticcheck // rejected precisely because it is deprecated
		v.errorf(p.f("targetPort"), "has no effect on a Sidecar; remove it")
	}
}

// certPins checks client certificate pins as Envoy will read them: a
// verifyCertificateSpki entry is the base64 SHA-256 of a certificate's
// SubjectPublicKeyInfo (44 characters), a verifyCertificateHash entry the
// hex SHA-256 of the certificate, with or without colons. Envoy rejects a
// listener with any other value, so istiod's output would be NACKed.
func (v *validator) certPins(p *fieldPath, t *networking.ServerTLSSettings) {
	for i, s := range t.GetVerifyCertificateSpki() {
		if b, err := base64.StdEncoding.DecodeString(s); err != nil || len(b) != sha256.Size {
			v.errorf(p.f("verifyCertificateSpki").i(i), "%q is not a base64 SHA-256 digest (44 characters)", s)
		}
	}
	for i, s := range t.GetVerifyCertificateHash() {
		if b, err := hex.DecodeString(strings.ReplaceAll(s, ":", "")); err != nil || len(b) != sha256.Size || (strings.Contains(s, ":") && len(s) != 95) {
			v.errorf(p.f("verifyCertificateHash").i(i), "%q is not a hex SHA-256 digest (64 hex digits, or 32 colon-separated pairs)", s)
		}
	}
}

// defaultEndpoint is where a Sidecar ingress listener forwards: a loopback
// or any-address with a port, or a unix socket.
func (v *validator) defaultEndpoint(p *fieldPath, ep string) {
	if ep == "" {
		return
	}
	if sock, unix := strings.CutPrefix(ep, "unix://"); unix {
		v.unixAddress(p, sock)
		return
	}
	host, port, err := net.SplitHostPort(ep)
	if err != nil {
		v.errorf(p, "invalid endpoint %q: want 127.0.0.1:PORT, 0.0.0.0:PORT, [::1]:PORT, [::]:PORT or unix://PATH", ep)
		return
	}
	switch host {
	case "", "127.0.0.1", "0.0.0.0", "::1", "::":
	default:
		v.errorf(p, "invalid endpoint %q: the host must be 127.0.0.1, 0.0.0.0, ::1 or ::", ep)
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		v.errorf(p, "invalid endpoint %q: port %q is not a number", ep, port)
		return
	}
	v.port(p, int64(n))
}

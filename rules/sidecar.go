package rules

import (
	"cmp"
	"slices"
	"strconv"
	"strings"

	networking "istio.io/api/networking/v1alpha3"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/index"
)

// ClassOf returns the proxy class of node in snap: the node's own fields
// plus the config that selects it by namespace and labels (its Sidecar, a
// router's Gateways), so that proxies under different Sidecars never share
// a class and proxies under one Sidecar always do.
func ClassOf(snap *index.Snapshot, rootNS string, node *Node) encode.ProxyClass {
	return ClassOfIn(nil, snap, rootNS, node)
}

// ClassOfIn is ClassOf with what it derives from config memoized in views
// (nil: none), as the engine calls it for every connection.
func ClassOfIn(views *Views, snap *index.Snapshot, rootNS string, node *Node) encode.ProxyClass {
	c := node.Class()
	// Selectors match the LABELS metadata, or without it the labels of the
	// proxy's Pod or WorkloadEntry (istiod reads them from the Pod).
	labels := node.Labels
	if len(labels) == 0 && (snap.NumConfigs(index.ConfigSidecar) > 0 || node.Type == encode.ProxyRouter) {
		labels = nodeWorkloadLabels(snap, node)
	}
	// Proxyless gRPC clients are scoped too, as istiod scopes every
	// proxy. A router never is: istiod gives routers its default scope
	// whatever Sidecars their namespace or the root namespace hold
	// (doGetSidecarScope, SetSidecarScope passes a router no labels).
	if node.Type != encode.ProxyRouter {
		c.Sidecar = SelectSidecar(snap, rootNS, node.Namespace, labels)
	}
	c.ProxyIPs = sidecarProxyIPs(snap, c.Sidecar, node)
	c.Labels = securityLabelsWith(snap, rootNS, node, views.failoverLabelKeys(snap))
	c.EnvoyFilterProxy = envoyFilterProxy(views, snap, node)
	if node.Type == encode.ProxyRouter {
		c.Gateways = SelectGateways(snap, labels)
	}
	return c
}

// labelsMatch reports whether every label of sel is among labels.
func labelsMatch(snap *index.Snapshot, sel index.LabelSetID, labels map[string]string) bool {
	for _, l := range snap.Labels.Get(sel) {
		v, ok := labels[snap.String(l.Key)]
		if !ok || v != snap.String(l.Value) {
			return false
		}
	}
	return true
}

// SelectSidecar picks the Sidecar resource that applies to a proxy, as
// istiod does: one in the proxy's namespace whose workloadSelector matches
// its labels, else the namespace's Sidecar without a selector, else the
// root namespace's Sidecar without a selector. Ties go to the oldest, then
// the first by name (istiod's sortConfigByCreationTime). It returns
// "NAMESPACE/NAME" or "".
func SelectSidecar(snap *index.Snapshot, rootNS, ns string, labels map[string]string) string {
	if snap.NumConfigs(index.ConfigSidecar) == 0 {
		return ""
	}
	pick := func(namespace string, withSelector bool) *index.Config {
		sym, ok := snap.Symbols.Lookup(namespace)
		if !ok {
			return nil
		}
		var best *index.Config
		snap.ConfigsInNamespace(index.ConfigSidecar, sym, func(c *index.Config) bool {
			if c.HasSelector != withSelector || (withSelector && !labelsMatch(snap, c.Selector, labels)) {
				return true
			}
			if best == nil || byCreationTime(snap)(c, best) < 0 {
				best = c
			}
			return true
		})
		return best
	}
	c := pick(ns, true)
	if c == nil {
		c = pick(ns, false)
	}
	if c == nil && rootNS != ns {
		c = pick(rootNS, false)
	}
	if c == nil {
		return ""
	}
	return snap.String(c.Key.Namespace) + "/" + snap.String(c.Key.Name)
}

// configByRef looks a "NAMESPACE/NAME" reference up.
func configByRef(snap *index.Snapshot, kind index.ConfigKind, ref string) *index.Config {
	ns, name, ok := strings.Cut(ref, "/")
	if !ok {
		return nil
	}
	nsSym, ok1 := snap.Symbols.Lookup(ns)
	nameSym, ok2 := snap.Symbols.Lookup(name)
	if !ok1 || !ok2 {
		return nil
	}
	c, _ := snap.Config(kind, index.ConfigKey{Namespace: nsSym, Name: nameSym})
	return c
}

// Outbound traffic policies a Sidecar may set over the mesh's.
const (
	outboundMesh int8 = iota
	outboundAllowAny
	outboundRegistryOnly
)

// egress is the part of a Sidecar that narrows a scope: the union of its
// egress listeners' hosts ("NAMESPACE/DNSNAME"), and its outbound policy.
type egress struct {
	hosts []egressHost
	// namespaces lists the namespaces the hosts name when none uses "*":
	// the scope then visits only those namespaces' services, so a proxy
	// limited to its namespace never iterates the rest of the mesh.
	namespaces []index.Sym
	outbound   int8
	// proxy is the cluster outboundTrafficPolicy.egressProxy names
	// ("outbound|PORT|SUBSET|HOST", istiod's GetDestinationCluster), or "".
	proxy string
	// listeners are the egress listeners, in order (sidecar_egress.go);
	// a Sidecar without egress has istiod's one catch-all "*/*".
	listeners []egressListener
}

type egressHost struct {
	anyNS bool
	ns    index.Sym
	host  string // "*", "*.suffix" or an exact hostname
}

// newEgress reads the Sidecar ref for a proxy in namespace ns; nil means no
// Sidecar (or one without egress listeners: istiod's default "*/*").
func newEgress(snap *index.Snapshot, ref string, ns index.Sym) *egress {
	if ref == "" {
		return nil
	}
	c := configByRef(snap, index.ConfigSidecar, ref)
	if c == nil {
		return nil
	}
	sc, _ := c.Spec.(*networking.Sidecar)
	if sc == nil {
		return nil
	}
	e := &egress{}
	if p := sc.GetOutboundTrafficPolicy(); p != nil { // REGISTRY_ONLY is the enum's zero
		e.outbound = outboundRegistryOnly
		if p.GetMode() == networking.OutboundTrafficPolicy_ALLOW_ANY {
			e.outbound = outboundAllowAny
		}
		if d := p.GetEgressProxy(); d != nil && d.GetHost() != "" {
			e.proxy = "outbound|" + strconv.FormatUint(uint64(d.GetPort().GetNumber()), 10) + "|" + d.GetSubset() + "|" + d.GetHost()
		}
	}
	if len(sc.Egress) == 0 {
		e.hosts = []egressHost{{anyNS: true, host: "*"}}
		e.listeners = []egressListener{{hosts: e.hosts}}
		return e
	}
	anyNS := false
	e.listeners = make([]egressListener, 0, len(sc.Egress))
	for _, l := range sc.Egress {
		el := newEgressListener(l)
		start := len(e.hosts)
		for _, h := range l.Hosts {
			nsPart, host, ok := strings.Cut(h, "/")
			if !ok {
				continue // validation rejects it; ignore rather than widen
			}
			eh := egressHost{host: host}
			switch nsPart {
			case "*":
				eh.anyNS, anyNS = true, true
			case "~":
				continue // imports nothing
			case ".":
				eh.ns = ns
			default:
				sym, ok := snap.Symbols.Lookup(nsPart)
				if !ok {
					continue // no object lives in an unknown namespace
				}
				eh.ns = sym
			}
			e.hosts = append(e.hosts, eh)
			if !eh.anyNS && !slices.Contains(e.namespaces, eh.ns) {
				e.namespaces = append(e.namespaces, eh.ns)
			}
		}
		el.hosts = slices.Clip(e.hosts[start:])
		e.listeners = append(e.listeners, el)
	}
	if anyNS {
		e.namespaces = nil
	} else if e.namespaces == nil {
		e.namespaces = []index.Sym{} // nothing imported: visit nothing
	}
	slices.SortFunc(e.namespaces, func(a, b index.Sym) int { return cmp.Compare(a, b) })
	return e
}

// sees reports whether an object in namespace ns with hostname host is
// imported by the egress.
func (e *egress) sees(snap *index.Snapshot, ns index.Sym, host index.Sym) bool {
	if e == nil {
		return true
	}
	h := snap.String(host)
	for i := range e.hosts {
		eh := &e.hosts[i]
		// istiod's host.Name.Matches: wildcard hosts on either side overlap.
		if (eh.anyNS || eh.ns == ns) && hostMatches(eh.host, h) {
			return true
		}
	}
	return false
}

// seesConfig reports whether a VirtualService (or another config with
// hosts) is imported: its namespace matches an egress host whose name
// matches one of its hosts (istiod's SidecarScope selection).
func (e *egress) seesConfig(snap *index.Snapshot, c *index.Config) bool {
	if e == nil {
		return true
	}
	for _, h := range c.Hosts {
		if e.sees(snap, c.Key.Namespace, h) {
			return true
		}
	}
	return false
}

// Meshes are the mesh and its variant with OutboundAllowAny inverted,
// which a Sidecar's outbound traffic policy may select.
type Meshes struct {
	mesh, flipped *encode.Mesh
}

// NewMeshes makes m's pair (m is not modified).
func NewMeshes(m *encode.Mesh) Meshes {
	f := m.Clone()
	f.OutboundAllowAny = !f.OutboundAllowAny
	return Meshes{mesh: m, flipped: f}
}

// For returns the mesh settings a scope's generators use: the mesh's,
// with the Sidecar's outbound traffic policy when it sets one.
func (ms Meshes) For(sc *Scope) *encode.Mesh {
	switch {
	case sc.Egress == nil || sc.Egress.outbound == outboundMesh:
		return ms.mesh
	case (sc.Egress.outbound == outboundAllowAny) == ms.mesh.OutboundAllowAny:
		return ms.mesh
	}
	return ms.flipped
}

// egressProxyCluster is where the scope's unknown outbound traffic goes
// instead of PassthroughCluster: the Sidecar's egressProxy, which istiod
// honours only when outbound traffic is allowed; "" otherwise.
func (sc *Scope) egressProxyCluster(mesh *encode.Mesh) string {
	if sc.Egress == nil || !mesh.OutboundAllowAny {
		return ""
	}
	return sc.Egress.proxy
}

// vsDestinations appends the hostnames a VirtualService routes to (HTTP,
// TCP and TLS routes, and mirrors): istiod adds their services to a
// Sidecar's scope so that imported routes never point at hidden clusters.
func vsDestinations(vs *networking.VirtualService, dst []string) []string {
	for _, r := range vs.GetHttp() {
		for _, d := range r.GetRoute() {
			dst = append(dst, d.GetDestination().GetHost())
		}
		if m := r.GetMirror(); m != nil {
			dst = append(dst, m.GetHost())
		}
		for _, m := range r.GetMirrors() {
			dst = append(dst, m.GetDestination().GetHost())
		}
	}
	for _, r := range vs.GetTcp() {
		for _, d := range r.GetRoute() {
			dst = append(dst, d.GetDestination().GetHost())
		}
	}
	for _, r := range vs.GetTls() {
		for _, d := range r.GetRoute() {
			dst = append(dst, d.GetDestination().GetHost())
		}
	}
	return dst
}

// destServices finds the services a route's destination host names, as
// written in a config of namespace ns: an exact hostname, or a short name
// ("reviews") of a Kubernetes service in ns, whatever the domain suffix.
func destServices(snap *index.Snapshot, ns index.Sym, host string, fn func(index.ServiceID)) {
	if sym, ok := snap.Symbols.Lookup(host); ok {
		for _, id := range snap.ServicesByHost(sym) {
			fn(id)
		}
	}
	if strings.ContainsAny(host, ".*") {
		return
	}
	prefix := host + "." + snap.String(ns) + ".svc."
	for _, id := range snap.ServicesInNamespace(ns) {
		if strings.HasPrefix(snap.String(snap.ServiceByID(id).Key.Host), prefix) {
			fn(id)
		}
	}
}

// visitServices calls visit with the candidate services of a scope: every
// service without a Sidecar; with one, the services its egress hosts import
// (visiting only the namespaces they name, when none is "*") and the
// destinations of the VirtualServices they import. visit still applies
// exportTo.
func (e *egress) visitServices(view *configView, snap *index.Snapshot, ns index.Sym, visit func(index.ServiceID, *index.Service) bool) {
	if e == nil {
		snap.Services(visit)
		return
	}
	filtered := func(id index.ServiceID, svc *index.Service) bool {
		if e.sees(snap, svc.Key.Namespace, svc.Key.Host) {
			return visit(id, svc)
		}
		return true
	}
	if e.namespaces == nil {
		snap.Services(filtered)
	} else {
		for _, n := range e.namespaces {
			for _, id := range snap.ServicesInNamespace(n) {
				filtered(id, snap.ServiceByID(id))
			}
		}
	}
	var hosts []string
	visitVS := func(c *index.Config) bool {
		vs := vsSpec(c)
		if vs == nil || !boundToMesh(vs) || !view.vsVisible(snap, c, ns) || !e.seesConfig(snap, c) {
			return true
		}
		hosts = vsDestinations(vs, hosts[:0])
		for _, h := range hosts {
			destServices(snap, c.Key.Namespace, h, func(id index.ServiceID) { visit(id, snap.ServiceByID(id)) })
		}
		if len(c.Delegates) > 0 { // virtualservice_delegate.go
			delegateDestinations(view, snap, c, func(ns index.Sym, h string) {
				destServices(snap, ns, h, func(id index.ServiceID) { visit(id, snap.ServiceByID(id)) })
			})
		}
		return true
	}
	if e.namespaces == nil {
		snap.Configs(index.ConfigVirtualService, visitVS)
		return
	}
	for _, n := range e.namespaces {
		snap.ConfigsInNamespace(index.ConfigVirtualService, n, visitVS)
	}
}

// SelectGateways lists the Gateways whose selector matches a router's
// labels (istiod matches Gateway.selector against the gateway pod's labels,
// in every namespace unless PILOT_SCOPE_GATEWAY_TO_NAMESPACE is set), as
// sorted "NAMESPACE/NAME" refs joined by commas.
func SelectGateways(snap *index.Snapshot, labels map[string]string) string {
	if snap.NumConfigs(index.ConfigGateway) == 0 {
		return ""
	}
	var refs []string
	snap.Configs(index.ConfigGateway, func(c *index.Config) bool {
		// An empty selector selects every gateway, as in istiod.
		if !c.HasSelector || labelsMatch(snap, c.Selector, labels) {
			refs = append(refs, snap.String(c.Key.Namespace)+"/"+snap.String(c.Key.Name))
		}
		return true
	})
	slices.Sort(refs)
	return strings.Join(refs, ",")
}

// HoldsSidecar reports whether a change to the Sidecar key can matter to the
// scope: only the Sidecar the class uses. A Sidecar that starts or stops
// selecting a proxy changes the proxy's class instead (reclassify), which
// pushes to it.
func (sc *Scope) HoldsSidecar(key index.ConfigKey) bool {
	return sc.Class.Sidecar != "" && sc.Class.Sidecar == sc.Snapshot.String(key.Namespace)+"/"+sc.Snapshot.String(key.Name)
}

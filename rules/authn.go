package rules

import (
	"slices"
	"strings"

	security "istio.io/api/security/v1beta1"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/index"
)

// workloadSecurity is what security policy applies to one workload (a
// proxy class): PeerAuthentication modes, AuthorizationPolicies and
// RequestAuthentications, selected as istiod selects them.
type workloadSecurity struct {
	mtls  encode.ServiceMTLS            // workload-wide mode
	ports map[uint32]encode.ServiceMTLS // portLevelMtls by workload port
	authz encode.AuthzPolicies
	ra    encode.JWTRules // authn_jwks.go
}

// portMTLS is the mode on a workload port.
func (w *workloadSecurity) portMTLS(port uint32) encode.ServiceMTLS {
	if m, ok := w.ports[port]; ok {
		return m
	}
	return w.mtls
}

// passthroughPorts are the portLevelMtls ports no instance of sc serves
// (istiod's ForPassthrough), sorted.
func (w *workloadSecurity) passthroughPorts(sc *Scope) []encode.PortMTLS {
	var out []encode.PortMTLS
	for port, m := range w.ports {
		if !slices.ContainsFunc(sc.Instances, func(in Instance) bool { return in.TargetPort == port }) {
			out = append(out, encode.PortMTLS{Port: port, MTLS: m})
		}
	}
	slices.SortFunc(out, func(a, b encode.PortMTLS) int { return int(a.Port) - int(b.Port) })
	return out
}

// securityOf computes sc's workload security (routers and proxyless
// clients use the same selection; only what they apply it to differs).
func securityOf(sc *Scope, mesh *encode.Mesh) *workloadSecurity {
	snap := sc.Snapshot
	root, _ := snap.Symbols.Lookup(mesh.RootNamespace)
	labels := scopeLabels(sc) // the same labels a change's reach is decided on (holdsPolicy)
	w := &workloadSecurity{mtls: encode.ServiceMTLSPermissive}
	w.peerAuthentication(snap, root, sc.Namespace, labels)
	w.authorization(snap, root, sc.Namespace, labels)
	if !w.authz.Empty() {
		// Principals of the mesh's trust domain (or cluster.local) match
		// each of its aliases too (istiod's trust domain bundle).
		w.authz.TrustDomains = append([]string{mesh.TrustDomain}, mesh.TrustDomainAliases...)
	}
	if len(w.authz.Custom) > 0 {
		w.authz.Providers = authzProviders(snap, mesh, w.authz.Custom) // authz_extauthz.go
	}
	w.ra = jwtRules(snap, mesh.JWKSFetchMode, selectPolicies(snap, index.ConfigRequestAuthentication, root, sc.Namespace, labels))
	return w
}

// peerAuthentication is istiod's ComposePeerAuthentication: the mesh-wide
// policy (root namespace, no selector labels), overridden by the
// namespace's (no selector labels), overridden by the oldest one selecting
// the workload (sortedConfigs: ties by name); an UNSET mode inherits.
// Port-level modes come from the workload policy only.
func (w *workloadSecurity) peerAuthentication(snap *index.Snapshot, root, ns index.Sym, labels map[string]string) {
	if snap.NumConfigs(index.ConfigPeerAuthentication) == 0 {
		return
	}
	var meshPA, nsPA, wlPA *security.PeerAuthentication
	pick := func(cur **security.PeerAuthentication, c *index.Config) {
		if pa, ok := c.Spec.(*security.PeerAuthentication); ok && *cur == nil {
			*cur = pa
		}
	}
	// A selector without labels selects the whole namespace: istiod counts
	// such a policy as the namespace's (or the mesh's), not a workload's.
	for _, c := range sortedConfigs(snap, index.ConfigPeerAuthentication, root) {
		if c.Selector == 0 {
			pick(&meshPA, c)
		}
	}
	if ns != root {
		for _, c := range sortedConfigs(snap, index.ConfigPeerAuthentication, ns) {
			switch {
			case c.Selector == 0:
				pick(&nsPA, c)
			case selects(snap, c, labels):
				pick(&wlPA, c)
			}
		}
	}
	mode := security.PeerAuthentication_MutualTLS_UNSET
	for _, pa := range []*security.PeerAuthentication{meshPA, nsPA, wlPA} {
		if m := pa.GetMtls().GetMode(); m != security.PeerAuthentication_MutualTLS_UNSET {
			mode = m
		}
	}
	w.mtls = paMode(mode)
	for port, m := range wlPA.GetPortLevelMtls() {
		if w.ports == nil {
			w.ports = map[uint32]encode.ServiceMTLS{}
		}
		if pm := m.GetMode(); pm != security.PeerAuthentication_MutualTLS_UNSET {
			w.ports[port] = paMode(pm)
		} else {
			w.ports[port] = w.mtls
		}
	}
}

// authorization groups the AuthorizationPolicies that apply to the
// workload by action (istiod's ListAuthorizationPolicies): those of the
// root namespace, then the workload namespace's, that attach to it
// (attaches, authn_target.go: by selector, or by targetRef on a Gateway
// API gateway).
func (w *workloadSecurity) authorization(snap *index.Snapshot, root, ns index.Sym, labels map[string]string) {
	if snap.NumConfigs(index.ConfigAuthorizationPolicy) == 0 {
		return
	}
	for _, c := range selectPolicies(snap, index.ConfigAuthorizationPolicy, root, ns, labels) {
		ap := c.Spec.(*security.AuthorizationPolicy)
		switch ap.GetAction() {
		case security.AuthorizationPolicy_ALLOW:
			w.authz.Allow = append(w.authz.Allow, c)
		case security.AuthorizationPolicy_DENY:
			if c.Key.Namespace == root && root != ns {
				w.authz.RootDeny = append(w.authz.RootDeny, c)
			} else {
				w.authz.Deny = append(w.authz.Deny, c)
			}
		case security.AuthorizationPolicy_AUDIT:
			w.authz.Audit = append(w.authz.Audit, c)
		case security.AuthorizationPolicy_CUSTOM:
			w.authz.Custom = append(w.authz.Custom, c)
		}
	}
}

// selectPolicies lists the AuthorizationPolicies or
// RequestAuthentications (kind) of the root namespace, then of ns, that
// attach to a workload of ns with labels, in sortedConfigs order within
// each namespace.
func selectPolicies(snap *index.Snapshot, kind index.ConfigKind, root, ns index.Sym, labels map[string]string) []*index.Config {
	if snap.NumConfigs(kind) == 0 {
		return nil
	}
	var out []*index.Config
	add := func(space index.Sym) {
		for _, c := range sortedConfigs(snap, kind, space) {
			if attaches(snap, c, ns, labels) {
				out = append(out, c)
			}
		}
	}
	if root != 0 {
		add(root)
	}
	if ns != root {
		add(ns)
	}
	return out
}

// sortedConfigs are the configs of kind in ns in istiod's order
// (sortConfigByCreationTime): the oldest first, ties by name.
func sortedConfigs(snap *index.Snapshot, kind index.ConfigKind, ns index.Sym) []*index.Config {
	if ns == 0 {
		return nil
	}
	var out []*index.Config
	snap.ConfigsInNamespace(kind, ns, func(c *index.Config) bool {
		out = append(out, c)
		return true
	})
	slices.SortFunc(out, byCreationTime(snap)) // sort.go
	return out
}

// selects reports whether c's workload selector matches labels. An empty
// selector (matchLabels {}) selects every workload.
func selects(snap *index.Snapshot, c *index.Config, labels map[string]string) bool {
	for _, l := range snap.Labels.Get(c.Selector) {
		if v, ok := labels[snap.String(l.Key)]; !ok || v != snap.String(l.Value) {
			return false
		}
	}
	return true
}

func workloadLabels(snap *index.Snapshot, id index.LabelSetID) map[string]string {
	ls := snap.Labels.Get(id)
	if len(ls) == 0 {
		return nil
	}
	out := make(map[string]string, len(ls))
	for _, l := range ls {
		out[snap.String(l.Key)] = snap.String(l.Value)
	}
	return out
}

// classLabels parses ProxyClass.Labels ("-": known, none relevant).
func classLabels(s string) map[string]string {
	if s == "" {
		return nil
	}
	out := map[string]string{}
	if s == "-" {
		return out
	}
	for _, kv := range strings.Split(s, "\n") {
		k, v, _ := strings.Cut(kv, "=")
		out[k] = v
	}
	return out
}

// encodeLabels is the inverse of classLabels, in sorted order.
func encodeLabels(labels map[string]string) string {
	if len(labels) == 0 {
		return ""
	}
	keys := make([]string, 0, len(labels))
	for k := range labels {
		if strings.ContainsAny(k, "=\n") || strings.Contains(labels[k], "\n") {
			continue // not a valid label; cannot be selected
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(labels[k])
	}
	return b.String()
}

// grpcServerMTLS is istiod's mode for an xDS-enabled gRPC server on port:
// gRPC cannot tell TLS from plaintext on one port, so PERMISSIVE serves
// plaintext, unless the workload is labelled
// security.istio.io/tlsMode=istio (its clients then use mTLS, auto-mTLS),
// which makes it STRICT.
func grpcServerMTLS(sc *Scope, w *workloadSecurity, port uint32) encode.ServiceMTLS {
	m := w.portMTLS(port)
	if m == encode.ServiceMTLSPermissive && classLabels(sc.Class.Labels)["security.istio.io/tlsMode"] == "istio" {
		return encode.ServiceMTLSStrict
	}
	return m
}

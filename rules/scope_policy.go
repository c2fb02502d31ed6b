package rules

import (
	"strings"

	securitytype "istio.io/api/type/v1beta1"

	"github.com/pilotfish-mesh/pilotfish/index"
)

// IsSecurityKind reports whether kind is a security policy: its reach is
// decided by namespace and workload selector, not by what a scope sees.
func IsSecurityKind(kind index.ConfigKind) bool {
	switch kind {
	case index.ConfigPeerAuthentication, index.ConfigAuthorizationPolicy, index.ConfigRequestAuthentication:
		return true
	case index.ConfigTelemetry: // the same reach: root namespace, namespace, selector (rules/telemetry.go)
		return true
	}
	return false
}

// HoldsPolicy reports whether a PeerAuthentication, AuthorizationPolicy or
// RequestAuthentication, as it is in the scope's snapshot, can change what
// the scope's proxies receive (istiod's selection, securityOf):
//   - a root-namespace policy reaches every proxy;
//   - a policy of the proxy's namespace without a selector, or whose
//     selector matches the proxy's labels, reaches its inbound side;
//   - a namespace-wide PeerAuthentication also sets the mTLS mode clients
//     of the namespace's services use (namespaceMTLS), so it reaches every
//     scope that sees one of them;
//   - a policy with targetRefs attaches to gateways of its namespace; not
//     resolved here, every proxy of the namespace is kept.
//
// Matching against the class's labels is exact: a class keeps the value of
// every label key a selector in its or the root namespace names
// (securityLabels), and reclassify re-keys classes when that set changes.
func (sc *Scope) HoldsPolicy(kind index.ConfigKind, key index.ConfigKey, rootNS string) bool {
	snap := sc.Snapshot
	c, ok := snap.Config(kind, key)
	if !ok {
		return false
	}
	if root, ok := snap.Symbols.Lookup(rootNS); ok && key.Namespace == root {
		return true
	}
	if kind == index.ConfigPeerAuthentication && !c.HasSelector && sc.seesNamespace(key.Namespace) {
		return true
	}
	if key.Namespace != sc.Namespace {
		return false
	}
	if !c.HasSelector || hasTargetRefs(c.Spec) {
		return true
	}
	return selects(snap, c, scopeLabels(sc))
}

// seesNamespace reports whether the scope sees or backs a service of ns.
func (sc *Scope) seesNamespace(ns index.Sym) bool {
	if sc.Namespace == ns {
		return true
	}
	for _, id := range sc.Services {
		if sc.Snapshot.ServiceByID(id).Key.Namespace == ns {
			return true
		}
	}
	for i := range sc.Instances {
		if sc.Instances[i].Service.Key.Namespace == ns {
			return true
		}
	}
	return false
}

func hasTargetRefs(spec any) bool {
	t, ok := spec.(interface {
		GetTargetRef() *securitytype.PolicyTargetReference
		GetTargetRefs() []*securitytype.PolicyTargetReference
	})
	return ok && (t.GetTargetRef() != nil || len(t.GetTargetRefs()) > 0)
}

// scopeLabels are the labels security selectors match for the scope's
// proxies: the class's relevant LABELS, else (no LABELS metadata) those of
// the proxy's own Pod or WorkloadEntry, part of the class through its
// instances.
func scopeLabels(sc *Scope) map[string]string {
	labels := classLabels(sc.Class.Labels)
	if labels == nil && len(sc.Instances) > 0 {
		labels = workloadLabels(sc.Snapshot, sc.Instances[0].Endpoint.Labels)
	}
	return labels
}

// HoldsService reports whether the scope sees the service or backs it.
func (sc *Scope) HoldsService(k index.ServiceKey) bool {
	if id, ok := sc.ByHost[k.Host]; ok && sc.Snapshot.ServiceByID(id).Key == k {
		return true
	}
	for i := range sc.Instances {
		if sc.Instances[i].Service.Key == k {
			return true
		}
	}
	return false
}

// HoldsConfig reports whether a VirtualService, DestinationRule or
// ServiceEntry, as it is in the scope's snapshot, can matter to the scope:
// a VirtualService visible to it that its egress imports (a delegate: one
// of its roots is), or a rule or
// entry for a host it sees. A config absent from the snapshot matters to no scope of it (the
// other snapshot of the pair has it, if any).
func (sc *Scope) HoldsConfig(kind index.ConfigKind, key index.ConfigKey) bool {
	c, ok := sc.Snapshot.Config(kind, key)
	if !ok {
		return false
	}
	if kind == index.ConfigVirtualService {
		if len(c.Hosts) == 0 {
			return sc.holdsDelegate(key) // virtualservice_delegate.go
		}
		return sc.view.vsVisible(sc.Snapshot, c, sc.Namespace) && sc.Egress.seesConfig(sc.Snapshot, c)
	}
	for _, h := range c.Hosts {
		if _, ok := sc.ByHost[h]; ok || strings.HasPrefix(sc.Snapshot.String(h), "*") {
			return true // a wildcard rule cannot be ruled out cheaply
		}
	}
	return false
}

package engine

import (
	securitytype "istio.io/api/type/v1beta1"

	"github.com/pilotfish-mesh/pilotfish/index"
)

// isSecurityKind reports whether kind is a security policy: its reach is
// decided by namespace and workload selector, not by what a scope sees.
func isSecurityKind(kind index.ConfigKind) bool {
	switch kind {
	case index.ConfigPeerAuthentication, index.ConfigAuthorizationPolicy, index.ConfigRequestAuthentication:
		return true
	}
	return false
}

// holdsPolicy reports whether a PeerAuthentication, AuthorizationPolicy or
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
func (sc *Scope) holdsPolicy(kind index.ConfigKind, key index.ConfigKey, rootNS string) bool {
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

// classMove is a connection reclassify moved between classes.
type classMove struct {
	from, to *class
	created  bool // to was made for this move
}

// settleMoves decides, for connections reclassify moved, whether their new
// class must be pushed. A security policy whose selector names a new label
// key re-keys every class of its namespace with that key (their Labels
// change) without changing the config of those the policy does not
// select. A move that changes only Labels keeps the old class's pushed
// scope as what the connection holds, and is pushed only when the change
// set affects that scope or the new one; any other move (Sidecar,
// instances, Gateways) and a class never pushed push as before.
func (e *Engine) settleMoves(moves []classMove, changes *scopedChanges) {
	for _, m := range moves {
		if m.to.repush {
			continue
		}
		prev := m.from.pushed.Load()
		if prev == nil || changes == nil || !labelsOnly(m.from.key, m.to.key) ||
			changes.affects(prev, m.to.scope(e), e.mesh.RootNamespace) {
			m.to.repush = true
			continue
		}
		if m.created {
			m.to.pushed.CompareAndSwap(nil, prev)
		}
	}
}

// labelsOnly reports whether two class keys differ in nothing but Labels.
func labelsOnly(a, b classKey) bool {
	a.class.Labels = b.class.Labels
	return a == b
}

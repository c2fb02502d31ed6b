package rules

import (
	"strings"
	"unsafe"

	networking "istio.io/api/networking/v1alpha3"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/index"
)

// DestinationRule lookup, as istiod's PushContext.destinationRule and
// SidecarScope.DestinationRule do it for a proxy in namespace proxyNS and a
// service. istiod files each rule into pools (destrule_pool.go): the rules
// visible in their own namespace ("local"), the rules exported beyond it
// ("exported"), and the root namespace's private ones; within a pool the
// rules of one host are consolidated (merged). The lookup takes the first
// of:
//
//  1. the proxy's namespace's local pool (for a proxy in the root
//     namespace, the root namespace's private pool);
//  2. the service's namespace's exported pool, keeping the rules exported to
//     the proxy's namespace;
//  3. the root namespace's exported pool, the same way.
//
// In each pool the most specific host that has rules decides: the exact
// host, else the longest matching wildcard ("*.ns.svc.cluster.local" before
// "*.local" before "*"), even when none of its rules is exported to the
// proxy (the next step is then tried, not a broader wildcard).
//
// Of the consolidated rules found, the first with a workloadSelector that
// selects the proxy (rules with a selector are private to their namespace,
// and apply to outbound traffic only) wins, else the last without one.
func destinationRule(sc *Scope, mesh *encode.Mesh, svc *index.Service) *index.Config {
	return destinationRuleDir(sc, mesh, svc, true)
}

// inboundDestinationRule is the rule of a proxy's own service for its
// inbound clusters: selector rules do not apply (istiod's
// TrafficDirectionInbound).
func inboundDestinationRule(sc *Scope, mesh *encode.Mesh, svc *index.Service) *index.Config {
	return destinationRuleDir(sc, mesh, svc, false)
}

func destinationRuleDir(sc *Scope, mesh *encode.Mesh, svc *index.Service, outbound bool) *index.Config {
	snap := sc.Snapshot
	if svc == nil || snap.NumConfigs(index.ConfigDestinationRule) == 0 {
		return nil
	}
	l := drLookup{sc: sc, snap: snap, proxyNS: sc.Namespace}
	l.root, _ = snap.Symbols.Lookup(mesh.RootNamespace)
	var found drFound
	switch {
	case l.proxyNS != l.root || l.root == 0:
		found = l.find(drPoolLocal, l.proxyNS, svc.Key.Host)
	default:
		found = l.find(drPoolRootLocal, l.root, svc.Key.Host)
	}
	if found.ok() {
		return l.pick(&found, outbound)
	}
	for _, ns := range [2]index.Sym{svc.Key.Namespace, l.root} {
		if ns == 0 {
			continue
		}
		if found = l.find(drPoolExported, ns, svc.Key.Host); found.ok() && l.exportedAny(&found) {
			return l.pick(&found, outbound)
		}
	}
	return nil
}

// drLookup is one lookup's state.
type drLookup struct {
	sc         *Scope
	snap       *index.Snapshot
	proxyNS    index.Sym
	root       index.Sym
	exportOnly bool // pick: keep only the rules exported to proxyNS
}

// drFound is the consolidated rules of one pool and host: one (no merge
// needed, the common case, found without allocating) or a memoized list.
type drFound struct {
	one  drEntry
	many []drEntry
}

func (f *drFound) ok() bool { return f.one.rule != nil || len(f.many) > 0 }

// entries returns the rules found (one: as a one-element slice of f's).
func (f *drFound) entries() []drEntry {
	if f.one.rule != nil {
		return unsafe.Slice(&f.one, 1)
	}
	return f.many
}

// find returns the consolidated rules of the most specific host matching
// host in the pool of ns.
func (l *drLookup) find(pool drPool, ns index.Sym, host index.Sym) drFound {
	if f := l.consolidated(pool, ns, host); f.ok() {
		return f
	}
	h := l.snap.String(host)
	var buf [256]byte
	for i := 0; i < len(h); i++ {
		if h[i] != '.' {
			continue
		}
		// "*" + h[i:] without allocating: the lookup does not retain it.
		if 1+len(h)-i > len(buf) {
			continue
		}
		buf[0] = '*'
		n := 1 + copy(buf[1:], h[i:])
		cand := unsafe.String(&buf[0], n)
		if cand == h {
			continue
		}
		if s, found := l.snap.Symbols.Lookup(cand); found {
			if f := l.consolidated(pool, ns, s); f.ok() {
				return f
			}
		}
	}
	if s, found := l.snap.Symbols.Lookup("*"); found && h != "*" {
		return l.consolidated(pool, ns, s)
	}
	return drFound{}
}

// consolidated returns the pool's rules for exactly host: the single one
// directly, several merged (memoized per config version in the scope's
// view).
func (l *drLookup) consolidated(pool drPool, ns, host index.Sym) drFound {
	var first *index.Config
	n := 0
	l.snap.ConfigsByHost(index.ConfigDestinationRule, host, func(c *index.Config) bool {
		if c.Key.Namespace != ns || !drInPool(l.snap, c, pool, l.root, l.sc.view.exports.drPrivate) {
			return true
		}
		if n == 0 {
			first = c
		}
		n++
		return n < 2
	})
	switch n {
	case 0:
		return drFound{}
	case 1:
		return drFound{one: drEntry{rule: first, selector: first.HasSelector}}
	}
	return drFound{many: l.sc.view.mergedDestinationRules(l.snap, drPoolKey{pool: pool, ns: ns, host: host}, l.root)}
}

// exportedAny reports whether some rule of an exported pool's list is
// exported to the proxy's namespace (istiod's
// getExportedDestinationRuleFromNamespace), and makes pick keep only those.
func (l *drLookup) exportedAny(f *drFound) bool {
	proxyNS := l.sc.Class.Namespace // its symbol may not exist
	seen := false
	for i, es := 0, f.entries(); i < len(es) && !seen; i++ {
		seen = drExportedTo(&es[i], proxyNS)
	}
	l.exportOnly = seen
	return seen
}

// drExportedTo is istiod's check of a consolidated rule's exportTo set
// against a client namespace: empty, "*" or the namespace by name.
func drExportedTo(e *drEntry, ns string) bool {
	if e.selector {
		return false // {"."}
	}
	list := drSpec(e.rule).GetExportTo()
	if len(list) == 0 {
		return true
	}
	for _, x := range list {
		if x == "*" || x == ns {
			return true
		}
	}
	return false
}

// pick is istiod's SidecarScope.DestinationRule over the rules found.
func (l *drLookup) pick(f *drFound, outbound bool) *index.Config {
	var catchAll *index.Config
	proxyNS := ""
	if l.exportOnly {
		proxyNS = l.sc.Class.Namespace
	}
	es := f.entries()
	for i := range es {
		e := &es[i]
		switch {
		case l.exportOnly && !drExportedTo(e, proxyNS):
		case !e.selector:
			catchAll = e.rule
		case outbound && e.rule.Key.Namespace == l.proxyNS && l.selects(e.rule.Selector):
			return e.rule
		}
	}
	return catchAll
}

// selects reports whether a DestinationRule's workloadSelector matches the
// scope's proxies: their class keeps every label a selector rule of their
// namespace names (securityLabels), so the class's labels decide.
func (l *drLookup) selects(sel index.LabelSetID) bool {
	labels := l.sc.Class.Labels
	if labels == "" {
		// Labels unknown to the class: those of the proxy's workload.
		return labelsMatch(l.snap, sel, scopeLabels(l.sc))
	}
	for _, lb := range l.snap.Labels.Get(sel) {
		if !classHasLabel(labels, l.snap.String(lb.Key), l.snap.String(lb.Value)) {
			return false
		}
	}
	return true
}

// classHasLabel reports whether ProxyClass.Labels (sorted "k=v" lines)
// holds k=v, without allocating.
func classHasLabel(labels, k, v string) bool {
	for labels != "" {
		line := labels
		if i := strings.IndexByte(labels, '\n'); i >= 0 {
			line, labels = labels[:i], labels[i+1:]
		} else {
			labels = ""
		}
		if len(line) == len(k)+1+len(v) && strings.HasPrefix(line, k) && line[len(k)] == '=' && strings.HasSuffix(line, v) {
			return true
		}
	}
	return false
}

func drSpec(c *index.Config) *networking.DestinationRule {
	spec, _ := c.Spec.(*networking.DestinationRule)
	return spec
}

// subsetLabels returns the labels of the subset named name of the rule (0
// when the rule has no such subset or it has no labels), interned by ingest
// (index.Config.SubsetLabels): the engine only reads.
func subsetLabels(dr *index.Config, name string) index.LabelSetID {
	spec, _ := dr.Spec.(*networking.DestinationRule)
	for i, ss := range spec.GetSubsets() {
		if ss.GetName() != name {
			continue
		}
		if len(dr.SubsetLabels) != len(spec.GetSubsets()) {
			panic("engine: DestinationRule row without its subsets' labels (ingest interns them)")
		}
		return dr.SubsetLabels[i]
	}
	return 0
}

package rules

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync"

	networking "istio.io/api/networking/v1alpha3"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/envoypatch"
	"github.com/pilotfish-mesh/pilotfish/index"
)

// EnvoyFilter selection (docs/envoyfilter-design.md, section 2): which
// patches apply to a proxy class, in istiod's order (EnvoyFilters(proxy) in
// its push context). The result is an *envoypatch.Set interned per config
// version, so classes with the same applying patches share one pointer and
// keys hash its Digest. Nothing here runs when the snapshot holds no
// EnvoyFilter.

// defaultRootNamespace is istiod's root namespace when no mesh is given.
const defaultRootNamespace = "istio-system"

// efState is what a config view derives from its EnvoyFilters once: the
// interned sets by digest, and what patches match proxies on.
type efState struct {
	mu   sync.Mutex
	sets map[uint64]*envoypatch.Set // guarded by mu
	// proxyMatch: some patch has a match.proxy (nil until computed).
	proxyMatch *efProxyKeys // guarded by mu
}

// efProxyKeys are what match.proxy of the version's patches read: whether
// any does, and the metadata keys they name (sorted).
type efProxyKeys struct {
	any  bool
	keys []string
}

// filterOf is the compiled form of an EnvoyFilter row, which ingest
// stores in the row once per object version (index.Config.Derived).
func filterOf(c *index.Config) *envoypatch.Filter {
	f, _ := c.Derived.(*envoypatch.Filter)
	return f
}

// intern returns the version's set with s's digest, recording s if it is
// the first.
func (v *configView) intern(s *envoypatch.Set) *envoypatch.Set {
	if s == nil {
		return nil
	}
	v.ef.mu.Lock()
	defer v.ef.mu.Unlock()
	if old, ok := v.ef.sets[s.Digest]; ok {
		return old
	}
	if v.ef.sets == nil {
		v.ef.sets = map[uint64]*envoypatch.Set{}
	}
	v.ef.sets[s.Digest] = s
	return s
}

// efProxyKeysOf reports what the version's patches match proxies on.
func (v *configView) efProxyKeysOf(snap *index.Snapshot) *efProxyKeys {
	v.ef.mu.Lock()
	pk := v.ef.proxyMatch
	v.ef.mu.Unlock()
	if pk != nil {
		return pk
	}
	pk = &efProxyKeys{}
	seen := map[string]bool{}
	snap.Configs(index.ConfigEnvoyFilter, func(c *index.Config) bool {
		ef, _ := c.Spec.(*networking.EnvoyFilter)
		for _, cp := range ef.GetConfigPatches() {
			p := cp.GetMatch().GetProxy()
			if p == nil {
				continue
			}
			pk.any = true
			for k := range p.GetMetadata() {
				if !seen[k] {
					seen[k] = true
					pk.keys = append(pk.keys, k)
				}
			}
		}
		return true
	})
	slices.Sort(pk.keys)
	v.ef.mu.Lock()
	v.ef.proxyMatch = pk
	v.ef.mu.Unlock()
	return pk
}

// envoyFilterProxy is the ProxyClass.EnvoyFilterProxy of node: its full
// ISTIO_VERSION and the metadata the version's patch proxy matches name,
// "" when no patch has a proxy match (then proxies of every version share).
func envoyFilterProxy(views *Views, snap *index.Snapshot, node *Node) string {
	if snap.NumConfigs(index.ConfigEnvoyFilter) == 0 {
		return ""
	}
	var pk *efProxyKeys
	if views != nil {
		pk = views.Of(snap).efProxyKeysOf(snap)
	} else {
		pk = newConfigView(snap.ConfigVersion, false, nil, nil).efProxyKeysOf(snap)
	}
	if !pk.any {
		return ""
	}
	var b strings.Builder
	b.WriteString(node.FullIstioVersion)
	for _, k := range pk.keys {
		if node.Metadata == nil {
			break
		}
		if v, ok := node.Metadata(k); ok {
			b.WriteString("\n" + k + "=" + v)
		}
	}
	if b.Len() == 0 {
		return "-"
	}
	return b.String()
}

// parseEnvoyFilterProxy splits ProxyClass.EnvoyFilterProxy into the
// version and a metadata lookup.
func parseEnvoyFilterProxy(s string) (string, func(string) string) {
	if s == "-" {
		s = ""
	}
	version, rest, _ := strings.Cut(s, "\n")
	md := map[string]string{}
	for _, kv := range strings.Split(rest, "\n") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			md[k] = v
		}
	}
	return version, func(k string) string { return md[k] }
}

// envoyFilterKeys adds to keys the label keys the workload selectors of
// the EnvoyFilters of the root namespace and of space name: a class keeps
// them, as it keeps security selectors' (securityLabelsWith).
func envoyFilterKeys(snap *index.Snapshot, root, space index.Sym, keys map[string]bool) map[string]bool {
	if snap.NumConfigs(index.ConfigEnvoyFilter) == 0 {
		return keys
	}
	add := func(c *index.Config) bool {
		if !c.HasSelector {
			return true
		}
		for _, l := range snap.Labels.Get(c.Selector) {
			if keys == nil {
				keys = map[string]bool{}
			}
			keys[snap.String(l.Key)] = true
		}
		return true
	}
	if root != 0 {
		snap.ConfigsInNamespace(index.ConfigEnvoyFilter, root, add)
	}
	if space != 0 && space != root {
		snap.ConfigsInNamespace(index.ConfigEnvoyFilter, space, add)
	}
	return keys
}

// envoyFilterAttaches is istiod's WorkloadPolicyMatcher for an EnvoyFilter
// and a sidecar or Istio gateway: a filter with targetRefs never applies
// (they name Gateway API objects), one with a selector applies to the
// workloads it matches, one without to every proxy of its namespace.
func envoyFilterAttaches(snap *index.Snapshot, c *index.Config, labels map[string]string) bool {
	if ef, ok := c.Spec.(*networking.EnvoyFilter); ok && len(ef.GetTargetRefs()) > 0 {
		return false
	}
	return !c.HasSelector || selects(snap, c, labels)
}

// selectEnvoyFilters lists the EnvoyFilter rows that apply to a proxy of
// namespace ns with labels, in istiod's order: priority, the root
// namespace's first, creation time, then name and namespace.
func selectEnvoyFilters(snap *index.Snapshot, rootNS, ns string, labels map[string]string) []*index.Config {
	var out []*index.Config
	root, rootOK := snap.Symbols.Lookup(rootNS)
	space, spaceOK := snap.Symbols.Lookup(ns)
	keep := func(c *index.Config) bool {
		if envoyFilterAttaches(snap, c, labels) {
			out = append(out, c)
		}
		return true
	}
	if rootOK {
		snap.ConfigsInNamespace(index.ConfigEnvoyFilter, root, keep)
	}
	if spaceOK && (!rootOK || space != root) {
		snap.ConfigsInNamespace(index.ConfigEnvoyFilter, space, keep)
	}
	slices.SortStableFunc(out, func(a, b *index.Config) int {
		if c := cmp.Compare(a.Priority, b.Priority); c != 0 {
			return c
		}
		if ar, br := a.Key.Namespace == root, b.Key.Namespace == root; ar != br {
			if ar {
				return -1
			}
			return 1
		}
		return byCreationTime(snap)(a, b)
	})
	return out
}

// envoyFilterSet computes the class's set: the patches of its filters in
// order, those with a proxy match kept only if the class's proxy matches.
func envoyFilterSet(view *configView, snap *index.Snapshot, class *encode.ProxyClass, labels map[string]string, rootNS string) *envoypatch.Set {
	if snap.NumConfigs(index.ConfigEnvoyFilter) == 0 {
		return nil
	}
	rows := selectEnvoyFilters(snap, rootNS, class.Namespace, labels)
	if len(rows) == 0 {
		return nil
	}
	version, md := parseEnvoyFilterProxy(class.EnvoyFilterProxy)
	var patches []*envoypatch.Patch
	for _, c := range rows {
		f := filterOf(c)
		if f == nil {
			continue
		}
		for _, p := range f.Patches {
			if p.Match.GetProxy() != nil && !p.MatchesProxy(version, md) {
				continue
			}
			patches = append(patches, p)
		}
	}
	return view.intern(envoypatch.NewSet(patches))
}

// Patches returns the EnvoyFilter patches that apply to the scope's class
// (nil: none), computed once per scope and shared through the config
// view with every class that has the same patches. mesh names the root
// namespace (nil: istiod's default).
func (sc *Scope) Patches(mesh *encode.Mesh) *envoypatch.Set {
	// Proxyless gRPC config is istiod's grpcgen's, which applies no
	// EnvoyFilter.
	if sc.Snapshot.NumConfigs(index.ConfigEnvoyFilter) == 0 || sc.Class.Type == encode.ProxyGRPC {
		return nil
	}
	rootNS := defaultRootNamespace
	if mesh != nil && mesh.RootNamespace != "" {
		rootNS = mesh.RootNamespace
	}
	if m := sc.memo.patches.Load(); m != nil && m.root == rootNS {
		return m.set
	}
	s := envoyFilterSet(sc.view, sc.Snapshot, sc.Class, scopeLabels(sc), rootNS)
	sc.memo.patches.Store(&patchesMemo{root: rootNS, set: s})
	return s
}

// patchesMemo is a scope's memoized set (scopeMemo.patches).
type patchesMemo struct {
	root string
	set  *envoypatch.Set
}

// HoldsEnvoyFilter reports whether an EnvoyFilter, as it is in the scope's
// snapshot, can apply to the scope's class: it is in the root namespace or
// the class's, and its selector (if any) is compatible with the class's
// labels. A filter absent from the snapshot applies to none of its scopes
// (the engine asks the scopes before and after a change). The engine
// pushes an EnvoyFilter change only to the classes it can reach.
func (sc *Scope) HoldsEnvoyFilter(key index.ConfigKey, rootNS string) bool {
	if sc.Class.Type == encode.ProxyGRPC {
		return false
	}
	snap := sc.Snapshot
	c, ok := snap.Config(index.ConfigEnvoyFilter, key)
	if !ok {
		return false
	}
	ns := snap.String(c.Key.Namespace)
	if ns != rootNS && ns != sc.Class.Namespace {
		return false
	}
	if !c.HasSelector {
		return true
	}
	labels := scopeLabels(sc)
	if labels == nil {
		return true // labels unknown: cannot rule it out
	}
	return selects(snap, c, labels)
}

// clusterPatches is the CLUSTER set a cluster key carries: the class's,
// when some patch may touch this cluster (envoypatch's prefilter), else
// nil, so that the cluster keeps its unpatched key and bytes.
func (b *cdsBuilder) clusterPatches(k *encode.ClusterKey) *envoypatch.Set {
	if b.patches == nil {
		return nil
	}
	// An inbound cluster's name holds its workload port and no service.
	var host string
	port := k.Port.Number
	if k.Role == encode.ClusterInbound {
		port = k.TargetPort
	} else if k.Service != nil {
		host = b.snap.String(k.Service.Key.Host)
	}
	if !b.patches.MayPatchCluster(k.PatchContext(), host, port, k.Subset) {
		return nil
	}
	return b.patches
}

// added emits the clusters the class's CLUSTER ADD patches create in
// ctxs (istiod's InsertedClusters: a sidecar's outbound ones after its
// outbound clusters, its inbound ones last; a router's), each name once.
func (b *cdsBuilder) added(dst []Resource, ctxs ...envoypatch.Context) ([]Resource, error) {
	if b.patches == nil {
		return dst, nil
	}
	for _, ctx := range ctxs {
		for i := range encode.AddedCount(b.patches, ctx, networking.EnvoyFilter_CLUSTER) {
			e, err := encode.Resource(b.cache, b.snap.Names(), &encode.AddedKey{Patches: b.patches, Context: ctx, Index: i}, encode.AddedClusterGen)
			if err != nil {
				return dst, fmt.Errorf("cds: EnvoyFilter ADD: %w", err)
			}
			if e.Removed() || (b.want != nil && !b.want[e.Name]) ||
				slices.ContainsFunc(dst, func(r Resource) bool { return r.Name == e.Name }) {
				continue
			}
			dst = append(dst, resourceOf(e))
		}
	}
	return dst, nil
}

// mayPatchListener is the LISTENER-family set a listener key carries: lp
// when some patch may touch the listener on port (0: a virtual listener)
// in ctx, else nil.
func mayPatchListener(lp *envoypatch.Set, ctx envoypatch.Context, port uint32) *envoypatch.Set {
	if lp == nil || !lp.MayPatchListener(ctx, port) {
		return nil
	}
	return lp
}

// addedListeners appends the listeners the set's LISTENER ADD patches
// create in each context, each name once (a patch of context ANY adds in
// every context, as istiod's per-context passes would add it again).
func addedListeners(cache *encode.Cache, n index.Names, lp *envoypatch.Set, ctxs []envoypatch.Context, names []string, wildcard bool, dst []Resource) ([]Resource, error) {
	if lp == nil {
		return dst, nil
	}
	for _, ctx := range ctxs {
		for i := range encode.AddedCount(lp, ctx, networking.EnvoyFilter_LISTENER) {
			e, err := encode.Resource(cache, n, &encode.AddedKey{Patches: lp, Context: ctx, Index: i}, encode.AddedListenerGen)
			if err != nil {
				return dst, fmt.Errorf("listener: EnvoyFilter ADD: %w", err)
			}
			if e.Removed() || (!wildcard && len(names) > 0 && !slices.Contains(names, e.Name)) ||
				slices.ContainsFunc(dst, func(r Resource) bool { return r.Name == e.Name }) {
				continue
			}
			dst = append(dst, resourceOf(e))
		}
	}
	return dst, nil
}

// routePatches is the ROUTE_CONFIGURATION-family set a route
// configuration's key carries (nil when no patch may touch name) and its
// context.
func (b *rdsBuilder) routePatches(name string) (*envoypatch.Set, envoypatch.Context) {
	ctx := envoypatch.Outbound
	if b.sc.Class.Type == encode.ProxyRouter {
		ctx = envoypatch.Gateway
	}
	rp := b.sc.Patches(b.mesh).Family(envoypatch.Routes)
	if rp == nil || !rp.MayPatchRouteConfig(ctx, name) {
		return nil, 0
	}
	return rp, ctx
}

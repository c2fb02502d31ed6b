package rules

import (
	"encoding/binary"
	"maps"
	"slices"
	"strings"

	"github.com/cespare/xxhash/v2"
	"google.golang.org/protobuf/proto"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/pilotfish-mesh/pilotfish/index"
)

// Delegation (istiod's mergeVirtualServices): an HTTP route of a root
// VirtualService (one with hosts) naming a delegate is replaced by the
// delegate's HTTP routes, each merged with it (mergeDelegateRoute). The
// delegate is a VirtualService without hosts, exported to the root's
// namespace; a delegate missing, with hosts, or not exported drops the
// route, and so does a delegate route whose match conflicts with the
// root's. Delegates apply through their roots only: by themselves they
// have no hosts and route nothing.
//
// A delegate that delegates again is refused at ingest, as istiod's
// webhook refuses it ("a delegate VirtualService cannot delegate again",
// ingest.TestValidateVirtualService), so its root's route is dropped as for a missing
// delegate. istiod without its webhook merges it into a route with no
// cluster (weighted_clusters {}, which Envoy rejects: istiodref case
// vs-nested); pilotfish deliberately does not reproduce that.
//
// The merged VirtualService is a config row of its own (delegatedRow): the
// root's key and metadata, the merged spec, and a hash over the root's and
// its delegates' rows, so that a change to a delegate re-keys what its
// roots route (and HoldsConfig pushes it to the scopes holding them). It
// is computed once per config version and domain suffix (configView).

// delegatedKey identifies a merged row in a configView.
type delegatedKey struct {
	root   *index.Config
	suffix string
}

// vsRow returns the row a scope routes c by: c itself, or for a root
// VirtualService its merge with its delegates.
func (sc *Scope) vsRow(c *index.Config, suffix string) *index.Config {
	if len(c.Delegates) == 0 {
		return c
	}
	k := delegatedKey{c, suffix}
	if m, ok := sc.view.delegated.Load(k); ok {
		return m.(*index.Config)
	}
	m, _ := sc.view.delegated.LoadOrStore(k, delegatedRow(sc.view, sc.Snapshot, c, suffix))
	return m.(*index.Config)
}

// holdsDelegate reports whether a VirtualService without hosts matters to
// the scope: some root the scope holds delegates to it.
func (sc *Scope) holdsDelegate(key index.ConfigKey) bool {
	held := false
	sc.Snapshot.Configs(index.ConfigVirtualService, func(c *index.Config) bool {
		if len(c.Hosts) > 0 && slices.Contains(c.Delegates, key) && sc.HoldsConfig(index.ConfigVirtualService, c.Key) {
			held = true
		}
		return !held
	})
	return held
}

// delegate returns the VirtualService key names for root, or nil when
// istiod would not find it: absent, with hosts, or not exported to the
// root's namespace.
func delegate(view *configView, snap *index.Snapshot, root *index.Config, key index.ConfigKey) (*index.Config, *networking.VirtualService) {
	d, ok := snap.Config(index.ConfigVirtualService, key)
	if !ok {
		return nil, nil
	}
	spec := vsSpec(d)
	if spec == nil || len(spec.GetHosts()) > 0 || !view.vsVisible(snap, d, root.Key.Namespace) {
		return nil, nil
	}
	return d, spec
}

// delegatedRow merges root with its delegates. Destination hosts of a
// delegate's routes are resolved in the delegate's namespace, and the
// gateways its matches name too (istiod resolves short names before it
// merges); the root's are resolved in the root's, as encode would.
func delegatedRow(view *configView, snap *index.Snapshot, root *index.Config, suffix string) *index.Config {
	spec := proto.Clone(vsSpec(root)).(*networking.VirtualService)
	rootNS := snap.String(root.Key.Namespace)
	d := xxhash.New()
	var b [8]byte
	u64 := func(v uint64) { binary.LittleEndian.PutUint64(b[:], v); _, _ = d.Write(b[:]) }
	u64(root.Hash)
	_, _ = d.WriteString(suffix)
	out := *root
	out.Delegates = nil
	out.SourceLabelKeys = root.SourceLabelKeys
	routes := make([]*networking.HTTPRoute, 0, len(spec.Http))
	di := 0
	for _, r := range spec.Http {
		resolveMatchGateways(r.Match, rootNS)
		if r.Delegate == nil {
			routes = append(routes, r)
			continue
		}
		key := root.Delegates[di]
		di++
		dc, ds := delegate(view, snap, root, key)
		u64(uint64(key.Namespace)<<32 | uint64(key.Name))
		if dc == nil {
			u64(0)
			continue // istiod drops the route
		}
		u64(dc.Hash)
		out.SourceLabelKeys = unionSyms(out.SourceLabelKeys, dc.SourceLabelKeys)
		dns := snap.String(dc.Key.Namespace)
		for _, dr := range ds.Http {
			dr = proto.Clone(dr).(*networking.HTTPRoute)
			resolveRouteHosts(dr, dns, suffix)
			resolveMatchGateways(dr.Match, dns)
			if m := mergeDelegateRoute(r, dr); m != nil {
				routes = append(routes, m)
			}
		}
	}
	spec.Http = routes
	out.Spec = spec
	out.Hash = d.Sum64()
	return &out
}

// delegateDestinations calls visit with the destination hosts of the
// routes root's delegates contribute, each with the namespace it is
// written in: what a Sidecar that imports root imports through them.
func delegateDestinations(view *configView, snap *index.Snapshot, root *index.Config, visit func(ns index.Sym, host string)) {
	rootNS := snap.String(root.Key.Namespace)
	di := 0
	for _, r := range vsSpec(root).GetHttp() {
		if r.Delegate == nil {
			continue
		}
		key := root.Delegates[di]
		di++
		dc, ds := delegate(view, snap, root, key)
		if dc == nil {
			continue
		}
		dns := snap.String(dc.Key.Namespace)
		rootMatch := r.Match
		if len(rootMatch) > 0 {
			rootMatch = cloneMatches(rootMatch)
			resolveMatchGateways(rootMatch, rootNS)
		}
		for _, dr := range ds.Http {
			m := cloneMatches(dr.Match)
			resolveMatchGateways(m, dns)
			if _, conflict := mergeMatches(rootMatch, m); conflict {
				continue
			}
			hosts := vsDestinations(&networking.VirtualService{Http: []*networking.HTTPRoute{dr}}, nil)
			for _, h := range hosts {
				visit(dc.Key.Namespace, h)
			}
		}
	}
}

func cloneMatches(ms []*networking.HTTPMatchRequest) []*networking.HTTPMatchRequest {
	out := make([]*networking.HTTPMatchRequest, len(ms))
	for i, m := range ms {
		out[i] = proto.Clone(m).(*networking.HTTPMatchRequest)
	}
	return out
}

// unionSyms is the sorted union of two sorted sets (a is not modified).
func unionSyms(a, b []index.Sym) []index.Sym {
	if len(b) == 0 {
		return a
	}
	out := append(slices.Clip(a), b...)
	slices.Sort(out)
	return slices.Compact(out)
}

// resolveRouteHosts makes the destination hosts of r fully qualified in
// namespace ns (istiod's ResolveShortnameToFQDN).
func resolveRouteHosts(r *networking.HTTPRoute, ns, suffix string) {
	for _, w := range r.Route {
		if w.Destination != nil {
			w.Destination.Host = resolveHost(w.Destination.Host, ns, suffix)
		}
	}
	if r.Mirror != nil {
		r.Mirror.Host = resolveHost(r.Mirror.Host, ns, suffix)
	}
	for _, m := range r.Mirrors {
		if m.Destination != nil {
			m.Destination.Host = resolveHost(m.Destination.Host, ns, suffix)
		}
	}
}

// resolveMatchGateways writes the gateways the matches name as
// "NAMESPACE/NAME", short names relative to ns (istiod's
// resolveGatewayName); "mesh" stays.
func resolveMatchGateways(ms []*networking.HTTPMatchRequest, ns string) {
	for _, m := range ms {
		for i, g := range m.Gateways {
			if g != "mesh" {
				m.Gateways[i] = resolveGatewayName(g, ns)
			}
		}
	}
}

func resolveGatewayName(g, ns string) string {
	before, after, found := strings.Cut(g, "/")
	if found {
		if before == "." {
			return ns + "/" + after
		}
		return g
	}
	i := strings.IndexByte(g, '.')
	if i < 0 {
		return ns + "/" + g
	}
	// The legacy form "name.namespace[.svc.cluster.local]".
	rest := g[i+1:]
	if j := strings.IndexByte(rest, '.'); j >= 0 {
		rest = rest[:j]
	}
	return rest + "/" + g[:i]
}

// mergeDelegateRoute is istiod's mergeHTTPRoute: dr (a copy the caller
// owns) with root's matches merged into its own and root's settings where
// it has none; nil when a match conflicts.
func mergeDelegateRoute(root, dr *networking.HTTPRoute) *networking.HTTPRoute {
	merged, conflict := mergeMatches(root.Match, dr.Match)
	if conflict {
		return nil
	}
	dr.Match = merged
	switch {
	case dr.Name == "":
		dr.Name = root.Name
	case root.Name != "":
		dr.Name = root.Name + "-" + dr.Name
	}
	if dr.Rewrite == nil {
		dr.Rewrite = root.Rewrite
	}
	if dr.DirectResponse == nil {
		dr.DirectResponse = root.DirectResponse
	}
	if dr.Timeout == nil {
		dr.Timeout = root.Timeout
	}
	if dr.Retries == nil {
		dr.Retries = root.Retries
	}
	if dr.Fault == nil {
		dr.Fault = root.Fault
	}
	if dr.Mirror == nil {
		dr.Mirror = root.Mirror
	}
	if dr.MirrorPercent == nil { //nolint:staticcheck // istiod still merges it
		dr.MirrorPercent = root.MirrorPercent //nolint:staticcheck
	}
	if dr.MirrorPercentage == nil {
		dr.MirrorPercentage = root.MirrorPercentage
	}
	if dr.CorsPolicy == nil {
		dr.CorsPolicy = root.CorsPolicy
	}
	if dr.Mirrors == nil {
		dr.Mirrors = root.Mirrors
	}
	if dr.Headers == nil {
		dr.Headers = root.Headers
	}
	return dr
}

// mergeMatches is istiod's mergeHTTPMatchRequests: every delegate match
// must fit under at least one root match (it is merged with each it fits
// under); one that fits under none is a conflict.
func mergeMatches(root, delegate []*networking.HTTPMatchRequest) ([]*networking.HTTPMatchRequest, bool) {
	if len(root) == 0 {
		return delegate, false
	}
	if len(delegate) == 0 {
		return root, false
	}
	var out []*networking.HTTPMatchRequest
	for _, sub := range delegate {
		found := false
		for _, rm := range root {
			if matchConflict(rm, sub) {
				continue
			}
			out = append(out, mergeMatch(rm, sub))
			found = true
		}
		if !found {
			return nil, true
		}
	}
	return out, len(out) == 0
}

// mergeMatch is istiod's mergeHTTPMatchRequest: the delegate's match, with
// the root's conditions where it sets none and their maps merged (the
// delegate's entries win).
func mergeMatch(root, sub *networking.HTTPMatchRequest) *networking.HTTPMatchRequest {
	out := proto.Clone(sub).(*networking.HTTPMatchRequest)
	switch {
	case out.Name == "":
		out.Name = root.Name
	case root.Name != "":
		out.Name = root.Name + "-" + out.Name
	}
	if out.Uri == nil {
		out.Uri = root.Uri
	}
	if out.Scheme == nil {
		out.Scheme = root.Scheme
	}
	if out.Method == nil {
		out.Method = root.Method
	}
	if out.Authority == nil {
		out.Authority = root.Authority
	}
	out.Headers = mergeMaps(root.Headers, sub.Headers)
	out.WithoutHeaders = mergeMaps(root.WithoutHeaders, sub.WithoutHeaders)
	out.QueryParams = mergeMaps(root.QueryParams, sub.QueryParams)
	if out.Port == 0 {
		out.Port = root.Port
	}
	out.SourceLabels = mergeMaps(root.SourceLabels, sub.SourceLabels)
	if out.SourceNamespace == "" {
		out.SourceNamespace = root.SourceNamespace
	}
	if len(out.Gateways) == 0 {
		out.Gateways = root.Gateways
	}
	if out.StatPrefix == "" {
		out.StatPrefix = root.StatPrefix
	}
	return out
}

// mergeMaps is a copy of a with b's entries added over it.
func mergeMaps[V any](a, b map[string]V) map[string]V {
	if len(a) == 0 && len(b) == 0 {
		return nil
	}
	out := make(map[string]V, len(a)+len(b))
	maps.Copy(out, a)
	maps.Copy(out, b)
	return out
}

// matchConflict is istiod's hasConflict: the delegate match leaf cannot
// narrow the root match.
func matchConflict(root, leaf *networking.HTTPMatchRequest) bool {
	roots := [...]*networking.StringMatch{root.Uri, root.Scheme, root.Method, root.Authority}
	leaves := [...]*networking.StringMatch{leaf.Uri, leaf.Scheme, leaf.Method, leaf.Authority}
	for i := range roots {
		if stringMatchConflict(roots[i], leaves[i]) {
			return true
		}
	}
	for k, v := range leaf.Headers {
		if stringMatchConflict(root.Headers[k], v) {
			return true
		}
	}
	for k, v := range leaf.WithoutHeaders {
		if stringMatchConflict(root.WithoutHeaders[k], v) {
			return true
		}
	}
	for k, v := range leaf.QueryParams {
		if stringMatchConflict(root.QueryParams[k], v) {
			return true
		}
	}
	if root.IgnoreUriCase != leaf.IgnoreUriCase {
		return true
	}
	if root.Port > 0 && leaf.Port > 0 && root.Port != leaf.Port {
		return true
	}
	if root.SourceNamespace != "" && leaf.SourceNamespace != root.SourceNamespace {
		return true
	}
	for k, v := range leaf.SourceLabels {
		if rv, ok := root.SourceLabels[k]; ok && rv != v {
			return true
		}
	}
	if len(root.Gateways) > 0 && len(leaf.Gateways) > 0 {
		if len(root.Gateways) < len(leaf.Gateways) {
			return true
		}
		for _, g := range leaf.Gateways {
			found := false
			for _, rg := range root.Gateways {
				found = found || rg == g
			}
			if !found {
				return true
			}
		}
	}
	return false
}

// stringMatchConflict is istiod's: a leaf condition must lie within the
// root's (an exact value equal to the root's exact, or a prefix or exact
// value under the root's prefix); regexes cannot be compared, so a regex
// on either side of a condition both set conflicts.
func stringMatchConflict(root, leaf *networking.StringMatch) bool {
	if root == nil || leaf == nil {
		return false
	}
	if root.GetRegex() != "" && (leaf.GetRegex() != "" || leaf.GetPrefix() != "" || leaf.GetExact() != "") {
		return true
	}
	if leaf.GetRegex() != "" && (root.GetRegex() != "" || root.GetPrefix() != "" || root.GetExact() != "") {
		return true
	}
	if exact := root.GetExact(); exact != "" {
		return leaf.GetPrefix() != "" || leaf.GetExact() != exact
	}
	if prefix := root.GetPrefix(); prefix != "" {
		if p := leaf.GetPrefix(); p != "" {
			return !strings.HasPrefix(p, prefix)
		}
		if e := leaf.GetExact(); e != "" {
			return !strings.HasPrefix(e, prefix)
		}
	}
	return true
}

package rules

import (
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/index"
)

// What the engine derives from config once, rather than at every build,
// lives in values that scopes own, never in package-level maps:
//
//   - configView: per config version (index.Snapshot.ConfigVersion), shared
//     by every Scope of that version: whether some Gateway has an
//     AUTO_PASSTHROUGH server, root VirtualServices merged with their
//     delegates, and the merged gateways built in it (a
//     router whose Gateways did not change reuses the previous version's,
//     route keys included; only the previous version's are kept), and the
//     merged DestinationRules of hosts with several rules in a pool, and
//     the label keys failoverPriority lists name (classes keep them).
//   - scopeMemo: per Scope, shared by the copies of the scope made for the
//     endpoint-only snapshots that follow (their config is the same): the
//     merged gateway, the route view, AUTO_PASSTHROUGH among the scope's
//     Gateways.
//
// Both are dropped with the scopes that point at them. With verify mode on
// (PILOTFISH_VERIFY_CACHE=1, as make test runs), each memoized value is
// computed again the first time it is used in each snapshot and compared
// with the memo, which panics on a difference: a memo that misses an input
// fails the tests as a cache key that misses one does.

// configView is the derived state of one config version.
type configView struct {
	version uint64 // index.Snapshot.ConfigVersion
	verify  bool
	// mesh is the mesh the view was made for (nil: istiod's defaults), and
	// exports its exportTo defaults (exportto.go).
	mesh    *encode.Mesh
	exports meshExports

	autoPassthrough lazyBool
	// delegated holds the merged rows of root VirtualServices
	// (delegatedKey → *index.Config, virtualservice_delegate.go).
	delegated sync.Map

	mu       sync.Mutex
	gateways map[uint64]*mergedGateway // by digest, built or reused in this version; guarded by mu
	prev     map[uint64]*mergedGateway // the previous version's: read-only

	drMu      sync.Mutex
	destRules map[drPoolKey][]drEntry // merged DestinationRules (destrule_pool.go); guarded by drMu

	// failoverKeys: the label keys failoverPriority lists name
	// (build_eds_failover.go), set once.
	failoverKeys atomic.Pointer[[]string]

	// ef: compiled EnvoyFilters and interned patch sets (envoyfilter.go).
	ef efState
}

func newConfigView(version uint64, verify bool, prev *configView, mesh *encode.Mesh) *configView {
	v := &configView{}
	v.init(version, verify, prev, mesh)
	return v
}

func (v *configView) init(version uint64, verify bool, prev *configView, mesh *encode.Mesh) {
	v.version, v.verify = version, verify
	v.mesh, v.exports = mesh, newMeshExports(mesh)
	if prev != nil {
		prev.mu.Lock()
		v.prev = prev.gateways
		prev.mu.Unlock()
	}
}

// Views hands out the configView of the current config version: a new one
// (inheriting the last one's merged gateways) when the version moves on.
// An engine keeps one and passes its views to NewScopeIn.
type Views struct {
	// Verify: check memos against fresh values (the cache's verify mode).
	Verify bool
	mu     sync.Mutex
	cur    *configView  // guarded by mu
	mesh   *encode.Mesh // guarded by mu
}

// SetMesh sets the mesh whose settings views resolve visibility with (the
// exportTo defaults, exportto.go); nil is istiod's defaults. The engine
// sets it before its first scope and again when the mesh changes: views
// handed out later are of the new mesh, and the scopes of the old one must
// be dropped (their visible services were decided with it).
func (vs *Views) SetMesh(m *encode.Mesh) {
	vs.mu.Lock()
	defer vs.mu.Unlock()
	vs.mesh = m
}

// Of returns the view for snap's config version and the current mesh. A
// snapshot older than the current view's (a build racing a config change)
// gets a view of its own.
func (vs *Views) Of(snap *index.Snapshot) *configView {
	vs.mu.Lock()
	defer vs.mu.Unlock()
	switch cur := vs.cur; {
	case cur != nil && cur.version == snap.ConfigVersion && cur.mesh == vs.mesh:
		return cur
	case cur != nil && cur.version > snap.ConfigVersion:
		return newConfigView(snap.ConfigVersion, vs.Verify, nil, vs.mesh)
	}
	// A new version or mesh: merged gateways of the last view are reused
	// through their digests, which hold the mesh's part (withRouteMesh).
	vs.cur = newConfigView(snap.ConfigVersion, vs.Verify, vs.cur, vs.mesh)
	return vs.cur
}

// reuseGateway returns the merged gateway of this version or the previous
// one with m's digest, or records m and returns it.
func (v *configView) reuseGateway(m *mergedGateway) *mergedGateway {
	v.mu.Lock()
	defer v.mu.Unlock()
	if old, ok := v.gateways[m.digest]; ok {
		return old
	}
	if old, ok := v.prev[m.digest]; ok && old.names == m.names {
		m = old
	}
	if v.gateways == nil {
		v.gateways = map[uint64]*mergedGateway{}
	}
	v.gateways[m.digest] = m
	return m
}

// HasAutoPassthrough: some Gateway of the version has an AUTO_PASSTHROUGH
// server, so some router may subscribe to SNI-DNAT names (the endpoint fast
// path asks at every push).
func (v *configView) HasAutoPassthrough(snap *index.Snapshot) bool {
	got, ok := v.autoPassthrough.get()
	if !ok {
		got = AutoPassthrough(snap)
		v.autoPassthrough.set(got)
		return got
	}
	if v.verify {
		if fresh := AutoPassthrough(snap); fresh != got {
			panic(fmt.Sprintf("engine: verify: AUTO_PASSTHROUGH of config version %d memoized as %v, now %v", v.version, got, fresh))
		}
	}
	return got
}

// scopeMemo is what a scope derives once (see above).
type scopeMemo struct {
	gateway         atomic.Pointer[mergedGateway]
	routes          atomic.Pointer[routeViewMemo]
	autoPassthrough lazyBool
	patches         atomic.Pointer[patchesMemo] // envoyfilter.go
	// checked* are the snapshot versions verify mode last checked the
	// memos in.
	checkedGateway, checkedRoutes, checkedAuto atomic.Uint64
}

type routeViewMemo struct {
	mesh *encode.Mesh
	v    *routeView
}

// firstUseIn reports whether verify mode should check a memo in snap: once
// per snapshot version.
func firstUseIn(checked *atomic.Uint64, snap *index.Snapshot) bool {
	return checked.Swap(snap.Version+1) != snap.Version+1
}

// lazyBool is a bool computed once: 0 unknown, 1 false, 2 true.
type lazyBool struct{ v atomic.Int32 }

func (b *lazyBool) get() (value, ok bool) {
	v := b.v.Load()
	return v == 2, v != 0
}

func (b *lazyBool) set(value bool) {
	if value {
		b.v.Store(2)
	} else {
		b.v.Store(1)
	}
}

// verifyRouteView panics when a fresh route view differs from the memo.
func verifyRouteView(sc *Scope, mesh *encode.Mesh, memo *routeView) {
	if fresh := newRouteView(sc, mesh); !reflect.DeepEqual(fresh, memo) {
		panic(fmt.Sprintf("engine: verify: the route view of scope %s/%s (snapshot %d) differs from a fresh one: a memo misses an input",
			sc.Class.Type, sc.Class.Namespace, sc.Snapshot.Version))
	}
}

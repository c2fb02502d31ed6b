package engine

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/index"
	"github.com/pilotfish-mesh/pilotfish/rules"
)

// Options configure the engine. Zero values take istiod's defaults.
type Options struct {
	// DebounceAfter: wait this long without new changes before pushing
	// (PILOT_DEBOUNCE_AFTER, 100ms).
	DebounceAfter time.Duration
	// DebounceMax: push at the latest this long after the first change
	// (PILOT_DEBOUNCE_MAX, 10s).
	DebounceMax time.Duration
	// DisableEDSDebounce pushes endpoint-only changes without debouncing
	// (PILOT_ENABLE_EDS_DEBOUNCE=false).
	DisableEDSDebounce bool
	// PushThrottle is how many connections may be pushed to concurrently
	// (PILOT_PUSH_THROTTLE, 100).
	PushThrottle int
	Mesh         *encode.Mesh
	Logger       *slog.Logger
	Metrics      Metrics
	// Cache lets tests share or inspect the bytes cache; nil makes one.
	Cache *encode.Cache
}

// Index is the engine's read-only view of the index.
type Index interface {
	Snapshot() *index.Snapshot
	Subscribe(func(*index.Snapshot, *index.ChangeSet))
}

// Engine owns connected proxies and decides what to push to whom.
type Engine struct {
	opts    Options
	idx     Index
	cache   *encode.Cache
	log     *slog.Logger
	metrics Metrics
	queue   *pushQueue
	nextID  atomic.Uint64
	// responses counts memo hits and builds per type (ResponseStats).
	responses responseCounters

	mu      sync.Mutex          // guards classes, conns, closing
	classes map[classKey]*class // guarded by mu
	conns   map[*Conn]struct{}  // guarded by mu
	closing bool                // guarded by mu

	changes changeAccumulator
	// cdsDigests: per service, the endpoint facts its clusters depend on,
	// as last pushed (see clusterFactsChanged). Run loop only.
	cdsDigests map[index.ServiceKey]uint64

	// meshState: the mesh, its flipped variant (a Sidecar's outbound
	// traffic policy picks one) and its generation; SetMesh swaps it.
	meshState atomic.Pointer[meshState]
	meshMu    sync.Mutex // serializes SetMesh

	// views hands out the derived state of each config version (rules/view.go).
	views rules.Views
}

// New returns an engine reading idx. Call Run to start pushing.
func New(idx Index, opts Options) *Engine {
	if opts.DebounceAfter <= 0 {
		opts.DebounceAfter = 100 * time.Millisecond
	}
	if opts.DebounceMax <= 0 {
		opts.DebounceMax = 10 * time.Second
	}
	if opts.Mesh == nil {
		opts.Mesh = encode.DefaultMesh()
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Metrics == nil {
		opts.Metrics = nopMetrics{}
	}
	if opts.Cache == nil {
		opts.Cache = encode.NewCache()
	}
	e := &Engine{
		opts:       opts,
		idx:        idx,
		cache:      opts.Cache,
		log:        opts.Logger.With("component", "engine"),
		metrics:    opts.Metrics,
		queue:      newPushQueue(opts.PushThrottle),
		classes:    map[classKey]*class{},
		conns:      map[*Conn]struct{}{},
		cdsDigests: map[index.ServiceKey]uint64{},
	}
	e.meshState.Store(&meshState{mesh: opts.Mesh, meshes: rules.NewMeshes(opts.Mesh), gen: 1})
	e.views.SetMesh(opts.Mesh)
	e.views.Verify = opts.Cache.Verifying()
	e.changes.init()
	e.recordClusterFacts(idx.Snapshot())
	idx.Subscribe(e.changes.add)
	return e
}

// Cache returns the engine's bytes cache.
func (e *Engine) Cache() *encode.Cache { return e.cache }

// Snapshot returns the index snapshot the engine serves.
func (e *Engine) Snapshot() *index.Snapshot { return e.idx.Snapshot() }

// Connect registers a proxy for a new stream.
func (e *Engine) Connect(ctx context.Context, n *corev3.Node, peer string) (*Conn, error) {
	node, err := ParseNode(n)
	if err != nil {
		return nil, err
	}
	snap := e.idx.Snapshot()
	key := classKey{class: e.classOf(snap, node), instances: rules.ClassInstancesKey(snap, node)}
	c := &Conn{
		e:         e,
		id:        node.ID + "-" + strconv.FormatUint(e.nextID.Add(1), 10),
		node:      node,
		pending:   make(chan struct{}, 1),
		connected: time.Now(),
		verified:  verifiedFrom(ctx),
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closing {
		return nil, ErrShuttingDown
	}
	c.class = e.classLocked(key, node)
	c.class.conns[c] = struct{}{}
	e.conns[c] = struct{}{}
	e.metrics.Proxies(len(e.conns))
	e.log.Debug("proxy connected", "proxy", c.id, "peer", peer, "type", node.Type.String(), "namespace", node.Namespace)
	return c, nil
}

func (e *Engine) classLocked(key classKey, node *Node) *class {
	cl := e.classes[key]
	if cl == nil {
		cl = &class{key: key, conns: map[*Conn]struct{}{}, node: node}
		e.classes[key] = cl
	}
	return cl
}

func (e *Engine) disconnect(c *Conn) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.conns, c)
	delete(c.class.conns, c)
	if len(c.class.conns) == 0 {
		delete(e.classes, c.class.key)
	}
	e.metrics.Proxies(len(e.conns))
}

// Conns returns the connected proxies, for debug endpoints.
func (e *Engine) Conns() []*Conn {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]*Conn, 0, len(e.conns))
	for c := range e.conns {
		out = append(out, c)
	}
	return out
}

// NumClasses returns the number of distinct proxy classes connected.
func (e *Engine) NumClasses() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.classes)
}

// generate dispatches to the builder of typeURL. A Secret a proxy asks
// for and does not get is logged (buildSecrets).
func (e *Engine) generate(sc *rules.Scope, cache *encode.Cache, typeURL string, names []string, wildcard bool, dst []Resource) ([]Resource, error) {
	if typeURL == TypeSecret {
		return e.buildSecrets(sc, names, dst)
	}
	return build(typeURL, sc, e.meshNow().meshes.For(sc), cache, names, wildcard, dst)
}

// build is rules.Build, the builders' table; a test wraps it to watch or
// slow a type's builds.
var build = rules.Build

// classOf is the class of node in snap, with the mesh's root namespace.
// When the mesh may trace (its config, or a Telemetry naming one of its
// tracing providers), the class holds the proxy's tracing identity
// (mesh_tracing.go): its HCMs carry it.
func (e *Engine) classOf(snap *index.Snapshot, node *Node) encode.ProxyClass {
	m := e.meshNow().mesh
	c := rules.ClassOfIn(&e.views, snap, m.RootNamespace, node)
	if mayTrace(m) {
		c.Trace = traceIdentity(node)
	}
	return c
}

// buildSecrets is the Secret builder for a proxy's request: a credential
// left out is logged at debug level by name and reason (the reasons name
// Secrets and keys, never material).
func (e *Engine) buildSecrets(sc *rules.Scope, names []string, dst []Resource) ([]Resource, error) {
	return rules.SecretsFor(sc, e.cache, names, dst, func(name string, err error) {
		e.log.Debug("sds: credential not served", "namespace", sc.Class.Namespace, "resource", name, "reason", err)
	})
}

// classKey groups proxies that get identical config.
type classKey struct {
	class     encode.ProxyClass
	instances string
}

// class is a group of connected proxies with identical config inputs. Its
// scope is computed once per snapshot and shared by all of them.
type class struct {
	key   classKey
	node  *Node              // a representative node (identity fields are equal across the class)
	conns map[*Conn]struct{} // guarded by Engine.mu
	mu    sync.Mutex         // serializes scope rebuilds
	sc    atomic.Pointer[classScope]
	// pushed is the scope the class's last full push was decided on (run
	// loop only; see scopedTargets).
	pushed atomic.Pointer[rules.Scope]
	// repush: connections reclassify moved in hold config pushed does not
	// describe (run loop only; see settleMoves).
	repush bool

	memoMu sync.Mutex         // guards memos
	memos  map[string][]*memo // type URL → recent responses, newest first; guarded by memoMu
}

// classScope is a class's scope and the mesh generation it was made
// with: a mesh change (SetMesh) can change what the same snapshot shows
// (exportTo defaults, the root namespace).
type classScope struct {
	scope *rules.Scope
	gen   uint64
}

// scope returns the class's scope in the current snapshot and mesh.
func (cl *class) scope(e *Engine) *rules.Scope {
	snap, gen := e.idx.Snapshot(), e.meshNow().gen
	if s := cl.sc.Load(); s != nil && s.scope.Snapshot == snap && s.gen == gen {
		return s.scope
	}
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if s := cl.sc.Load(); s != nil && s.scope.Snapshot == snap && s.gen == gen {
		return s.scope
	}
	prev := cl.sc.Load()
	var s *rules.Scope
	if prev != nil && prev.gen == gen && prev.scope.Snapshot.ConfigVersion == snap.ConfigVersion {
		// Only endpoints changed: the visible services are the same rows.
		cp := *prev.scope
		cp.Snapshot = snap
		s = &cp
	} else {
		s = rules.NewScopeIn(e.views.Of(snap), snap, &cl.key.class)
		s.Instances = rules.ComputeInstances(snap, cl.node)
		s.GatewayTargets = rules.ComputeGatewayTargets(snap, cl.node)
	}
	cl.sc.Store(&classScope{scope: s, gen: gen})
	return s
}

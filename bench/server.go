package bench

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"google.golang.org/grpc"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/engine"
	"github.com/pilotfish-mesh/pilotfish/index"
	"github.com/pilotfish-mesh/pilotfish/serve"
)

// The servers a scenario runs against.
const (
	// Pilotfish is pilotfish wired as `pilotfish serve` wires it: index,
	// engine, serve's ADS on a grpc.Server with serve.ServerOptions.
	Pilotfish = "pilotfish"
	// Snapshot is go-control-plane's SnapshotCache, one snapshot shared by
	// every node, behind its ADS server.
	Snapshot = "snapshot"
	// Linear is a go-control-plane MuxCache of one LinearCache per type
	// behind its ADS server.
	Linear = "linear"
	// Floor does nothing per proxy but write pre-encoded responses and
	// read requests, on pilotfish's transport settings: what gRPC-go and
	// the kernel cost alone (floor.go). Only on request: not in Servers.
	Floor = "floor"
)

// Servers lists the servers a run measures by default, in order.
var Servers = []string{Pilotfish, Snapshot, Linear}

// KnownServers lists every server a run can measure.
var KnownServers = []string{Pilotfish, Snapshot, Linear, Floor}

// server is one xDS server under test, listening on 127.0.0.1.
type server interface {
	addr() string
	// apply makes change c: pilotfish through its config (or endpoint)
	// input, a baseline by publishing c.updates.
	apply(ctx context.Context, c *change) error
	// dropAll closes every client connection and returns how many it closed.
	dropAll() int
	// open returns the number of open client connections.
	open() int
	stop()
}

// serverOptions configure a server.
type serverOptions struct {
	debounce    time.Duration // pilotfish's engine debounce
	verifyCache bool
}

func startServer(kind string, p *plan, o serverOptions) (server, error) {
	switch kind {
	case Pilotfish:
		return startPilotfish(p, o)
	case Snapshot:
		return startSnapshot(p)
	case Linear:
		return startLinear(p)
	case Floor:
		return startFloor(p)
	}
	return nil, fmt.Errorf("bench: unknown server %q (want one of %s)", kind, strings.Join(KnownServers, ", "))
}

// grpcHost is a gRPC server on a tracking listener.
type grpcHost struct {
	gs  *grpc.Server
	lis *trackingListener
}

func listen(gs *grpc.Server) (*grpcHost, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("bench: listen: %w", err)
	}
	h := &grpcHost{gs: gs, lis: &trackingListener{Listener: l, conns: map[*trackedConn]struct{}{}}}
	go func() { _ = gs.Serve(h.lis) }()
	return h, nil
}

func (h *grpcHost) addr() string { return h.lis.Addr().String() }
func (h *grpcHost) dropAll() int { return h.lis.dropAll() }
func (h *grpcHost) open() int    { return h.lis.open() }

// trackingListener remembers its open connections so that a reconnect
// storm can cut them all at once.
type trackingListener struct {
	net.Listener
	mu    sync.Mutex
	conns map[*trackedConn]struct{} // guarded by mu
}

type trackedConn struct {
	net.Conn
	l    *trackingListener
	once sync.Once
}

func (l *trackingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: c, l: l}
	l.mu.Lock()
	l.conns[tc] = struct{}{}
	l.mu.Unlock()
	return tc, nil
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.l.mu.Lock()
		delete(c.l.conns, c)
		c.l.mu.Unlock()
	})
	return c.Conn.Close()
}

func (l *trackingListener) open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns)
}

func (l *trackingListener) dropAll() int {
	l.mu.Lock()
	conns := slices.Collect(maps.Keys(l.conns))
	l.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
	return len(conns)
}

// pilotfishServer is pilotfish as `pilotfish serve` wires it, minus the
// file watcher: changes enter through the same decode, validate and
// convert steps (config) or as an endpoint group (endpoints), as a
// Kubernetes source would feed them.
type pilotfishServer struct {
	*grpcHost
	w      *index.Writer
	in     *ingester
	cancel context.CancelFunc
	done   chan struct{}
}

func startPilotfish(p *plan, o serverOptions) (*pilotfishServer, error) {
	w := index.NewWriter()
	in := newIngester(w)
	if err := in.apply(p.workload.Files...); err != nil {
		return nil, err
	}
	cache := encode.NewCache()
	cache.SetVerify(o.verifyCache)
	eng := engine.New(w, engine.Options{DebounceAfter: o.debounce, Cache: cache})
	gs := grpc.NewServer(serve.ServerOptions()...)
	serve.NewXDSServer(backend{eng}, serve.XDSOptions{}).Register(gs)
	h, err := listen(gs)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &pilotfishServer{grpcHost: h, w: w, in: in, cancel: cancel, done: make(chan struct{})}
	go func() { defer close(s.done); eng.Run(ctx) }()
	return s, nil
}

func (s *pilotfishServer) apply(_ context.Context, c *change) error {
	switch {
	case c.manifest != nil:
		return s.in.apply(*c.manifest)
	case c.edit != nil:
		return applyEndpointEdit(s.w, *c.edit)
	}
	return errors.New("bench: empty change")
}

func (s *pilotfishServer) stop() {
	s.gs.Stop()
	s.cancel()
	<-s.done
}

// backend adapts the engine to serve.Backend, as cmd/pilotfish does.
type backend struct{ e *engine.Engine }

func (b backend) Connect(ctx context.Context, node *corev3.Node, peer string) (serve.Session, error) {
	c, err := b.e.Connect(ctx, node, peer)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// gcpServer is go-control-plane's ADS server over a cache, on a default
// grpc.Server, as its examples wire it.
type gcpServer struct {
	*grpcHost
	cancel  context.CancelFunc
	publish func(ctx context.Context, ups []typeUpdate) error
}

func startGCP(cache cachev3.Cache, publish func(context.Context, []typeUpdate) error) (*gcpServer, error) {
	ctx, cancel := context.WithCancel(context.Background())
	gs := grpc.NewServer()
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(gs, serverv3.NewServer(ctx, cache, nil))
	h, err := listen(gs)
	if err != nil {
		cancel()
		return nil, err
	}
	return &gcpServer{grpcHost: h, cancel: cancel, publish: publish}, nil
}

func (s *gcpServer) apply(ctx context.Context, c *change) error { return s.publish(ctx, c.updates) }

func (s *gcpServer) stop() {
	s.gs.Stop()
	s.cancel()
}

// allNodes maps every node to one snapshot: one shared config, no
// per-proxy translation (the most favourable use of a SnapshotCache).
type allNodes struct{}

func (allNodes) ID(*corev3.Node) string { return "all" }

// quietLogger discards go-control-plane's logs.
type quietLogger struct{}

func (quietLogger) Debugf(string, ...any) {}
func (quietLogger) Infof(string, ...any)  {}
func (quietLogger) Warnf(string, ...any)  {}
func (quietLogger) Errorf(string, ...any) {}

// startSnapshot serves p from a SnapshotCache. A change publishes a new
// snapshot in which only the changed types get a new version, so the
// server pushes only those.
func startSnapshot(p *plan) (*gcpServer, error) {
	cache := cachev3.NewSnapshotCache(true, allNodes{}, quietLogger{})
	cur := map[string]map[string]types.Resource{}
	versions := map[string]int{}
	var snap cachev3.Snapshot
	set := func(typeURL string) {
		versions[typeURL]++
		items := slices.Collect(maps.Values(cur[typeURL]))
		snap.Resources[cachev3.GetResponseType(typeURL)] = cachev3.NewResources(strconv.Itoa(versions[typeURL]), items)
	}
	for _, typ := range xdsTypes {
		cur[typ] = maps.Clone(p.initial[typ])
		set(typ)
	}
	first := snap
	if err := cache.SetSnapshot(context.Background(), "all", &first); err != nil {
		return nil, fmt.Errorf("bench: snapshot: %w", err)
	}
	var mu sync.Mutex
	return startGCP(cache, func(ctx context.Context, ups []typeUpdate) error {
		mu.Lock()
		defer mu.Unlock()
		for _, u := range ups {
			maps.Copy(cur[u.typeURL], u.put)
			for _, n := range u.removed {
				delete(cur[u.typeURL], n)
			}
			set(u.typeURL)
		}
		next := snap
		return cache.SetSnapshot(ctx, "all", &next)
	})
}

// startLinear serves p from one LinearCache per type behind a MuxCache. A
// change updates the changed resources of each changed type, in xdsTypes
// order.
func startLinear(p *plan) (*gcpServer, error) {
	caches := map[string]*cachev3.LinearCache{}
	mux := &cachev3.MuxCache{
		Classify:      func(r *cachev3.Request) string { return r.GetTypeUrl() },
		ClassifyDelta: func(r *cachev3.DeltaRequest) string { return r.GetTypeUrl() },
		Caches:        map[string]cachev3.Cache{},
	}
	for _, typ := range xdsTypes {
		c := cachev3.NewLinearCache(typ, cachev3.WithInitialResources(maps.Clone(p.initial[typ])), cachev3.WithLogger(quietLogger{}))
		caches[typ] = c
		mux.Caches[typ] = c
	}
	return startGCP(mux, func(_ context.Context, ups []typeUpdate) error {
		for _, u := range ups {
			if err := caches[u.typeURL].UpdateResources(u.put, u.removed); err != nil {
				return fmt.Errorf("bench: linear cache %s: %w", typeShort(u.typeURL), err)
			}
		}
		return nil
	})
}

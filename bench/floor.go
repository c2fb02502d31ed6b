package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/puzpuzpuz/xsync/v4"
	"google.golang.org/grpc"

	"github.com/pilotfish-mesh/pilotfish/serve"
)

// floorServer is the floor of the server side: an ADS server (SotW and
// Delta) that does nothing per proxy but write pre-encoded responses and
// read requests, on a grpc.Server with pilotfish's transport settings
// (serve.ServerOptions). Run against the same plan and loadgen, it shows
// what gRPC-go, the kernel and the scheduler cost alone; pilotfish's cost
// above it is its own.
//
// Each (type, version) of a resource is encoded once; each response body
// (nonce included) is assembled once and written as is by every stream
// owed it (floorBodyKey). A stream is gRPC's handler goroutine, which reads
// requests, plus one goroutine that waits for the next change and sends
// it; its state is, per type, whether it subscribed and a pointer to a
// shared subscription.
type floorServer struct {
	*grpcHost
	mu     sync.Mutex // serializes apply
	latest atomic.Pointer[floorEpoch]
	nonce  atomic.Uint64 // the last nonce given to a body
	sets   *floorSets
	bodies *xsync.Map[floorBodyKey, *wireBody]
}

// floorEpoch is the served config after a change. Epochs form a chain:
// succ is set, then next closed, when the next change is published, which
// wakes every stream waiting on this one.
type floorEpoch struct {
	seq     uint64
	types   [4]*floorType // xdsTypes order; unchanged types are shared
	changed [4][]string   // names put or removed by this epoch's change, sorted
	next    chan struct{}
	succ    *floorEpoch
}

// floorType is one type's resources at one version, immutable.
type floorType struct {
	idx     int // in xdsTypes
	url     string
	version uint64 // the epoch that last changed it
	res     map[string]*floorResource
	all     []*floorResource // sorted by name
}

// xdsWildcard reports whether type xdsTypes[t] is subscribed to as a
// wildcard (CDS, LDS) rather than by name (EDS, RDS).
func xdsWildcard(t int) bool { return t == 1 || t == 2 }

func startFloor(p *plan) (*floorServer, error) {
	s := &floorServer{sets: newFloorSets(), bodies: xsync.NewMap[floorBodyKey, *wireBody]()}
	e := &floorEpoch{seq: 1, next: make(chan struct{})}
	for i, typ := range xdsTypes {
		ft, _, err := (&floorType{idx: i, url: typ}).with(e.seq, typeUpdate{typeURL: typ, put: p.initial[typ]})
		if err != nil {
			return nil, err
		}
		e.types[i] = ft
	}
	s.latest.Store(e)
	gs := grpc.NewServer(append(serve.ServerOptions(), grpc.ForceServerCodecV2(floorCodec{}))...)
	gs.RegisterService(&floorADS, s)
	h, err := listen(gs)
	if err != nil {
		return nil, err
	}
	s.grpcHost = h
	return s, nil
}

// with returns ft after u, at version seq, and the names u touched.
func (ft *floorType) with(seq uint64, u typeUpdate) (*floorType, []string, error) {
	next := &floorType{idx: ft.idx, url: ft.url, version: seq, res: maps.Clone(ft.res)}
	if next.res == nil {
		next.res = map[string]*floorResource{}
	}
	changed := make([]string, 0, len(u.put)+len(u.removed))
	for name, m := range u.put {
		r, err := encodeFloorResource(name, m, seq)
		if err != nil {
			return nil, nil, err
		}
		next.res[name] = r
		changed = append(changed, name)
	}
	for _, name := range u.removed {
		delete(next.res, name)
		changed = append(changed, name)
	}
	next.all = slices.SortedFunc(maps.Values(next.res), func(a, b *floorResource) int { return strings.Compare(a.name, b.name) })
	slices.Sort(changed)
	return next, slices.Compact(changed), nil
}

// apply encodes c's resources and publishes them as the next epoch, which
// wakes every stream.
func (s *floorServer) apply(_ context.Context, c *change) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.latest.Load()
	next := &floorEpoch{seq: cur.seq + 1, types: cur.types, next: make(chan struct{})}
	for _, u := range c.updates {
		t := floorTypeIndex([]byte(u.typeURL))
		if t < 0 {
			return fmt.Errorf("bench: floor: unexpected type %s", u.typeURL)
		}
		ft, changed, err := next.types[t].with(next.seq, u)
		if err != nil {
			return err
		}
		next.types[t], next.changed[t] = ft, changed
	}
	cur.succ = next
	s.latest.Store(next)
	close(cur.next)
	return nil
}

func (s *floorServer) stop() { s.gs.Stop() }

// floorADS is envoy's AggregatedDiscoveryService, served with the floor's
// own message types (floorRequest, wireBody) instead of the generated ones.
var floorADS = grpc.ServiceDesc{
	ServiceName: "envoy.service.discovery.v3.AggregatedDiscoveryService",
	HandlerType: (*any)(nil),
	Streams: []grpc.StreamDesc{
		{
			StreamName:    "StreamAggregatedResources",
			Handler:       func(srv any, ss grpc.ServerStream) error { return srv.(*floorServer).serveStream(ss, false) },
			ServerStreams: true, ClientStreams: true,
		},
		{
			StreamName:    "DeltaAggregatedResources",
			Handler:       func(srv any, ss grpc.ServerStream) error { return srv.(*floorServer).serveStream(ss, true) },
			ServerStreams: true, ClientStreams: true,
		},
	},
	Metadata: "envoy/service/discovery/v3/ads.proto",
}

// floorStream is one ADS stream.
type floorStream struct {
	srv   *floorServer
	ss    grpc.ServerStream
	delta bool
	// mu serializes sends and guards types against the pusher; the handler
	// goroutine, their only writer, reads them without it.
	mu    sync.Mutex
	types [4]floorSub
}

// floorSub is a stream's state for one type.
type floorSub struct {
	subscribed bool
	names      *nameSet   // named types: the subscription (shared)
	sent       *floorType // SotW wildcard types: the state last sent
}

// serveStream runs a stream: this goroutine reads and answers requests, a
// second sends changes. The second starts from the epoch current before
// the first request, so every response is of that epoch or a later one and
// no change is missed.
func (s *floorServer) serveStream(ss grpc.ServerStream, delta bool) error {
	st := &floorStream{srv: s, ss: ss, delta: delta}
	ctx, cancel := context.WithCancel(ss.Context())
	done := make(chan struct{})
	go func(e *floorEpoch) { defer close(done); st.pushLoop(ctx, e) }(s.latest.Load())
	defer func() { cancel(); <-done }()
	handle := st.handleSotW
	if delta {
		handle = st.handleDelta
	}
	req := &floorRequest{st: st}
	for {
		if err := ss.RecvMsg(req); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if err := handle(req); err != nil {
			return err
		}
	}
}

// handleSotW answers a DiscoveryRequest: a first request (or one without a
// nonce) with the type's resources, a changed EDS/RDS subscription with the
// resources it adds; an ACK or NACK needs nothing.
func (st *floorStream) handleSotW(r *floorRequest) error {
	if r.t < 0 {
		return nil
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	sub := &st.types[r.t]
	ft := st.srv.latest.Load().types[r.t]
	wildcard := xdsWildcard(r.t)
	if !sub.subscribed || !r.nonce {
		sub.subscribed, sub.names = true, r.set
		if wildcard {
			sub.sent = ft
		}
		return st.send(floorBodyKey{kind: sotwAll, typ: ft, set: r.set, all: wildcard})
	}
	if wildcard || r.set == sub.names {
		return nil
	}
	prev := sub.names
	sub.names = r.set
	return st.send(floorBodyKey{kind: sotwAdded, typ: ft, set: r.set, prev: prev})
}

// handleDelta answers a DeltaDiscoveryRequest: the first request of a
// wildcard type with every resource, a subscription with the resources
// subscribed to; an ACK or NACK needs nothing.
func (st *floorStream) handleDelta(r *floorRequest) error {
	if r.t < 0 {
		return nil
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	sub := &st.types[r.t]
	ft := st.srv.latest.Load().types[r.t]
	if xdsWildcard(r.t) {
		if sub.subscribed {
			return nil
		}
		sub.subscribed = true
		return st.send(floorBodyKey{kind: deltaAll, typ: ft, all: true})
	}
	sub.subscribed = true
	if r.tr == nil {
		return nil
	}
	sub.names = r.tr.to
	return st.send(floorBodyKey{kind: deltaSub, typ: ft, tr: r.tr})
}

// pushLoop sends each change after epoch e until ctx ends or a send fails
// (the handler then sees the stream fail).
func (st *floorStream) pushLoop(ctx context.Context, e *floorEpoch) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-e.next:
		}
		l := st.srv.latest.Load()
		if err := st.push(e, l); err != nil {
			return
		}
		e = l
	}
}

// push sends what changed from epoch from to epoch to, type by type in
// xdsTypes order: SotW the whole state of a wildcard type, the changed
// subscribed resources of a named one; Delta the changed and removed
// resources (subscribed ones, for a named type).
func (st *floorStream) push(from, to *floorEpoch) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	for t := range xdsTypes {
		sub := &st.types[t]
		ft := to.types[t]
		if !sub.subscribed || from.types[t] == ft {
			continue
		}
		wildcard := xdsWildcard(t)
		k := floorBodyKey{kind: sotwChanged, typ: ft, from: from, to: to, set: sub.names, all: wildcard}
		switch {
		case st.delta:
			k.kind = deltaChanged
		case wildcard:
			if sub.sent == ft {
				continue
			}
			sub.sent = ft
			k = floorBodyKey{kind: sotwAll, typ: ft, all: true}
		}
		if err := st.send(k); err != nil {
			return err
		}
	}
	return nil
}

// send writes the body of k, if it has one. st.mu is held.
func (st *floorStream) send(k floorBodyKey) error {
	b := st.srv.body(k)
	if b.empty() {
		return nil
	}
	return st.ss.SendMsg(b)
}

// floorBodyKey identifies a response body; every stream owed the same
// response shares one.
type floorBodyKey struct {
	kind      bodyKind
	typ       *floorType // the type's state the response is of
	from, to  *floorEpoch
	set, prev *nameSet // subscription (and, sotwAdded, the one before)
	tr        *transition
	all       bool // wildcard: every resource of the type
}

type bodyKind uint8

const (
	sotwAll      bodyKind = iota // SotW: every resource of typ in set (or all)
	sotwAdded                    // SotW: the resources of set not in prev
	sotwChanged                  // SotW: resources changed in (from, to] in set
	deltaAll                     // Delta: every resource of typ
	deltaSub                     // Delta: the resources tr subscribed to
	deltaChanged                 // Delta: resources changed or removed in (from, to] in set (or all)
)

// maxFloorBodies bounds the body table: a few bodies per type per change.
const maxFloorBodies = 4096

func (s *floorServer) body(k floorBodyKey) *wireBody {
	b, loaded := s.bodies.LoadOrCompute(k, func() (*wireBody, bool) { return s.build(k), false })
	if !loaded && s.bodies.Size() > maxFloorBodies {
		s.bodies.Clear()
	}
	return b
}

// build assembles the body of k, with a new nonce.
func (s *floorServer) build(k floorBodyKey) *wireBody {
	ft := k.typ
	var res []*floorResource
	var removed []string
	add := func(name string) bool {
		r := ft.res[name]
		if r != nil {
			res = append(res, r)
		}
		return r != nil
	}
	always := false // a response the client waits for, even if empty
	switch k.kind {
	case sotwAll, deltaAll:
		always = true
		if k.all {
			res = ft.all
			break
		}
		for _, n := range k.set.list() {
			add(n)
		}
	case sotwAdded:
		for _, n := range k.set.list() {
			if !k.prev.has(n) {
				add(n)
			}
		}
	case deltaSub:
		for _, n := range k.tr.sub {
			add(n)
		}
	case sotwChanged, deltaChanged:
		for _, n := range changedNames(k.from, k.to, ft.idx) {
			if (k.all || k.set.has(n)) && !add(n) && k.kind == deltaChanged {
				removed = append(removed, n)
			}
		}
	}
	if !always && len(res)+len(removed) == 0 {
		return &wireBody{}
	}
	delta := k.kind >= deltaAll
	n := len(ft.url) + 64
	for _, r := range res {
		n += len(r.delta) + 8
	}
	for _, r := range removed {
		n += len(r) + 4
	}
	return newWireBody(appendResponse(make([]byte, 0, n), delta, ft.url, ft.version, s.nonce.Add(1), res, removed))
}

// changedNames returns the names of type t put or removed by the epochs
// after from up to to, sorted.
func changedNames(from, to *floorEpoch, t int) []string {
	if from.succ == to {
		return to.changed[t]
	}
	var out []string
	for e := from; e != to; {
		e = e.succ
		out = append(out, e.changed[t]...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

package main

import (
	"context"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/pilotfish-mesh/pilotfish/engine"
	"github.com/pilotfish-mesh/pilotfish/serve"
)

// backend adapts the engine to serve's Backend (serve may not be imported
// by engine, so the adapter lives where all wiring does).
type backend struct {
	e *engine.Engine
	// gate holds a stream that arrives before every config source has
	// synced until they have: config built from a half-read mesh would make
	// a restarted control plane withdraw clusters its proxies are using,
	// and refusing the stream instead (istiod's Unavailable) is final for
	// grpc-go's xDS client, which reports it as a resource error and fails
	// RPCs at once. Held, the proxy simply waits, as for a slow server.
	gate *syncGate
}

func (b backend) Connect(ctx context.Context, node *corev3.Node, peer string) (serve.Session, error) {
	if err := b.gate.wait(ctx); err != nil {
		return nil, err
	}
	c, err := b.e.Connect(ctx, node, peer)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// syncGate opens once the config sources report synced; streams wait on it.
// One goroutine polls the sources (they expose no notification), so a held
// stream costs a blocked goroutine and nothing else; the number of held
// streams is bounded by serve's per-client stream limit, like any other.
type syncGate struct {
	synced  func() bool
	open    chan struct{}
	waiting atomic.Int64
}

// syncPoll is how often the gate asks the sources whether they have synced.
const syncPoll = 20 * time.Millisecond

func newSyncGate(synced func() bool, reg prometheus.Registerer) *syncGate {
	g := &syncGate{synced: synced, open: make(chan struct{})}
	if reg != nil {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "pilotfish_xds_streams_waiting_for_sync",
			Help: "xDS streams held until every config source has synced (they get config as soon as it has)."},
			func() float64 { return float64(g.waiting.Load()) }))
	}
	return g
}

// run opens the gate once the sources have synced, or returns with ctx.
func (g *syncGate) run(ctx context.Context) {
	t := time.NewTicker(syncPoll)
	defer t.Stop()
	for !g.synced() {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
	close(g.open)
}

// wait returns nil once the gate is open, or an error when ctx ends first
// (the proxy went away, or the server is stopping).
func (g *syncGate) wait(ctx context.Context) error {
	select {
	case <-g.open:
		return nil
	default:
	}
	g.waiting.Add(1)
	defer g.waiting.Add(-1)
	select {
	case <-g.open:
		return nil
	case <-ctx.Done():
		return status.Error(codes.Unavailable, "server is not ready to serve discovery information: its config sources have not synced yet")
	}
}

package engine

import (
	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/index"
	"github.com/pilotfish-mesh/pilotfish/rules"
)

// sweepEvery: cache entries unused for this many push cycles are dropped.
const sweepEvery = 4

// push turns debounced changes into per-connection pushes.
func (e *Engine) push(p pendingChanges) {
	epoch := e.cache.NextEpoch()
	if epoch%sweepEvery == 0 {
		e.cache.Sweep(epoch - sweepEvery)
	}
	if p.instances {
		e.settleMoves(e.reclassify(), p.scoped)
	}
	e.mu.Lock()
	classes := make([]*class, 0, len(e.classes))
	for _, cl := range e.classes {
		classes = append(classes, cl)
	}
	e.mu.Unlock()

	if len(p.secrets) > 0 {
		// Before a full push too: a scoped one may leave the Secret's
		// readers out (a pending SDS push merges into the full one).
		snap := e.idx.Snapshot()
		e.pushSecrets(snap, p.secrets)
		e.pushPullSecrets(snap, p.secrets) // wasm_secret.go
	}
	if p.full {
		e.recordClusterFacts(e.idx.Snapshot())
		e.pushClasses(e.scopedTargets(classes, p.scoped), Push{Full: true, Reason: "config"}, nil)
		return
	}
	if len(p.endpoints) == 0 && len(p.secrets) > 0 {
		return // Secrets only
	}
	e.pushEndpoints(classes, p.endpoints)
}

// pushClasses enqueues push on every connection of classes. With watched
// set, gRPC connections get it only if they watch one of those services.
func (e *Engine) pushClasses(classes []*class, push Push, watched map[index.ServiceKey]struct{}) {
	var conns []*Conn
	e.mu.Lock()
	for _, cl := range classes {
		for c := range cl.conns {
			conns = append(conns, c)
		}
	}
	e.mu.Unlock()
	n := 0
	for _, c := range conns {
		if watched != nil && c.node.Type == encode.ProxyGRPC && !watchesAny(c, watched) {
			continue
		}
		n++
		if c.enqueue(push) {
			e.queue.add(c)
		}
	}
	e.metrics.PushQueued(push.Reason, n)
}

func watchesAny(c *Conn, set map[index.ServiceKey]struct{}) bool {
	for k := range set {
		if c.watchesService(k) {
			return true
		}
	}
	return false
}

// reclassify moves connections whose service instances changed to their
// new class, and returns the moves.
func (e *Engine) reclassify() []classMove {
	snap := e.idx.Snapshot()
	e.mu.Lock()
	defer e.mu.Unlock()
	var moves []classMove
	for c := range e.conns {
		key := classKey{class: e.classOf(snap, c.node), instances: rules.ClassInstancesKey(snap, c.node)}
		if key == c.class.key {
			continue
		}
		old := c.class
		delete(old.conns, c)
		if len(old.conns) == 0 {
			delete(e.classes, old.key)
		}
		_, exists := e.classes[key]
		c.class = e.classLocked(key, c.node)
		c.class.conns[c] = struct{}{}
		moves = append(moves, classMove{from: old, to: c.class, created: !exists})
	}
	return moves
}

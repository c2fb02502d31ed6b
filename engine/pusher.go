package engine

import (
	"strconv"
	"strings"

	networking "istio.io/api/networking/v1alpha3"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/index"
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
		e.pushSecrets(e.idx.Snapshot(), p.secrets)
	}
	if p.full {
		e.recordClusterFacts(e.idx.Snapshot())
		e.pushClasses(e.scopedTargets(classes, p.scoped), Push{Full: true, Reason: "config"}, nil)
		return
	}
	if len(p.endpoints) == 0 && len(p.secrets) > 0 {
		return // Secrets only
	}
	// The endpoint fast path: only EDS, only the changed services' clusters,
	// only to proxies that see them. Clusters depend on a few endpoint
	// facts (DNS endpoints inline, service accounts for SANs, inferred
	// mTLS); when those moved, CDS goes too.
	snap := e.idx.Snapshot()
	names := edsClusterNames(snap, e.views.of(snap).hasAutoPassthrough(snap), p.endpoints)
	push := Push{Types: []string{TypeEndpoint}, Endpoints: names, Reason: "endpoint"}
	if e.clusterFactsChanged(snap, p.endpoints) {
		push = Push{Types: []string{TypeCluster, TypeEndpoint}, Reason: "endpoint"}
	}
	if headlessChanged(snap, p.endpoints) {
		push.Types = append(push.Types, TypeNameTable) // names resolve to its endpoints
	}
	var targets []*class
	for _, cl := range classes {
		if cl.key.class.Type == encode.ProxyGRPC {
			targets = append(targets, cl) // filtered per connection below
			continue
		}
		sc := cl.scope(e)
		for k := range p.endpoints {
			if id, ok := sc.ByHost[k.Host]; ok && snap.ServiceByID(id).Key == k {
				targets = append(targets, cl)
				break
			}
		}
	}
	e.pushClasses(targets, push, p.endpoints)
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
		key := classKey{class: e.classOf(snap, c.node), instances: instancesKey(snap, computeInstances(snap, c.node))}
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

// edsClusterNames lists every EDS cluster name of the given services: each
// port, without subset and with each subset any DestinationRule for the host
// defines (a superset is harmless: serve intersects it with what each proxy
// subscribed to).
// With sni set (some Gateway has an AUTO_PASSTHROUGH server), the SNI-DNAT
// names too.
func edsClusterNames(snap *index.Snapshot, sni bool, services map[index.ServiceKey]struct{}) []string {
	var out []string
	for k := range services {
		svc, _, ok := snap.Service(k)
		if !ok {
			continue
		}
		host := snap.String(k.Host)
		var subsets []string
		snap.ConfigsByHost(index.ConfigDestinationRule, k.Host, func(c *index.Config) bool {
			if dr, ok := c.Spec.(*networking.DestinationRule); ok {
				for _, s := range dr.Subsets {
					subsets = append(subsets, s.Name)
				}
			}
			return true
		})
		for _, p := range svc.Ports {
			port := strconv.FormatUint(uint64(p.Number), 10)
			out = append(out, "outbound|"+port+"||"+host)
			for _, s := range subsets {
				out = append(out, "outbound|"+port+"|"+s+"|"+host)
			}
			if sni {
				out = appendSNIDNATNames(out, port, subsets, host)
			}
		}
	}
	return out
}

// serviceOfCluster maps an outbound cluster name to its service key, using
// the proxy-independent rule that a host's service is the one in the only
// namespace defining it (or any, when several do: the fast path then pushes
// to a superset).
func serviceOfCluster(snap *index.Snapshot, name string) (index.ServiceKey, bool) {
	var hostName string
	if rest, ok := strings.CutPrefix(name, "outbound|"); ok {
		i := strings.LastIndexByte(rest, '|')
		if i < 0 {
			return index.ServiceKey{}, false
		}
		hostName = rest[i+1:]
	} else if _, _, h, ok := encode.ParseSNIDNATName(name); ok {
		hostName = h // a router's SNI-DNAT cluster
	} else {
		return index.ServiceKey{}, false
	}
	host, ok := snap.Symbols.Lookup(hostName)
	if !ok {
		return index.ServiceKey{}, false
	}
	ids := snap.ServicesByHost(host)
	if len(ids) == 0 {
		return index.ServiceKey{}, false
	}
	return snap.ServiceByID(ids[0]).Key, true
}

// clusterFactsChanged reports whether any of the services' endpoints now
// differ in a way their clusters see (cdsEndpointDigest) from what the last
// CDS push carried, and records the new facts. The record is refreshed for
// every service at each full push (which sends CDS from a snapshot at least
// as new), so it always describes config a push has sent.
func (e *Engine) clusterFactsChanged(snap *index.Snapshot, services map[index.ServiceKey]struct{}) bool {
	changed := false
	for k := range services {
		svc, _, _ := snap.Service(k)
		d := cdsEndpointDigest(snap.Symbols, svc, snap.Endpoints(k))
		if old, ok := e.cdsDigests[k]; !ok || old != d {
			changed = true
			e.cdsDigests[k] = d
		}
	}
	return changed
}

// recordClusterFacts refreshes the cluster facts of every service.
func (e *Engine) recordClusterFacts(snap *index.Snapshot) {
	clear(e.cdsDigests)
	snap.Services(func(_ index.ServiceID, svc *index.Service) bool {
		e.cdsDigests[svc.Key] = cdsEndpointDigest(snap.Symbols, svc, snap.Endpoints(svc.Key))
		return true
	})
}

package engine

import "sync/atomic"

// ResponseStats counts, for one type, how the engine answered requests:
// from a class's memo (a copy of resource references another proxy of the
// class already had built) or by building (each resource then a bytes
// cache hit or a generation: Cache().Stats()). Together they say how much
// of the mesh's config is shared: with N proxies of one class, MemoHits
// grows with N and Builds with the classes.
type ResponseStats struct {
	Type string // type URL
	// MemoHits and MemoResources: responses, and the resources in them,
	// copied from a class's memo.
	MemoHits, MemoResources uint64
	// Builds and BuiltResources: responses built from keys.
	Builds, BuiltResources uint64
}

// servedTypes are the types ResponseStats reports, in a fixed order.
var servedTypes = [...]string{TypeCluster, TypeEndpoint, TypeListener, TypeRoute, TypeSecret, TypeNameTable}

// responseCounters are the engine's per-type counters (servedTypes order;
// other types are not counted).
type responseCounters [len(servedTypes)]struct {
	memoHits, memoResources, builds, builtResources atomic.Uint64
}

func (rc *responseCounters) note(typeURL string, memo bool, resources int) {
	for i, t := range servedTypes {
		if t != typeURL {
			continue
		}
		c := &rc[i]
		if memo {
			c.memoHits.Add(1)
			c.memoResources.Add(uint64(resources))
		} else {
			c.builds.Add(1)
			c.builtResources.Add(uint64(resources))
		}
		return
	}
}

// ResponseStats reports how the engine answered each type since it
// started (pilotfish_class_responses_total and
// pilotfish_class_response_resources_total).
func (e *Engine) ResponseStats() []ResponseStats {
	out := make([]ResponseStats, len(servedTypes))
	for i, t := range servedTypes {
		c := &e.responses[i]
		out[i] = ResponseStats{Type: t, MemoHits: c.memoHits.Load(), MemoResources: c.memoResources.Load(),
			Builds: c.builds.Load(), BuiltResources: c.builtResources.Load()}
	}
	return out
}

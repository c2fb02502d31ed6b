//go:build invariants

package index

import (
	"fmt"
	"sync"
)

// With -tags invariants the writer records a fingerprint of every snapshot it
// publishes and, before building the next one, checks that nothing mutated
// the last: a row, an endpoint group or an index list written through a
// pointer a reader got from the snapshot.
var seals sync.Map // *Snapshot → uint64

func sealPublished(s *Snapshot) { seals.Store(s, fingerprint(s)) }

func checkPublished(s *Snapshot) {
	want, ok := seals.Load(s)
	if !ok {
		return
	}
	if got := fingerprint(s); got != want.(uint64) {
		panic(fmt.Sprintf("index: published snapshot %d was mutated", s.Version))
	}
	seals.Delete(s)
}

func fingerprint(s *Snapshot) uint64 {
	var h uint64
	s.Services(func(id ServiceID, r *Service) bool {
		h = combineHash(h, combineHash(uint64(id), r.computeHash()))
		return true
	})
	s.Workloads(func(w *Workload) bool { h = combineHash(h, w.computeHash()); return true })
	s.Namespaces(func(n *Namespace) bool { h = combineHash(h, n.computeHash()); return true })
	s.endpoints.All(func(k ServiceKey, sh *EndpointShard) bool {
		var x uint64
		for i := range sh.Groups {
			x = combineHash(x, sh.Groups[i].computeHash())
		}
		h ^= mix64(uint64(k.Host)<<32|uint64(k.Namespace)) ^ x
		return true
	})
	for k := range s.configs {
		s.configs[k].all(func(_ uint32, c *Config) bool { h = combineHash(h, c.Hash); return true })
	}
	return h
}

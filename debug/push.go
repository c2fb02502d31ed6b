package debug

import (
	"maps"
	"sort"
	"sync"
	"time"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/engine"
	"github.com/pilotfish-mesh/pilotfish/index"
)

// /debug/push_status, /debug/endpointz and /debug/cachez: views of the
// engine's pushes, endpoint shards and bytes cache.

// PushStatus follows pushes through the metrics hooks, which call its
// methods: the engine reports each push once when it queues it
// (engine.Metrics.PushQueued: Queued), serve each response sent
// (serve.XDSMetrics.Pushed: Sent). Responses are counted against the last
// push queued; a response still going out for an earlier push when a new
// one starts is counted in the new one. Its memory is bounded:
// recentPushes pushes, a few counters each.
type PushStatus struct {
	snap func() *index.Snapshot

	mu       sync.Mutex
	recent   []*PushView   // guarded by mu; the last recentPushes, oldest first
	debounce time.Duration // guarded by mu; of the next push
	total    int           // guarded by mu
}

// recentPushes is how many pushes /debug/push_status keeps.
const recentPushes = 16

// PushStatusView is /debug/push_status.
type PushStatusView struct {
	// Pushes is the number of pushes since the start.
	Pushes int `json:"pushes"`
	// Last is the last push (null before the first); Recent the last few,
	// newest first, Last included.
	Last   *PushView  `json:"last"`
	Recent []PushView `json:"recent"`
}

// PushView is one push.
type PushView struct {
	// Seq numbers pushes from 1.
	Seq int `json:"seq"`
	// Time is when the push was queued.
	Time time.Time `json:"time"`
	// Trigger is why: "config" (any config change: every proxy, every
	// type) or "endpoint" (the endpoint fast path).
	Trigger string `json:"trigger"`
	// Proxies is how many streams the push was queued for.
	Proxies int `json:"proxies"`
	// Debounce is how long its changes were held before the push.
	Debounce string `json:"debounce,omitempty"`
	// IndexVersion and ConfigVersion identify the snapshot pushed.
	IndexVersion  uint64 `json:"indexVersion"`
	ConfigVersion uint64 `json:"configVersion"`
	// Responses counts the responses sent since, by type (cds, eds, lds,
	// rds, ...): a stream whose content did not change gets none.
	Responses map[string]int `json:"responses"`
	// Bytes sums their sizes by type.
	Bytes map[string]int `json:"bytes"`
	// LastSent is when the last of those responses was sent (absent
	// before the first): with Time, how long the push took to reach its
	// last proxy.
	LastSent time.Time `json:"lastSent,omitzero"`
}

// NewPushStatus returns an empty PushStatus; snap, if set, gives the
// snapshot each push is recorded with (its versions).
func NewPushStatus(snap func() *index.Snapshot) *PushStatus {
	return &PushStatus{snap: snap}
}

// Debounced records how long the next push's changes were held.
func (p *PushStatus) Debounced(d time.Duration) {
	p.mu.Lock()
	p.debounce = d
	p.mu.Unlock()
}

// Queued records a push queued for proxies streams, for reason (config,
// endpoint or secret).
func (p *PushStatus) Queued(reason string, proxies int) {
	v := &PushView{Time: time.Now(), Trigger: reason, Proxies: proxies, Responses: map[string]int{}, Bytes: map[string]int{}}
	if p.snap != nil {
		s := p.snap()
		v.IndexVersion, v.ConfigVersion = s.Version, s.ConfigVersion
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.total++
	v.Seq = p.total
	if p.debounce > 0 {
		v.Debounce = p.debounce.String()
		p.debounce = 0
	}
	if len(p.recent) == recentPushes {
		p.recent = append(p.recent[:0], p.recent[1:]...)
	}
	p.recent = append(p.recent, v)
}

// Sent records a response of typ (cds, eds, ...: istiod's short type
// label) of bytes bytes.
func (p *PushStatus) Sent(typ string, bytes int) {
	p.mu.Lock()
	if n := len(p.recent); n > 0 {
		last := p.recent[n-1]
		last.Responses[typ]++
		last.Bytes[typ] += bytes
		last.LastSent = time.Now()
	}
	p.mu.Unlock()
}

// view returns a copy of the recent pushes; nil has none.
func (p *PushStatus) view() PushStatusView {
	if p == nil {
		return PushStatusView{Recent: []PushView{}}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	out := PushStatusView{Pushes: p.total, Recent: []PushView{}}
	for i := len(p.recent) - 1; i >= 0; i-- {
		v := *p.recent[i]
		v.Responses, v.Bytes = maps.Clone(v.Responses), maps.Clone(v.Bytes)
		out.Recent = append(out.Recent, v)
	}
	if len(out.Recent) > 0 {
		last := out.Recent[0]
		out.Last = &last
	}
	return out
}

// EndpointShards is one service's endpoints in /debug/endpointz, in
// istiod's shape (hostname → namespace → shards by source).
type EndpointShards struct {
	Shards          map[string][]engine.EndpointView `json:"Shards"`
	ServiceAccounts []string                         `json:"ServiceAccounts"`
}

func endpointz(snap *index.Snapshot) map[string]map[string]EndpointShards {
	out := map[string]map[string]EndpointShards{}
	for _, s := range engine.Registry(snap) {
		if len(s.Endpoints) == 0 {
			continue
		}
		sh := EndpointShards{Shards: map[string][]engine.EndpointView{}, ServiceAccounts: []string{}}
		sas := map[string]bool{}
		for _, e := range s.Endpoints {
			sh.Shards[e.Source] = append(sh.Shards[e.Source], e)
			if e.ServiceAccount != "" && !sas[e.ServiceAccount] {
				sas[e.ServiceAccount] = true
				sh.ServiceAccounts = append(sh.ServiceAccounts, e.ServiceAccount)
			}
		}
		sort.Strings(sh.ServiceAccounts)
		if out[s.Hostname] == nil {
			out[s.Hostname] = map[string]EndpointShards{}
		}
		out[s.Hostname][s.Namespace] = sh
	}
	return out
}

// CacheView is /debug/cachez: the bytes cache by kind and in total.
type CacheView struct {
	Kinds []CacheKindView `json:"kinds"`
	Total CacheKindView   `json:"total"`
}

// CacheKindView is one kind of cached resource or part.
type CacheKindView struct {
	Kind    string  `json:"kind"`
	Entries int     `json:"entries"`
	Bytes   int     `json:"bytes"`
	Hits    uint64  `json:"hits"`
	Misses  uint64  `json:"misses"`
	HitRate float64 `json:"hitRate"`
}

func cachez(c *encode.Cache) CacheView {
	v := CacheView{Kinds: []CacheKindView{}, Total: CacheKindView{Kind: "total"}}
	for _, s := range c.Stats() {
		k := CacheKindView{Kind: s.Kind, Entries: s.Entries, Bytes: s.Bytes, Hits: s.Hits, Misses: s.Misses, HitRate: hitRate(s.Hits, s.Misses)}
		v.Kinds = append(v.Kinds, k)
		v.Total.Entries += k.Entries
		v.Total.Bytes += k.Bytes
		v.Total.Hits += k.Hits
		v.Total.Misses += k.Misses
	}
	v.Total.HitRate = hitRate(v.Total.Hits, v.Total.Misses)
	return v
}

func hitRate(hits, misses uint64) float64 {
	if hits+misses == 0 {
		return 0
	}
	return float64(hits) / float64(hits+misses)
}

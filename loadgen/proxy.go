package loadgen

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// proxy is one simulated proxy: the subscription state machine of an Envoy
// (or a proxyless gRPC client) over one ADS stream. Everything but bumps is
// owned by the proxy's goroutine; the runner reads the rest only after that
// goroutine has ended.
//
// Its memory is what it subscribes to and holds, as interned IDs: about
// 8 bytes per held resource plus 4 per subscribed name; no response bytes
// are retained.
type proxy struct {
	run   *runner
	idx   int
	start time.Time // when the proxy was launched; time to full config counts from here
	rng   rand.PCG
	st    [numTypes]typeState

	sendMu sync.Mutex
	// stream is the current session, nil between sessions. Written by the
	// proxy's goroutine under sendMu, so that goroutine reads it without.
	stream   stream
	closed   bool       // closeSend was called on stream; guarded by sendMu
	nodeSent bool       // the Node went out on this stream's first request
	req      rawRequest // the request being sent, reused (see send)

	connectedOnce bool
	full          bool // every subscription satisfied, right now
	everFull      bool // time to full config recorded
	doneChange    int  // the last change recorded as converged on this proxy
	// nackedChange is the last change a NACKed response delivered (see
	// nack.go): it counts as converged like one ACKed.
	nackedChange int
	nackedTypes  uint8 // bit t: the last response of type t was NACKed

	// bumps counts ACKed responses that changed a version (SotW) or any
	// ACKed response (Delta): the signal of convergence without an
	// ExpectResource. Read by the runner when a change starts.
	bumps atomic.Uint32
}

// typeState is a proxy's state for one resource type.
type typeState struct {
	wildcard   bool     // subscribed to everything of the type (CDS, LDS of Envoy)
	subscribed bool     // a subscription request went out on this stream
	names      []uint32 // the subscription, sorted (non-wildcard)
	have       []ref    // resources held (ACKed), sorted; only names subscribed
	// rejected are subscribed names that came only in NACKed responses
	// (sorted): answered, so they count for full config (nack.go).
	rejected   []uint32
	version    string // last ACKed version (SotW)
	nonce      []byte // last response's nonce
	acked      bool   // at least one response ACKed on this stream
	answered   bool   // at least one response ACKed or NACKed on this stream
	nackedLast bool   // the last response was NACKed: ACK the next
	// allHeld caches that have and rejected hold every name of names:
	// false when not known. Set by complete; cleared when names change or
	// have loses a name, so that the full-config check of each response
	// costs O(1), not a walk of a thousand names.
	allHeld bool
	encoded []byte // names as resource_names (SotW), shared; nil: not yet
	reqAt   time.Time
}

// resetSession forgets the previous stream's state and subscribes afresh on
// the new stream, as an Envoy does after losing its control plane
// connection.
func (p *proxy) resetSession() error {
	p.nodeSent, p.full = false, false
	p.clearNacked()
	for t := range p.st {
		p.st[t] = typeState{}
	}
	if p.run.cfg.Type == GRPC {
		return p.subscribe(typeLDS, p.run.targets)
	}
	p.st[typeCDS].wildcard = true
	p.st[typeLDS].wildcard = true
	return p.subscribe(typeCDS, nil)
}

// subscribe sets t's subscription to names (ignored for a wildcard type) and
// sends the request: in SotW the whole set with the type's last version and
// nonce, in Delta the names added and removed.
func (p *proxy) subscribe(t xtype, names []uint32) error {
	st := &p.st[t]
	added, removed := diffIDs(st.names, names)
	first := !st.subscribed
	st.names, st.subscribed = names, true
	st.allHeld, st.encoded = false, nil
	if !st.wildcard {
		st.have = keepSubscribed(st.have, names)
		st.rejected = keepIDs(st.rejected, names)
	}
	if first || len(added) > 0 {
		st.reqAt = time.Now()
	}
	return p.str().subscribe(p, t, added, removed)
}

// handle processes one response: NACK it (NackRate), or apply, ACK, follow
// the names it references and check full config and convergence.
func (p *proxy) handle(r *response) error {
	// Counted in flight before the stopping check, so that the run, once
	// it has set stopping, can wait for the handles that passed it: the
	// report then counts each response with its ACK or NACK.
	p.run.handling.Add(1)
	defer p.run.handling.Add(-1)
	if p.run.stopping.Load() {
		// The run has ended: not part of the measurement.
		return errStopping
	}
	c := &p.run.types[r.t]
	c.responses.Add(1)
	c.bytes.Add(int64(r.size))
	c.resources.Add(int64(r.resources))
	if r.invalid > 0 {
		c.invalid.Add(int64(r.invalid))
		p.run.noteError(&p.run.lastInvalid, r.whyBad)
	}
	if r.t == typeOther {
		if err := p.str().reply(p, r, false); err != nil {
			return err
		}
		c.acks.Add(1)
		return nil
	}
	st := &p.st[r.t]
	if !st.reqAt.IsZero() {
		c.latency.record(time.Since(st.reqAt))
		st.reqAt = time.Time{}
	}
	st.nonce = append(st.nonce[:0], r.nonce...)
	if p.run.roleOf(p.idx) == nacking {
		p.run.nackingReceived.Add(1)
		if err := p.str().reply(p, r, true); err != nil {
			return err
		}
		c.nacks.Add(1)
		p.run.faultNACKs.Add(1)
		p.setNacked(r.t, true)
		return nil
	}
	if rate := p.run.cfg.NackRate; rate > 0 && !st.nackedLast && (rate >= 1 || p.float() < rate) {
		st.nackedLast = true
		if err := p.str().reply(p, r, true); err != nil {
			return err
		}
		c.nacks.Add(1)
		return p.rejected(st, r)
	}
	st.nackedLast = false
	p.setNacked(r.t, false)
	heldChanged := p.apply(st, r)
	newVersion := string(r.version) != st.version
	if p.run.cfg.Mode == Delta || newVersion || !st.acked {
		p.bumps.Add(1)
	}
	if newVersion {
		st.version = p.run.versionString(r.t, r.version)
	}
	st.acked, st.answered = true, true
	if err := p.str().reply(p, r, false); err != nil {
		return err
	}
	c.acks.Add(1)
	if err := p.follow(r.t, heldChanged); err != nil {
		return err
	}
	p.check()
	return nil
}

// versionString returns version v of type t as a string. Every proxy gets
// the same versions, so the last one of each type is shared: a SotW push
// to 10,000 proxies allocates its version once, not per proxy.
func (r *runner) versionString(t xtype, v []byte) string {
	if last := r.versions[t].Load(); last != nil && *last == string(v) {
		return *last
	}
	s := string(v)
	r.versions[t].Store(&s)
	return s
}

// str returns the current stream. Only the proxy's goroutine may call it
// (it is the only writer of p.stream).
func (p *proxy) str() stream { return p.stream }

func (p *proxy) float() float64 {
	return float64(p.rng.Uint64()>>11) / (1 << 53)
}

// apply updates st's held resources from ACKed response r. SotW CDS and LDS
// responses carry the whole state; SotW EDS and RDS responses and all Delta
// responses carry changes (and Delta removals). Resources of a named type
// that were not asked for are ignored. It reports whether the resources
// held (and what they reference) may have changed: false only when a SotW
// response repeated exactly what was held, as a config push does for most
// types.
//
// have holds only subscribed names, so filtering the response's entries
// keeps it so: a walk of the few names an update carries, not of every
// name held.
func (p *proxy) apply(st *typeState, r *response) (changed bool) {
	entries := r.entries
	slices.SortFunc(entries, cmpRef)
	entries = slices.Compact(entries)
	if !st.wildcard {
		entries = keepSubscribed(entries, st.names)
	}
	if p.run.cfg.Mode == SotW && (r.t == typeCDS || r.t == typeLDS) {
		if slices.Equal(st.have, entries) {
			return false
		}
		st.have = replaceRefs(st.have, entries)
		st.allHeld = false
		return true
	}
	slices.Sort(r.removed)
	st.have = mergeRefs(st.have, entries, r.removed)
	if len(r.removed) > 0 {
		st.allHeld = false // merging entries only adds or replaces names
		st.rejected = dropIDs(st.rejected, r.removed)
	}
	return true
}

// follow updates the subscriptions that depend on type t, which just changed.
// Envoy: CDS names EDS services; once clusters are warm (EDS complete) it
// starts LDS; listeners name route configurations. gRPC: listeners name
// route configurations (and inline routes clusters), routes name clusters,
// clusters name EDS services.
//
// Unless changed (type t's held resources may have changed), the
// subscriptions that depend on t are what they were: the walk of every
// held ref is skipped.
func (p *proxy) follow(t xtype, changed bool) error {
	if p.run.cfg.Type != GRPC {
		switch {
		case !changed:
		case t == typeCDS:
			if err := p.resubscribe(typeEDS, refIDs(p.st[typeCDS].have, 0)); err != nil {
				return err
			}
		case t == typeLDS:
			if err := p.resubscribe(typeRDS, refIDs(p.st[typeLDS].have, 0)); err != nil {
				return err
			}
		}
		if !p.st[typeLDS].subscribed && p.st[typeCDS].answered && p.complete(typeEDS) {
			return p.subscribe(typeLDS, nil)
		}
		return nil
	}
	if !changed {
		return nil
	}
	switch t {
	case typeLDS:
		if err := p.resubscribe(typeRDS, refIDs(p.st[typeLDS].have, 0)); err != nil {
			return err
		}
		fallthrough
	case typeRDS:
		clusters := refIDs(p.st[typeLDS].have, refCluster)
		clusters = unionIDs(clusters, refIDs(p.st[typeRDS].have, refCluster))
		for i := range clusters {
			clusters[i] &^= refCluster
		}
		slices.Sort(clusters)
		return p.resubscribe(typeCDS, clusters)
	case typeCDS:
		return p.resubscribe(typeEDS, refIDs(p.st[typeCDS].have, 0))
	}
	return nil
}

// resubscribe subscribes t to names if they differ from its subscription. A
// type never subscribed is not subscribed to nothing.
func (p *proxy) resubscribe(t xtype, names []uint32) error {
	st := &p.st[t]
	if slices.Equal(st.names, names) && (st.subscribed || len(names) == 0) {
		return nil
	}
	return p.subscribe(t, names)
}

// complete reports whether t's subscription is satisfied: a wildcard type
// has been answered (a response ACKed or NACKed); a named type holds, or
// has NACKed, every name it asked for.
func (p *proxy) complete(t xtype) bool {
	st := &p.st[t]
	if st.wildcard {
		return st.answered
	}
	if !st.allHeld {
		st.allHeld = answeredAll(st.have, st.rejected, st.names)
	}
	return st.allHeld
}

// check records time to full config and convergence of the current change,
// at the current time (read only when there is something to record).
func (p *proxy) check() {
	p.full = true
	for t := range numTypes {
		if !p.complete(t) {
			p.full = false
			break
		}
	}
	if !p.full {
		return
	}
	var now time.Time
	if !p.everFull {
		p.everFull = true
		now = time.Now()
		p.run.recordFull(p, now)
	}
	ch := p.run.change.Load()
	if ch == nil || p.doneChange >= ch.index || p.run.roleOf(p.idx) != healthy {
		return
	}
	if ch.expect != nil {
		if p.nackedChange != ch.index && holds(p.st[ch.expect.t].have, ch.expectID) == ch.expect.negate {
			return
		}
	} else if p.bumps.Load() <= ch.base[p.idx] {
		return
	}
	p.doneChange = ch.index
	if now.IsZero() {
		now = time.Now()
	}
	ch.record(p.idx, now)
}

// held returns how many distinct resources of type t the proxy holds.
func (p *proxy) held(t xtype) int {
	n := 0
	have := p.st[t].have
	for i := range have {
		if i == 0 || have[i].name != have[i-1].name {
			n++
		}
	}
	return n
}

// cmpRef orders refs by (name, ref), as one integer comparison.
func cmpRef(a, b ref) int {
	return cmp.Compare(uint64(a.name)<<32|uint64(a.ref), uint64(b.name)<<32|uint64(b.ref))
}

// replaceRefs returns entries copied into have's storage (reallocated when it
// is too small or wastes more than half).
func replaceRefs(have, entries []ref) []ref {
	if cap(have) < len(entries) || cap(have) > 2*len(entries)+16 {
		have = make([]ref, 0, len(entries))
	}
	return append(have[:0], entries...)
}

// mergeRefs returns have without the names in entries or removed (both
// sorted), plus entries.
func mergeRefs(have, entries []ref, removed []uint32) []ref {
	if len(entries)+len(removed) <= smallMerge && len(have) > 4*smallMerge {
		return mergeSmall(have, entries, removed)
	}
	out := make([]ref, 0, len(have)+len(entries))
	i, j, k := 0, 0, 0
	for i < len(have) || j < len(entries) {
		if j < len(entries) && (i == len(have) || entries[j].name <= have[i].name) {
			name := entries[j].name
			for ; j < len(entries) && entries[j].name == name; j++ {
				out = append(out, entries[j])
			}
			for ; i < len(have) && have[i].name == name; i++ {
			}
			continue
		}
		name := have[i].name
		for k < len(removed) && removed[k] < name {
			k++
		}
		drop := k < len(removed) && removed[k] == name
		for ; i < len(have) && have[i].name == name; i++ {
			if !drop {
				out = append(out, have[i])
			}
		}
	}
	if cap(out) > 2*len(out)+16 {
		out = slices.Clip(out)
		out = append(make([]ref, 0, len(out)), out...)
	}
	return out
}

// smallMerge: updates of at most this many names (an endpoint change, a
// new cluster) are merged in place. A copy of every held ref per response
// made merging the loadgen's largest cost per EDS update at 10,000 proxies.
const smallMerge = 4

// mergeSmall is mergeRefs in place, for a few entries and removals.
func mergeSmall(have, entries []ref, removed []uint32) []ref {
	for i := 0; i < len(entries); {
		j := i + 1
		for j < len(entries) && entries[j].name == entries[i].name {
			j++
		}
		lo, hi := nameRange(have, entries[i].name)
		have = slices.Replace(have, lo, hi, entries[i:j]...)
		i = j
	}
	for _, n := range removed {
		if lo, hi := nameRange(entries, n); lo < hi {
			continue // sent again in the same response: it stays
		}
		lo, hi := nameRange(have, n)
		have = slices.Delete(have, lo, hi)
	}
	return have
}

// nameRange returns the bounds of name's refs in the sorted refs.
func nameRange(refs []ref, name uint32) (lo, hi int) {
	lo, _ = slices.BinarySearchFunc(refs, name, func(r ref, n uint32) int { return cmp.Compare(r.name, n) })
	hi = lo
	for hi < len(refs) && refs[hi].name == name {
		hi++
	}
	return lo, hi
}

// keepSubscribed drops from have (in place) the names not in names (both
// sorted).
func keepSubscribed(have []ref, names []uint32) []ref {
	if len(have)*16 < len(names) {
		// A few refs (an update) against a large subscription.
		out := have[:0]
		for _, r := range have {
			if _, ok := slices.BinarySearch(names, r.name); ok {
				out = append(out, r)
			}
		}
		return out
	}
	out := have[:0]
	j := 0
	for _, r := range have {
		for j < len(names) && names[j] < r.name {
			j++
		}
		if j < len(names) && names[j] == r.name {
			out = append(out, r)
		}
	}
	return out
}

// refIDs returns the sorted distinct refs of have of the given kind (0 or
// refCluster), with the kind bit kept.
func refIDs(have []ref, kind uint32) []uint32 {
	var out []uint32
	for _, r := range have {
		if r.ref != 0 && r.ref&refCluster == kind {
			out = append(out, r.ref)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// holdsAll reports whether have holds every name of names (both sorted).
func holdsAll(have []ref, names []uint32) bool {
	i := 0
	for _, n := range names {
		for i < len(have) && have[i].name < n {
			i++
		}
		if i == len(have) || have[i].name != n {
			return false
		}
	}
	return true
}

// holds reports whether have holds name.
func holds(have []ref, name uint32) bool {
	_, ok := slices.BinarySearchFunc(have, name, func(r ref, n uint32) int { return cmp.Compare(r.name, n) })
	return ok
}

// diffIDs returns the names of b not in a and of a not in b (both sorted).
func diffIDs(a, b []uint32) (added, removed []uint32) {
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || i < len(a) && a[i] < b[j]:
			removed = append(removed, a[i])
			i++
		case i == len(a) || b[j] < a[i]:
			added = append(added, b[j])
			j++
		default:
			i++
			j++
		}
	}
	return added, removed
}

// unionIDs returns the sorted union of sorted a and b.
func unionIDs(a, b []uint32) []uint32 {
	out := make([]uint32, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || i < len(a) && a[i] < b[j]:
			out = append(out, a[i])
			i++
		case i == len(a) || b[j] < a[i]:
			out = append(out, b[j])
			j++
		default:
			out = append(out, a[i])
			i++
			j++
		}
	}
	return out
}

package engine

import (
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/index"
)

// Conn is one connected proxy stream. It implements serve's Session: serve
// calls its methods under the stream's mutex (PushDone and Close also from
// other goroutines, which its own lock covers); the engine enqueues pushes
// from its own goroutine.
type Conn struct {
	e     *Engine
	id    string // "POD.NAMESPACE-N": unique per stream
	node  *Node
	class *class
	// verified: the stream's caller was authenticated (wasm_secret.go).
	verified bool
	// pending is signalled (without blocking) when push becomes non-empty.
	pending chan struct{}

	mu        sync.Mutex // guards the fields below
	push      Push       // merged pending push
	hasPush   bool
	queuedAt  time.Time // when the pending push was first queued
	inFlight  bool      // holds a throttle slot
	closed    bool
	edsNames  map[index.ServiceKey]struct{} // gRPC: services of named EDS subscriptions
	sdsRefs   map[secretRef]struct{}        // Secrets its SDS requests read (build_sds_push.go)
	sdsAll    bool                          // read too many to track: every Secret counts
	sync      map[string]*typeSync          // type URL → last sent and acked versions
	connected time.Time
}

// typeSync is the per-type sync status shown by /debug/syncz.
type typeSync struct {
	Sent, Acked, Nacked string
	NackMessage         string
	SentAt, AckedAt     time.Time
}

// ID names the proxy in logs and metrics.
func (c *Conn) ID() string { return c.id }

// Node returns what the proxy said about itself.
func (c *Conn) Node() *Node { return c.node }

// Pending is signalled when a push is queued for this proxy.
func (c *Conn) Pending() <-chan struct{} { return c.pending }

// TakePush returns and clears the merged pending push.
func (c *Conn) TakePush() (Push, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.hasPush {
		return Push{}, false
	}
	p := c.push
	c.push, c.hasPush = Push{}, false
	if !c.queuedAt.IsZero() {
		c.e.metrics.QueueTime(time.Since(c.queuedAt))
	}
	return p, true
}

// PushDone tells the engine serve has sent everything for the last push; it
// frees the connection's throttle slot.
func (c *Conn) PushDone() {
	c.mu.Lock()
	held := c.inFlight
	c.inFlight = false
	c.mu.Unlock()
	if held {
		c.e.queue.release()
	}
}

// enqueue merges p into the pending push and signals the stream. It reports
// whether the connection was idle (not already waiting), so the caller can
// hand it to the throttled queue once.
func (c *Conn) enqueue(p Push) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	if c.hasPush {
		c.push = c.push.Merge(p)
		return false
	}
	c.push, c.hasPush = p, true
	c.queuedAt = time.Now()
	return true
}

// signal wakes the stream; the queue calls it when the connection's turn
// comes, with a throttle slot held.
func (c *Conn) signal() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		c.e.queue.release()
		return
	}
	if c.inFlight {
		// Still holding a slot from an earlier push: give this one back.
		c.mu.Unlock()
		c.e.queue.release()
	} else {
		c.inFlight = true
		c.mu.Unlock()
	}
	select {
	case c.pending <- struct{}{}:
	default:
	}
}

// Generate appends the resources of typeURL for this proxy to dst.
func (c *Conn) Generate(typeURL string, names []string, wildcard bool, dst []Resource) ([]Resource, error) {
	if typeURL == TypeSecret {
		// Noted before the snapshot is read: a Secret change either finds
		// the note and pushes, or was published before this read.
		c.noteSDSNames(names)
	}
	sc := c.class.scope(c.e)
	if typeURL == TypeEndpoint && !wildcard && c.node.Type == encode.ProxyGRPC {
		c.noteEDSNames(sc.Snapshot, names)
	}
	mv := memoVersion{snap: sc.Snapshot.Version, mesh: c.e.meshNow().gen}
	start := len(dst)
	if res, ok := c.class.memoGet(mv, typeURL, names, wildcard); ok {
		c.e.responses.note(typeURL, true, len(res))
		dst = append(dst, res...)
		if typeURL == TypeExtensionConfig {
			return dst, c.withPullSecrets(sc, dst[start:])
		}
		return dst, nil
	}
	cache := c.e.cache
	if typeURL == TypeListener && c.node.Type == encode.ProxyGRPC && c.foreignServerListener(names) {
		cache = cache.Transient()
	}
	dst, err := c.e.generate(sc, cache, typeURL, names, wildcard, dst)
	if err == nil {
		c.e.responses.note(typeURL, false, len(dst)-start)
		if memoizable(names, wildcard, dst[start:]) {
			c.class.memoPut(mv, typeURL, names, wildcard, dst[start:])
		}
		if typeURL == TypeExtensionConfig {
			err = c.withPullSecrets(sc, dst[start:])
		}
	}
	return dst, err
}

// memoizable reports whether the class's memo may keep a response: only
// when it holds no transient resource (an answer to a name no
// configuration defines, Digest 0) and the request named no more names
// than it answered, so that the names a memo keeps are bounded by the
// configuration, never by what a client invents.
func memoizable(names []string, wildcard bool, res []Resource) bool {
	if !wildcard && len(names) > len(res) {
		return false
	}
	for i := range res {
		if res[i].Digest == 0 {
			return false
		}
	}
	return true
}

// foreignServerListener reports whether a gRPC server asks for an inbound
// listener on an address that is not its own: the listener's name carries
// the address, so such names are unbounded and are answered uncached.
func (c *Conn) foreignServerListener(names []string) bool {
	for _, n := range names {
		addr, ok := strings.CutPrefix(n, encode.GRPCServerListenerPrefix)
		if !ok {
			continue
		}
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			continue // answered with nothing
		}
		ip, err := netip.ParseAddr(host)
		if err != nil || !slices.Contains(c.node.IPs, ip) || ip.String() != host {
			return true
		}
	}
	return false
}

// noteEDSNames records which services a named-subscription client (gRPC)
// watches, so the endpoint fast path can find it.
func (c *Conn) noteEDSNames(snap *index.Snapshot, names []string) {
	set := make(map[index.ServiceKey]struct{}, len(names))
	for _, n := range names {
		if k, ok := serviceOfCluster(snap, n); ok {
			set[k] = struct{}{}
		}
	}
	c.mu.Lock()
	c.edsNames = set
	c.mu.Unlock()
}

// watchesService reports whether a named-subscription client watches svc.
func (c *Conn) watchesService(svc index.ServiceKey) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.edsNames[svc]
	return ok
}

// Acked records that the proxy accepted version of typeURL.
func (c *Conn) Acked(typeURL, version string) {
	now := time.Now()
	c.mu.Lock()
	s := c.syncFor(typeURL)
	s.Acked, s.AckedAt = version, now
	sentAt := s.SentAt
	c.mu.Unlock()
	if !sentAt.IsZero() {
		c.e.metrics.Converged(typeURL, now.Sub(sentAt))
	}
}

// Nacked records that the proxy rejected version of typeURL. serve calls
// it once per rejected response and logs the rejection itself, with the
// client's message clipped, so it is not logged here again.
func (c *Conn) Nacked(typeURL, version, message string) {
	c.mu.Lock()
	s := c.syncFor(typeURL)
	s.Nacked, s.NackMessage = version, message
	c.mu.Unlock()
	c.e.metrics.Rejected(typeURL)
}

// Sent records what serve sent; serve calls it after each response.
func (c *Conn) Sent(typeURL, version string) {
	c.mu.Lock()
	s := c.syncFor(typeURL)
	s.Sent, s.SentAt = version, time.Now()
	c.mu.Unlock()
}

func (c *Conn) syncFor(typeURL string) *typeSync {
	if c.sync == nil {
		c.sync = map[string]*typeSync{}
	}
	s := c.sync[typeURL]
	if s == nil {
		s = &typeSync{}
		c.sync[typeURL] = s
	}
	return s
}

// Close unregisters the connection.
func (c *Conn) Close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	held := c.inFlight
	c.inFlight = false
	c.mu.Unlock()
	if held {
		c.e.queue.release()
	}
	c.e.disconnect(c)
}

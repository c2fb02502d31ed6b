package serve

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/pilotfish-mesh/pilotfish/engine"
)

// Resilience: what keeps one proxy, or all of them at once, from hurting the
// others.
//
//   - A stream holds at most one work slot while it generates and writes: the
//     engine's push-throttle slot for a push, or an admission slot of the
//     server (a semaphore of RequestConcurrency, oldest stream first) for a
//     response to a request. A reconnect storm is therefore answered at a
//     bounded concurrency, so memory for responses in flight is bounded,
//     and in connect order, so early proxies are not held back by late ones.
//   - A write that has not completed after stalledSendAfter (the proxy stopped
//     reading and HTTP/2 flow control blocks the send) gives its slot back:
//     a stalled proxy never delays pushes to others. It keeps its one
//     response in flight and nothing more (the stream's writer is blocked,
//     and the engine merges further pushes into one pending push). One
//     reusable timer per stream watches every write (send_watch.go).
//   - A push signalled while the stream's receiver is answering a request
//     (perhaps waiting for an admission slot in a reconnect storm) gives the
//     engine's slot back at once and follows the request, so pushes to
//     other streams never queue behind requests.
//   - SendTimeout (PILOT_XDS_SEND_TIMEOUT) ends a stream whose write stays
//     blocked that long, with DeadlineExceeded; the proxy reconnects and gets
//     its full config afresh.
//   - A panic while generating one proxy's config ends that stream with
//     Internal, is logged with the proxy id and stack and counted
//     (pilot_xds_push_errors, reason "panic"); the server and every other
//     stream go on.
//   - Limits with clear errors: subscribed names per type on a stream and
//     streams per client IP (ResourceExhausted); the size of a node's id
//     and metadata, and of type URLs (InvalidArgument, input_limits.go).

// stalledSendAfter is how long a write may block before its stream gives its
// work slot back. Writes to a reading proxy return at once (gRPC queues the
// bytes); only flow control makes them wait this long.
const stalledSendAfter = time.Second

// defaultRequestConcurrency is RequestConcurrency's default: generation is
// CPU-bound, so more than a few streams per core only adds memory.
func defaultRequestConcurrency() int {
	return max(8, 4*runtime.GOMAXPROCS(0))
}

// Limits are the resilience settings of an XDSServer. The zero value has no
// send timeout, no name or per-client limit, and the default admission
// concurrency.
type Limits struct {
	// SendTimeout ends a stream whose response write stays blocked this long
	// (PILOT_XDS_SEND_TIMEOUT): the proxy stopped reading. 0: no limit (a
	// stalled stream still gives its work slot back, see stalledSendAfter).
	SendTimeout time.Duration
	// RequestConcurrency is how many streams may generate and write a
	// response to a request at once; the rest wait, the earliest connected
	// stream first. 0: four per core, at least 8. Negative: no limit.
	RequestConcurrency int
	// MaxSubscribedNames limits the resource names one stream may subscribe
	// to per type. 0: no limit.
	MaxSubscribedNames int
	// MaxStreamsPerClient limits the streams open at once from one client IP.
	// 0: no limit.
	MaxStreamsPerClient int
	// MaxNodeIDBytes limits the node id of a stream's first request; a
	// longer one ends the stream with InvalidArgument. 0:
	// DefaultMaxNodeIDBytes. Negative: no limit.
	MaxNodeIDBytes int
	// MaxNodeMetadataBytes limits the encoded size of the rest of that node
	// (its metadata, where istio-agent puts the pod's labels and
	// annotations, and locality, extensions, ...); a larger one ends the
	// stream with InvalidArgument. 0: DefaultMaxNodeMetadataBytes.
	// Negative: no limit.
	MaxNodeMetadataBytes int
}

// limitState is the XDSServer's part for Limits.
type limitState struct {
	sendTimeout time.Duration
	maxNames    int
	maxNodeID   int            // 0: no limit
	maxNodeMeta int            // 0: no limit
	admit       *admission     // nil: no admission limit
	streams     *atomic.Uint64 // connect sequence numbers (conn.seq)
	clients     *clientCounter // nil: no per-client limit
}

func newLimitState(l Limits) limitState {
	st := limitState{sendTimeout: l.SendTimeout, maxNames: l.MaxSubscribedNames, streams: new(atomic.Uint64),
		maxNodeID: orDefault(l.MaxNodeIDBytes, DefaultMaxNodeIDBytes), maxNodeMeta: orDefault(l.MaxNodeMetadataBytes, DefaultMaxNodeMetadataBytes)}
	n := l.RequestConcurrency
	if n == 0 {
		n = defaultRequestConcurrency()
	}
	if n > 0 {
		st.admit = newAdmission(n)
	}
	if l.MaxStreamsPerClient > 0 {
		st.clients = &clientCounter{limit: l.MaxStreamsPerClient, n: map[string]int{}}
	}
	return st
}

// orDefault maps a limit's setting to its value: 0 is def, negative is no
// limit (0).
func orDefault(v, def int) int {
	switch {
	case v == 0:
		return def
	case v < 0:
		return 0
	}
	return v
}

// holdPush records that the pusher received a push signal, which holds
// the engine's push-throttle slot until PushDone. A stalled write (see
// send_watch.go) may be holding the stream: then the slot goes back at
// once and the push runs after the write.
func (c *conn) holdPush() {
	c.pushHeld.Store(true)
	if c.watch.stalled.Load() {
		c.releasePush()
	}
}

// releasePush answers the push signal last received with PushDone, exactly
// once, whichever goroutine gets there first: the pusher once the push is
// sent, the pusher or the receiver when the push must wait behind a request
// that waits for admission, the watchdog of a stalled write, or the
// stream's end. Each early release pairs a store with a load: holdPush
// stores pushHeld before reading stalled, and the watchdog stores stalled
// before calling this (likewise pushLoop and admitRequest with
// awaitingAdmission): one of the two always sees the other.
func (c *conn) releasePush() {
	if c.pushHeld.CompareAndSwap(true, false) {
		c.sess.PushDone()
	}
}

// releaseAdmission gives back the admission slot the receiver took for a
// response, exactly once: after the request is handled, or early by the
// watchdog of a stalled write.
func (c *conn) releaseAdmission() {
	if c.admitted.CompareAndSwap(true, false) {
		c.srv.admit.release()
	}
}

// admitRequest takes an admission slot before the stream generates a
// response to a request (a push is bounded by the engine's throttle
// instead). It waits its turn (oldest stream first) and fails only when the
// stream ends. While it waits, a push signal the pusher holds is answered
// at once (see awaitingAdmission): the pusher is blocked behind this
// request and must not hold a throttle slot meanwhile.
func (c *conn) admitRequest() error {
	if c.srv.admit == nil || c.pushing || c.admitted.Load() {
		return nil
	}
	ctx := c.ss.Context()
	if err := ctx.Err(); err != nil { // the stream ended while this request waited for mu
		return status.FromContextError(err).Err()
	}
	c.awaitingAdmission.Store(true)
	c.releasePush() // after the store: see pushLoop
	err := c.srv.admit.acquire(ctx, c.seq)
	c.awaitingAdmission.Store(false)
	if err != nil {
		return status.FromContextError(err).Err()
	}
	c.admitted.Store(true)
	return nil
}

// generateSafe is Session.Generate behind admission and a panic guard: a
// panic while building one proxy's config fails that stream only.
func (c *conn) generateSafe(typeURL string, names []string, wildcard bool, dst []engine.Resource) (res []engine.Resource, err error) {
	if err := c.admitRequest(); err != nil {
		return dst, err
	}
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		// Verify mode's byte comparison (PILOTFISH_VERIFY_CACHE) reports a
		// broken cache invariant by panicking; it must stay fatal in tests.
		if s, ok := r.(string); ok && strings.HasPrefix(s, "encode: verify:") {
			panic(r)
		}
		c.failure = "panic" // counted by the caller (pilot_xds_push_errors)
		c.log.Error("xds generate panicked", "type", typeURL, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
		res, err = dst, fmt.Errorf("%w: %v", errGeneratePanic, r)
	}()
	return c.sess.Generate(typeURL, names, wildcard, dst)
}

var errGeneratePanic = errors.New("generator panicked")

// failReason returns the pilot_xds_push_errors reason of the error a
// generate or send is returning: "panic" or "timeout" when this file caused
// it, else def.
func (c *conn) failReason(def string) string {
	r := c.failure
	c.failure = ""
	if r == "" {
		return def
	}
	return r
}

// runPush takes the merged pending push and sends it, then answers its
// signal; again while a stalled write left a push signal to run after it
// (send_watch.go). mu is held.
func runPush[R any](c *conn, p protocol[R]) error {
	c.pushing = true
	defer func() { c.pushing = false }()
	for {
		if push, ok := c.sess.TakePush(); ok {
			if err := p.push(push); err != nil {
				return err
			}
		}
		c.releasePush()
		if !c.watch.repending {
			return nil
		}
		c.watch.repending = false
	}
}

// checkNames enforces MaxSubscribedNames for one type on a stream.
func (c *conn) checkNames(typeURL string, n int) error {
	if limit := c.srv.maxNames; limit > 0 && n > limit {
		return status.Errorf(codes.ResourceExhausted,
			"subscription to %d %s resources on one stream exceeds the server's limit of %d names per type", n, typeURL, limit)
	}
	return nil
}

// admission is a counting semaphore that admits waiters oldest stream
// first: by the stream's connect sequence number, then arrival. In a
// reconnect storm a stream that connected earlier gets its next response
// (EDS after CDS, RDS after LDS) before later streams get their first, so
// proxies complete their initial config in connect order instead of all
// together at the end of the storm.
type admission struct {
	mu      sync.Mutex
	free    int        // guarded by mu
	waiting waiterHeap // guarded by mu
	arrived uint64     // guarded by mu; arrival counter, the tie-break
}

type waiter struct {
	seq, arrival uint64
	ch           chan struct{} // closed when admitted
	idx          int           // position in the heap; -1 once popped
}

func newAdmission(n int) *admission { return &admission{free: n} }

// acquire waits for a slot for the stream with connect sequence seq, or for
// ctx to end.
func (s *admission) acquire(ctx context.Context, seq uint64) error {
	s.mu.Lock()
	if s.free > 0 && len(s.waiting) == 0 {
		s.free--
		s.mu.Unlock()
		return nil
	}
	s.arrived++
	w := &waiter{seq: seq, arrival: s.arrived, ch: make(chan struct{})}
	heap.Push(&s.waiting, w)
	s.mu.Unlock()
	select {
	case <-w.ch:
		return nil
	case <-ctx.Done():
	}
	s.mu.Lock()
	if w.idx < 0 { // admitted while giving up: pass the slot on
		s.mu.Unlock()
		s.release()
		return ctx.Err()
	}
	heap.Remove(&s.waiting, w.idx)
	s.mu.Unlock()
	return ctx.Err()
}

// release returns a slot, handing it to the oldest stream waiting if any.
func (s *admission) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.waiting) > 0 {
		w := heap.Pop(&s.waiting).(*waiter)
		close(w.ch)
		return
	}
	s.free++
}

// waiterHeap orders waiters by (seq, arrival); container/heap's interface.
type waiterHeap []*waiter

func (h waiterHeap) Len() int { return len(h) }
func (h waiterHeap) Less(i, j int) bool {
	if h[i].seq != h[j].seq {
		return h[i].seq < h[j].seq
	}
	return h[i].arrival < h[j].arrival
}
func (h waiterHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx, h[j].idx = i, j
}
func (h *waiterHeap) Push(x any) {
	w := x.(*waiter)
	w.idx = len(*h)
	*h = append(*h, w)
}
func (h *waiterHeap) Pop() any {
	old := *h
	w := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	w.idx = -1
	return w
}

// clientCounter counts open streams per client IP for MaxStreamsPerClient.
type clientCounter struct {
	mu    sync.Mutex
	limit int
	n     map[string]int // guarded by mu
}

// clientIP is the host part of a peer address ("" when unknown).
func clientIP(addr string) string {
	if host, _, err := net.SplitHostPort(addr); err == nil {
		return host
	}
	return addr
}

// enter counts a new stream from addr, or refuses it over the limit.
func (cc *clientCounter) enter(addr string) error {
	if cc == nil || addr == "" {
		return nil
	}
	ip := clientIP(addr)
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.n[ip] >= cc.limit {
		return status.Errorf(codes.ResourceExhausted,
			"client %s already has %d xDS streams open, the server's limit per client", ip, cc.n[ip])
	}
	cc.n[ip]++
	return nil
}

// leave uncounts a stream from addr.
func (cc *clientCounter) leave(addr string) {
	if cc == nil || addr == "" {
		return
	}
	ip := clientIP(addr)
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.n[ip] <= 1 {
		delete(cc.n, ip)
		return
	}
	cc.n[ip]--
}

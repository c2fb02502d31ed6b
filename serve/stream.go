package serve

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/pilotfish-mesh/pilotfish/engine"
)

// What both protocols share: opening and closing a stream, its goroutines,
// nonces and sending. The protocol state itself lives in stream_sotw.go and
// stream_delta.go.
//
// A stream runs on three goroutines. The receiver reads each request and
// handles it where it was read: an ACK, most of a stream's traffic, costs
// no hand-off. The pusher waits for the engine's push signal and sends the
// push. Both hold conn.mu while they touch the protocol state, so they take
// turns, and both may write to the stream (gRPC allows one SendMsg at a
// time, which mu guarantees). The handler goroutine gRPC gave the stream
// only waits for the first error: it never sends, so it can always return,
// and returning is the one way to end a gRPC stream, even one whose write
// is blocked because the proxy stopped reading (SendTimeout, limits.go).

// protocol is one stream's xDS state machine, SotW or Delta. Its methods run
// with conn.mu held; an error ends the stream and is returned to the proxy,
// so it must be a gRPC status error.
type protocol[R any] interface {
	handle(req R) error
	push(p engine.Push) error
}

// request is what serveStream needs of a request message.
type request[T any] interface {
	*T
	proto.Message
	GetNode() *corev3.Node
}

// serveStream runs one ADS stream: it waits for the first request, connects
// the proxy, starts the receiver and the pusher and returns the stream's
// first error (nil when the proxy closed it). Session.Close is called once
// after a successful Connect, when the last of the three goroutines is done
// with the stream (conn.unref).
func serveStream[T any, R request[T]](s *XDSServer, ss grpc.ServerStream, who *caller, delta bool, newProtocol func(*conn) protocol[R]) error {
	ctx := ss.Context()
	first := R(new(T))
	if err := ss.RecvMsg(first); err != nil {
		return recvStatus(err)
	}
	c, err := s.open(ss, first.GetNode(), who, delta)
	if err != nil {
		return err
	}
	p := newProtocol(c)
	c.refs.Store(3)
	defer c.unref()
	mode := "sotw"
	if delta {
		mode = "delta"
	}
	go pprof.Do(ctx, pprof.Labels("xds", mode, "xds_goroutine", "recv"), func(ctx context.Context) {
		defer c.unref()
		receive[T, R](c, p, first)
	})
	go pprof.Do(ctx, pprof.Labels("xds", mode, "xds_goroutine", "push"), func(ctx context.Context) {
		defer c.unref()
		pushLoop(ctx, c, p)
	})
	select {
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	case err := <-c.errs:
		return err
	}
}

// receive handles the first request, then reads and handles requests until
// the stream fails. RecvMsg fails once the handler has returned, so it ends
// with the stream.
func receive[T any, R request[T]](c *conn, p protocol[R], first R) {
	r := first
	for {
		c.mu.Lock()
		if c.ss.Context().Err() != nil { // the stream ended while this request waited for mu
			c.mu.Unlock()
			return
		}
		err := p.handle(r)
		c.releaseAdmission() // limits.go
		c.mu.Unlock()
		if err != nil {
			c.fail(err)
			return
		}
		r = R(new(T))
		if err := c.ss.RecvMsg(r); err != nil {
			c.fail(recvStatus(err))
			return
		}
	}
}

// pushLoop sends each push the engine signals until the stream ends. A
// signal holds the engine's push-throttle slot until PushDone
// (conn.releasePush, limits.go).
func pushLoop[R any](ctx context.Context, c *conn, p protocol[R]) {
	pending := c.sess.Pending()
	for {
		select {
		case <-ctx.Done():
			return
		case <-pending:
		}
		c.holdPush()
		if !c.mu.TryLock() {
			// The receiver is answering a request. If it waits for an
			// admission slot (a reconnect storm), do not hold the engine's
			// push slot meanwhile, or pushes to every stream queue behind
			// requests; admitRequest covers a wait that starts later.
			if c.awaitingAdmission.Load() {
				c.releasePush()
			}
			c.mu.Lock()
		}
		if ctx.Err() != nil { // the stream ended while this push waited for mu
			c.mu.Unlock()
			return
		}
		err := runPush(c, p)
		c.mu.Unlock()
		if err != nil {
			c.fail(err)
			return
		}
	}
}

// fail reports the stream's end to the handler; the first report wins.
func (c *conn) fail(err error) {
	select {
	case c.errs <- err:
	default:
	}
}

// unref is called by each of the stream's three goroutines as it exits;
// the last one closes the session, so a goroutine still inside Generate or
// SendMsg never sees its session closed under it. The others end once the
// handler has returned: gRPC then ends the stream, which unblocks them.
func (c *conn) unref() {
	if c.refs.Add(-1) == 0 {
		c.releasePush()
		c.close()
	}
}

// recvStatus maps a RecvMsg error to the handler's result: a clean close by
// the proxy (io.EOF) ends the stream without error.
func recvStatus(err error) error {
	if errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

func (s *XDSServer) streamSotW(ss grpc.ServerStream) error {
	var err error
	pprof.Do(ss.Context(), pprof.Labels("xds", "sotw"), func(context.Context) {
		err = serveStream(s, ss, nil, false, newSotW)
	})
	return err
}

func (s *XDSServer) streamDelta(ss grpc.ServerStream) error {
	var err error
	pprof.Do(ss.Context(), pprof.Labels("xds", "delta"), func(context.Context) {
		err = serveStream(s, ss, nil, true, newDelta)
	})
	return err
}

// conn is the protocol-independent part of one stream. Its fields and the
// protocol state are guarded by mu (held by the receiver while it handles a
// request and by the pusher while it pushes), except those marked
// otherwise.
type conn struct {
	srv   *XDSServer
	ss    grpc.ServerStream
	sess  Session
	log   *slog.Logger
	delta bool
	mu    sync.Mutex
	errs  chan error   // the stream's end, reported by fail; not guarded
	refs  atomic.Int32 // goroutines still using the stream (unref)
	nonce uint64       // last nonce issued; one counter for all types of the stream

	scratch           []engine.Resource // Generate's destination; pooled between responses (see releaseScratch)
	msg               rawMessage        // reused: SendMsg consumes it synchronously
	peer              string            // remote address, "" when unknown
	admitted          atomic.Bool       // an admission slot is held (limits.go); not guarded
	pushHeld          atomic.Bool       // a push signal is not yet answered with PushDone (limits.go); not guarded
	pushing           bool              // the pusher is sending a push: generation needs no admission slot (limits.go)
	awaitingAdmission atomic.Bool       // the receiver waits for an admission slot (limits.go); not guarded
	watch             sendWatch         // the send watchdog (send_watch.go)
	failure           string            // pilot_xds_push_errors reason of the error being returned, when more precise (limits.go)
	seq               uint64            // connect sequence number: admission order (limits.go)
	status            *connStatus       // the stream's entry in the debug registry (connections.go)
	genAt             time.Time         // when the response being assembled started generating (pilot_xds_push_time)
	namespace         string            // the node's namespace, for the credential check (identity_sds.go)
	credAuth          error             // the credential check's result once made; errCredUnchecked before
	who               *caller           // the TLS caller's identity (identity.go); nil on the plaintext port; set by open
	grpcGen           bool              // the node asks for istiod's proxyless gRPC generator (unknown_types.go); set by open
}

// open validates the first request's node, checks it against the stream's
// caller (nil on the plaintext port) and connects the proxy.
func (s *XDSServer) open(ss grpc.ServerStream, node *corev3.Node, who *caller, delta bool) (*conn, error) {
	ctx := ss.Context()
	addr := ""
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		addr = p.Addr.String()
	}
	if err := s.checkNode(node); err != nil { // input_limits.go
		s.log.Warn("xds stream refused", "node", clip(node.GetId(), clipShort), "peer", addr, "err", clip(err.Error(), clipMessage))
		return nil, err
	}
	if err := s.authorize(who, node, addr); err != nil { // identity.go
		return nil, err
	}
	if err := s.clients.enter(addr); err != nil { // limits.go
		s.log.Warn("xds stream refused", "node", clip(node.GetId(), clipShort), "peer", addr, "err", err)
		return nil, err
	}
	if who != nil {
		ctx = engine.WithVerifiedIdentity(ctx) // WasmPlugin pull secrets (engine/wasm_secret.go)
	}
	sess, err := s.backend.Connect(ctx, node, addr)
	if err != nil {
		s.clients.leave(addr)
		// The backend's error may quote the node: clipped, in the log and
		// in the status.
		msg := clip(err.Error(), clipMessage)
		s.log.Warn("xds connect rejected", "node", clip(node.GetId(), clipShort), "peer", addr, "err", msg)
		if st, ok := status.FromError(err); ok {
			return nil, status.Error(st.Code(), clip(st.Message(), clipMessage))
		}
		code := codes.Unavailable
		if errors.Is(err, engine.ErrBadNode) {
			code = codes.InvalidArgument
		}
		return nil, status.Errorf(code, "connect %s: %s", clip(node.GetId(), clipShort), msg)
	}
	c := &conn{
		srv:      s,
		ss:       ss,
		sess:     sess,
		log:      s.log.With("proxy", sess.ID(), "delta", delta),
		delta:    delta,
		peer:     addr,
		seq:      s.streams.Add(1),
		credAuth: errCredUnchecked,
		who:      who,
		grpcGen:  grpcGenerator(node),
		errs:     make(chan error, 1),
	}
	if n, err := engine.ParseNode(node); err == nil {
		c.namespace = n.Namespace
	}
	s.track(c, node, addr)
	s.metrics.Connected(delta)
	c.log.Debug("xds stream connected", "peer", addr)
	return c, nil
}

func (c *conn) close() {
	c.srv.untrack(c)
	c.sess.Close()
	c.srv.clients.leave(c.peer)
	c.srv.metrics.Disconnected(c.delta)
	c.log.Debug("xds stream closed")
}

// nextNonce issues a new nonce. Counters are enough: a nonce only has to
// differ from the earlier ones of the same stream.
func (c *conn) nextNonce() uint64 {
	c.nonce++
	return c.nonce
}

// generate asks the session for resources into the reused scratch slice. The
// result is valid until the next call. For a type the engine does not serve
// it answers as istiod would (unknown_types.go): answerEmpty (an empty set),
// or answerNone with no error (left unanswered) or with the status that
// ends the stream; other errors end the stream too.
func (c *conn) generate(typeURL string, names []string, wildcard bool) (res []engine.Resource, a answer, err error) {
	if c.scratch == nil {
		if p, ok := scratchPool.Get().(*[]engine.Resource); ok {
			c.scratch = *p
		}
	}
	c.genAt = time.Now()
	res, err = c.generateSafe(typeURL, names, wildcard, c.scratch[:0])
	c.scratch = res[:0]
	switch {
	case errors.Is(err, engine.ErrUnknownType):
		a, err = c.unknownType(typeURL)
		return nil, a, err
	case err != nil:
		c.srv.metrics.PushError(typeURL, c.failReason("generate"))
		msg := clip(err.Error(), clipMessage)
		c.log.Error("xds generate failed", "type", typeURL, "err", msg)
		return nil, answerNone, status.Errorf(codes.Internal, "generate %s: %s", typeURL, msg)
	}
	if typeURL == engine.TypeSecret && !c.credentialsAllowed() {
		return res[:0], answerServed, nil // answered, with no credential
	}
	return res, answerServed, nil
}

// send writes an assembled response of version and hands its buffer to
// gRPC.
func (c *conn) send(typeURL string, version uint64, buf *[]byte) error {
	n := len(*buf)
	c.msg = rawMessage{buf: buf, pool: bufPool}
	if err := c.sendMsg(typeURL, &c.msg); err != nil {
		c.srv.metrics.PushError(typeURL, c.failReason("send_error"))
		return err // the stream is gone; its status is already decided
	}
	c.pushTime(typeURL)
	c.srv.metrics.Pushed(typeURL, n)
	c.sess.Sent(typeURL, versionString(version))
	return nil
}

// sendShared sends a response made of a shared body and a per-stream tail.
func (c *conn) sendShared(typeURL string, version uint64, body []byte, tail *[]byte) error {
	n := len(body) + len(*tail)
	c.msg = rawMessage{buf: tail, pool: bufPool, shared: body}
	if err := c.sendMsg(typeURL, &c.msg); err != nil {
		c.srv.metrics.PushError(typeURL, c.failReason("send_error"))
		return err
	}
	c.pushTime(typeURL)
	c.srv.metrics.Pushed(typeURL, n)
	c.sess.Sent(typeURL, versionString(version))
	return nil
}

// pushTime reports the time since the response just sent started
// generating.
func (c *conn) pushTime(typeURL string) {
	if !c.genAt.IsZero() {
		c.srv.metrics.PushTime(typeURL, time.Since(c.genAt))
		c.genAt = time.Time{}
	}
}

// versionString formats a digest as the version_info sent on the wire.
func versionString(v uint64) string {
	var b [versionLen]byte
	return string(appendHex(b[:0], v))
}

// versionIs reports whether s is versionString(v), without allocating.
func versionIs(s string, v uint64) bool {
	if len(s) != versionLen {
		return false
	}
	const digits = "0123456789abcdef"
	for i := range versionLen {
		if s[i] != digits[(v>>uint(60-4*i))&0xf] {
			return false
		}
	}
	return true
}

// nonceIs reports whether s is the decimal form of n, without allocating.
func nonceIs(s string, n uint64) bool {
	if len(s) != decimalLen(n) {
		return false
	}
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] != byte('0'+n%10) {
			return false
		}
		n /= 10
	}
	return true
}

// typeRank orders types within a push as Envoy expects: clusters before
// their endpoints, listeners before their routes (make-before-break), then
// anything else in first-request order.
func typeRank(typeURL string) int {
	switch typeURL {
	case engine.TypeCluster:
		return 0
	case engine.TypeEndpoint:
		return 1
	case engine.TypeListener:
		return 2
	case engine.TypeRoute:
		return 3
	}
	return 4
}

// pushes reports whether push p covers typeURL.
func pushes(p *engine.Push, typeURL string) bool {
	if p.Full {
		return true
	}
	for _, t := range p.Types {
		if t == typeURL {
			return true
		}
	}
	return false
}

// scratchPool holds Generate destinations between responses: a stream that
// is idle (most of them, most of the time) holds none, so a connected proxy
// costs no resource list (a sidecar's is thousands of entries).
var scratchPool sync.Pool // of *[]engine.Resource

// releaseScratch returns the stream's Generate destination to the pool once
// a response has been assembled from it.
func (c *conn) releaseScratch() {
	if c.scratch == nil {
		return
	}
	s := c.scratch[:0]
	c.scratch = nil
	if cap(s) <= 1<<16 { // drop a huge one rather than pin it
		scratchPool.Put(&s)
	}
}

package serve

import (
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The send watchdog. gRPC's SendMsg returns as soon as the response is
// queued, unless HTTP/2 flow control makes it wait: the proxy stopped
// reading. Every write is watched by one timer per stream, re-armed for
// each write and stopped after it, so a write that returns in time (nearly
// all of them) costs no goroutine and no allocation. When the timer fires,
// its function runs on its own goroutine while the write stays blocked:
//
//   - it gives back the work slots the stream holds (the receiver's
//     admission slot, the push signal's throttle slot), so a stalled proxy
//     never delays the others;
//   - if the pusher is the one blocked, it answers further push signals with
//     PushDone at once and has the pusher run their merged push after the
//     write (repending); if the receiver is blocked, the pusher does that
//     itself (conn.holdPush) and then waits for mu;
//   - after SendTimeout it ends the stream with DeadlineExceeded: the
//     handler returns, gRPC ends the stream and the blocked SendMsg fails.

// sendWatch is a stream's watchdog state.
type sendWatch struct {
	timer   *time.Timer // AfterFunc(onStall), created by the first watched write
	typeURL string      // of the write being watched; set before the timer is armed
	pusher  bool        // the pusher is the writer; set before the timer is armed
	stalled atomic.Bool // a write is stalled (read by conn.holdPush)
	// Set up before each arming, used by onStall when it fires: the writer
	// closes stop when its SendMsg returns, onStall closes done once it has
	// let go; the writer waits for done before it reads the fields below.
	stop, done chan struct{}
	repending  bool // a push signal was answered during the stall: push again
	timedOut   bool // SendTimeout ended the stream
}

// stallAfter is when a write counts as stalled: stalledSendAfter, or the
// send timeout if that is shorter.
func (c *conn) stallAfter() time.Duration {
	if t := c.srv.sendTimeout; t > 0 && t < stalledSendAfter {
		return t
	}
	return stalledSendAfter
}

// sendMsg writes m to the stream under the watchdog. mu is held, by the
// pusher (conn.pushing) or the receiver.
func (c *conn) sendMsg(typeURL string, m *rawMessage) error {
	w := &c.watch
	w.typeURL, w.pusher = typeURL, c.pushing
	if w.timer == nil {
		w.stop, w.done = make(chan struct{}), make(chan struct{})
		w.timer = time.AfterFunc(c.stallAfter(), c.onStall)
	} else {
		w.timer.Reset(c.stallAfter())
	}
	err := c.ss.SendMsg(m)
	if w.timer.Stop() {
		return err
	}
	// The timer fired: onStall runs, or is about to. Let it go, wait for it,
	// then take over what it left.
	close(w.stop)
	<-w.done
	w.stop, w.done = make(chan struct{}), make(chan struct{})
	w.stalled.Store(false)
	if w.timedOut {
		w.timedOut = false
		c.failure = "timeout" // counted by the caller (pilot_xds_push_errors)
		if err == nil {
			err = c.timeoutError(typeURL)
		}
	}
	return err
}

// onStall runs on the timer's goroutine when a write has been blocked for
// stallAfter, until the writer closes stop.
func (c *conn) onStall() {
	w := &c.watch
	defer close(w.done)
	w.stalled.Store(true)
	c.log.Debug("xds send stalled: the proxy is not reading; its work slots are released", "type", w.typeURL)
	c.releaseAdmission()
	c.releasePush()
	var pending <-chan struct{}
	if w.pusher {
		pending = c.sess.Pending()
	}
	var deadline <-chan time.Time
	if t := c.srv.sendTimeout; t > 0 {
		d := time.NewTimer(t - c.stallAfter())
		defer d.Stop()
		deadline = d.C
	}
	for {
		select {
		case <-w.stop:
			return
		case <-pending:
			// A push signalled while the pusher's write is stuck: give its
			// throttle slot back at once; the pusher runs it after the write.
			c.sess.PushDone()
			w.repending = true
		case <-deadline:
			deadline = nil
			w.timedOut = true
			c.log.Warn("xds send timed out: the proxy stopped reading; closing its stream", "type", w.typeURL, "timeout", c.srv.sendTimeout)
			c.fail(c.timeoutError(w.typeURL)) // the handler returns; the blocked SendMsg then fails
		}
	}
}

// timeoutError is the status a stream ends with when a write to it stays
// blocked for SendTimeout.
func (c *conn) timeoutError(typeURL string) error {
	return status.Errorf(codes.DeadlineExceeded, "sending %s timed out after %s: the proxy is not reading its stream", typeURL, c.srv.sendTimeout)
}

package serve

import (
	"context"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/pilotfish-mesh/pilotfish/engine"
)

// Backend is what serve needs from the engine: a way to register a proxy
// when its stream opens. Everything after that goes through the Session.
type Backend interface {
	// Connect registers a proxy for a new stream. node is the first request's
	// Node (never nil, with a non-empty Id); peerAddr is the remote address
	// of the stream ("" when unknown). An error ends the stream: a gRPC
	// status error is returned to the proxy as is, one wrapping
	// engine.ErrBadNode as InvalidArgument, anything else as Unavailable (so
	// the proxy retries, possibly on another replica).
	Connect(ctx context.Context, node *corev3.Node, peerAddr string) (Session, error)
}

// Session is one connected proxy as the engine sees it. serve calls its
// methods under the stream's mutex, never concurrently for one session,
// except PushDone, which may come from any of the stream's goroutines at
// any time (the pusher, the receiver, the watchdog of a stalled write), and
// Close, which comes from whichever goroutine of the stream ends last. The
// engine may signal Pending from any goroutine.
type Session interface {
	// ID names the proxy in logs and metrics, e.g. "pod-0.default" (istiod's
	// proxy id).
	ID() string

	// Pending is signalled (a cap-1 channel, sent without blocking) when a
	// push is queued for this proxy. serve then calls TakePush.
	Pending() <-chan struct{}

	// TakePush returns the merged pending push and clears it; false when
	// nothing is pending (a signal raced with an earlier TakePush).
	TakePush() (engine.Push, bool)

	// PushDone follows every Pending signal serve receives, once the push
	// taken (if any) has been sent or found unchanged. The engine releases
	// the connection's push-throttle slot on it. When a write has been
	// blocked for a second (the proxy stopped reading), serve calls it
	// early, and answers further signals with it at once, taking their
	// merged push after the write: a stalled stream holds no slot. A signal
	// that finds the stream busy answering a request (which may wait for an
	// admission slot) is also answered at once; its push follows the
	// request.
	PushDone()

	// Generate appends the resources of typeURL for this proxy to dst and
	// returns the extended slice. With wildcard true it returns every
	// resource of the type the proxy should see, plus any of names that exist
	// beyond those; with wildcard false, only those of names that exist
	// (unknown names are simply absent). The order is the engine's; serve
	// does not depend on it. A type the engine does not serve is an error
	// wrapping engine.ErrUnknownType: serve then leaves the request
	// unanswered, as istiod does. Any other error ends the stream with
	// Internal.
	Generate(typeURL string, names []string, wildcard bool, dst []engine.Resource) ([]engine.Resource, error)

	// Sent reports that a response of typeURL with version (version_info,
	// or system_version_info for Delta) was written to the stream; with
	// Acked it measures convergence.
	Sent(typeURL, version string)

	// Acked reports that the proxy accepted the response of typeURL with
	// version (its version_info, or system_version_info for Delta). The
	// engine records sync status and convergence time from it.
	Acked(typeURL, version string)

	// Nacked reports that the proxy rejected the response of typeURL with
	// version; message is the proxy's error_detail. The proxy keeps its last
	// accepted config, and serve does not resend the rejected content: only
	// a later change is pushed.
	Nacked(typeURL, version, message string)

	// Close reports that the stream ended. It is called exactly once per
	// successful Connect, whatever the reason.
	Close()
}

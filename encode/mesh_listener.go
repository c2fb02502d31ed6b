package encode

import (
	"time"

	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	networking "istio.io/api/networking/v1alpha3"
)

// The mesh settings that shape listeners and routes (meshConfig
// pathNormalization and defaultHttpRetryPolicy), as values the keys of the
// resources they change hold.

// PathNormalization is meshConfig pathNormalization.normalization: what
// every HTTP connection manager (sidecar inbound and outbound, gateway)
// does to request paths before routing and authorization.
type PathNormalization uint8

const (
	// PathNormalizeBase is DEFAULT and BASE (istiod's default):
	// normalize_path, escaped slashes kept.
	PathNormalizeBase PathNormalization = iota
	// PathNormalizeNone leaves paths as they come (normalize_path false).
	PathNormalizeNone
	// PathNormalizeMergeSlashes adds merge_slashes.
	PathNormalizeMergeSlashes
	// PathNormalizeDecodeAndMergeSlashes also unescapes %2F and %5C
	// (path_with_escaped_slashes_action UNESCAPE_AND_FORWARD).
	PathNormalizeDecodeAndMergeSlashes
)

// apply sets h's path fields as istiod's buildHTTPConnectionManager does.
func (p PathNormalization) apply(h *hcm.HttpConnectionManager) {
	h.PathWithEscapedSlashesAction = hcm.HttpConnectionManager_KEEP_UNCHANGED
	h.NormalizePath = wrapperspb.Bool(p != PathNormalizeNone)
	h.MergeSlashes = p == PathNormalizeMergeSlashes || p == PathNormalizeDecodeAndMergeSlashes
	if p == PathNormalizeDecodeAndMergeSlashes {
		h.PathWithEscapedSlashesAction = hcm.HttpConnectionManager_UNESCAPE_AND_FORWARD
	}
}

// HTTPRetry is meshConfig defaultHttpRetryPolicy: the retries of an
// outbound or gateway route no VirtualService retries setting covers. The
// zero value (Set false) is istiod's built-in default (2 attempts on
// connection failures, avoiding the previous host).
type HTTPRetry struct {
	// Set: the mesh sets a policy; the other fields are it.
	Set bool
	// Attempts <= 0 disables retries.
	Attempts int32
	RetryOn  string
	// PerTryTimeout is set when HasPerTryTimeout.
	PerTryTimeout    time.Duration
	HasPerTryTimeout bool
	// IgnorePreviousHosts is set when HasIgnorePreviousHosts (unset keeps
	// the previous-hosts predicate).
	IgnorePreviousHosts    bool
	HasIgnorePreviousHosts bool
	RetryRemoteLocalities  bool
	// Backoff is the base interval when HasBackoff.
	Backoff    time.Duration
	HasBackoff bool
}

func (r *HTTPRetry) hashInto(h *Hasher) {
	h.Bool(r.Set)
	if !r.Set {
		return
	}
	h.U32(uint32(r.Attempts))
	h.Str(r.RetryOn)
	h.U64(uint64(r.PerTryTimeout))
	h.Bool(r.HasPerTryTimeout)
	h.Bool(r.IgnorePreviousHosts)
	h.Bool(r.HasIgnorePreviousHosts)
	h.Bool(r.RetryRemoteLocalities)
	h.U64(uint64(r.Backoff))
	h.Bool(r.HasBackoff)
}

// Hash identifies the policy (for digests of what holds keys with it).
func (r *HTTPRetry) Hash() uint64 {
	h := NewHasher("HTTPRetry")
	r.hashInto(&h)
	return h.Sum()
}

// spec is the policy as the VirtualService field it stands in for; nil
// when unset (istiod's built-in default).
func (r *HTTPRetry) spec() *networking.HTTPRetry {
	if !r.Set {
		return nil
	}
	out := &networking.HTTPRetry{Attempts: r.Attempts, RetryOn: r.RetryOn}
	if r.HasPerTryTimeout {
		out.PerTryTimeout = durationpb.New(r.PerTryTimeout)
	}
	if r.HasIgnorePreviousHosts {
		out.RetryIgnorePreviousHosts = wrapperspb.Bool(r.IgnorePreviousHosts)
	}
	if r.RetryRemoteLocalities {
		out.RetryRemoteLocalities = wrapperspb.Bool(true)
	}
	if r.HasBackoff {
		out.Backoff = durationpb.New(r.Backoff)
	}
	return out
}

// policy is the route retry policy of a route whose VirtualService sets no
// retries (istiod: ConvertPolicy of the mesh's default).
func (r *HTTPRetry) policy(consistentHash bool) *route.RetryPolicy {
	return rtRetryPolicy(r.spec(), consistentHash)
}

// InboundTrafficPolicy is meshConfig inboundTrafficPolicy.mode: where a
// sidecar's inbound clusters send traffic.
type InboundTrafficPolicy uint8

const (
	// InboundPassthrough (istiod's default): to the original destination
	// (the pod's address), bound to 127.0.0.6.
	InboundPassthrough InboundTrafficPolicy = iota
	// InboundLocalhost: to 127.0.0.1 (::1) on the target port, for
	// applications that listen on localhost only.
	InboundLocalhost
)

package serve

import (
	"io"
	"log/slog"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
)

// adsServiceName is the gRPC service Envoy, istio-proxy and grpc-go's xDS
// client connect to.
const adsServiceName = "envoy.service.discovery.v3.AggregatedDiscoveryService"

// XDSOptions configures an XDSServer. The zero value is usable.
type XDSOptions struct {
	// Logger receives stream events: connects and disconnects at Debug,
	// NACKs at Warn. Nil discards them.
	Logger *slog.Logger
	// Metrics counts pushes and rejections. Nil counts nothing.
	Metrics XDSMetrics
	// ControlPlaneID, when set, is sent as control_plane.identifier in every
	// response (istiod sends its pod name and version there) so proxies'
	// config dumps show which replica configured them.
	ControlPlaneID string
	// Limits are the resilience settings: send timeout, admission
	// concurrency, names and streams per client (limits.go).
	Limits Limits
	// Debug answers istiod's debug type URLs (istio.io/debug/syncz,
	// istio.io/debug/config_dump) on SotW streams. Nil leaves them
	// unanswered.
	Debug DebugSource
	// RootNamespace is the mesh's root namespace: a caller authenticated
	// there may ask for types the engine does not serve (unknown_types.go).
	// Empty is istio-system.
	RootNamespace string
}

// XDSMetrics receives the server's measurements. Methods are called from
// stream goroutines concurrently and must not block. Implementations should
// embed NopXDSMetrics so that methods added later have a default.
type XDSMetrics interface {
	// Connected and Disconnected bracket each stream that passed
	// Backend.Connect (istiod's pilot_xds gauge).
	Connected(delta bool)
	Disconnected(delta bool)
	// Pushed counts one response of typeURL with its size in bytes
	// (pilot_xds_pushes, pilot_xds_config_size_bytes).
	Pushed(typeURL string, bytes int)
	// Rejected counts one NACK of typeURL (pilot_total_xds_rejects).
	Rejected(typeURL string)
	// PushTime is how long one push to one stream took for typeURL, from
	// generating its resources to handing the response to gRPC
	// (pilot_xds_push_time).
	PushTime(typeURL string, d time.Duration)
	// PushError counts a push to a stream that failed: reason is a short
	// label, e.g. "send_error", "timeout", "panic", "generate"
	// (pilot_xds_push_errors).
	PushError(typeURL, reason string)
	// AuthFailed counts a TLS stream or handshake refused by the xDS
	// identity rule; reason is one of AuthReasons (identity.go).
	AuthFailed(reason string)
	// UnknownType counts a request for a type URL the engine does not
	// serve; kind is one of UnknownTypeKinds (unknown_types.go), never the
	// client's string.
	UnknownType(kind string)
}

// NopXDSMetrics is an XDSMetrics that records nothing.
type NopXDSMetrics struct{}

func (NopXDSMetrics) Connected(bool)     {}
func (NopXDSMetrics) Disconnected(bool)  {}
func (NopXDSMetrics) Pushed(string, int) {}
func (NopXDSMetrics) Rejected(string)    {}

func (NopXDSMetrics) PushTime(string, time.Duration) {}
func (NopXDSMetrics) PushError(string, string)       {}
func (NopXDSMetrics) AuthFailed(string)              {}
func (NopXDSMetrics) UnknownType(string)             {}

// XDSServer serves the Aggregated Discovery Service, State of the World and
// Delta, from a Backend. Responses are assembled from the resources' cached
// encoded bytes and written by the raw-bytes codec (see ServerOptions), never
// re-marshaled.
//
// Each stream has a receiver that reads and handles requests and a pusher
// that sends the engine's pushes, taking turns on the stream's protocol
// state under one per-stream mutex (stream.go). An XDSServer itself holds no per-stream state and is safe for concurrent use.
type XDSServer struct {
	backend      Backend
	log          *slog.Logger
	refusals     *logLimiter // refused streams' log lines (log_limit.go)
	metrics      XDSMetrics
	controlPlane []byte // encoded ControlPlane, shared by every response
	// bodies: SotW response bodies shared by streams (see sharedBody).
	bodies *weakTable[bodyKey, byte]
	// deltaTransitions: Delta responses shared by streams in the same
	// state (see delta_transition.go).
	deltaTransitions *deltaTransitions
	conns            registry               // live streams, for debug (connections.go)
	debug            DebugSource            // istio.io/debug types (debug_types.go); nil answers none
	rootNamespace    atomic.Pointer[string] // XDSOptions.RootNamespace, then SetRootNamespace's (unknown_types.go)

	limitState // Limits (limits.go)
}

// NewXDSServer returns a server answering from backend. Register it on a
// grpc.Server created with ServerOptions.
func NewXDSServer(backend Backend, opts XDSOptions) *XDSServer {
	s := &XDSServer{
		backend:          backend,
		log:              opts.Logger,
		refusals:         newRefusalLimiter(),
		metrics:          opts.Metrics,
		controlPlane:     encodeControlPlane(opts.ControlPlaneID),
		bodies:           newBodies(),
		deltaTransitions: newDeltaTransitions(),
		limitState:       newLimitState(opts.Limits),
		debug:            opts.Debug,
	}
	s.SetRootNamespace(opts.RootNamespace)
	if s.log == nil {
		s.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if s.metrics == nil {
		s.metrics = NopXDSMetrics{}
	}
	return s
}

// SetRootNamespace changes the mesh's root namespace (a new mesh config):
// streams check callers against it from then on. Empty is istio-system.
func (s *XDSServer) SetRootNamespace(ns string) {
	if ns == "" {
		ns = defaultRootNamespace
	}
	s.rootNamespace.Store(&ns)
}

// Register registers the AggregatedDiscoveryService on gs (a *grpc.Server).
// gs must use the codec from ServerOptions: without it every response fails
// to encode and streams end with Internal.
func (s *XDSServer) Register(gs grpc.ServiceRegistrar) {
	gs.RegisterService(&adsServiceDesc, s)
}

// adsHandler is the handler type of adsServiceDesc: grpc-go checks that the
// registered implementation satisfies it.
type adsHandler interface {
	streamSotW(grpc.ServerStream) error
	streamDelta(grpc.ServerStream) error
}

// adsServiceDesc mirrors the generated descriptor of
// envoy/service/discovery/v3/ads.proto, with handlers that work on the raw
// stream: the generated server interface would force typed responses, and so
// a marshal per send.
var adsServiceDesc = grpc.ServiceDesc{
	ServiceName: adsServiceName,
	HandlerType: (*adsHandler)(nil),
	Streams: []grpc.StreamDesc{
		{
			StreamName:    "StreamAggregatedResources",
			Handler:       func(srv any, ss grpc.ServerStream) error { return srv.(adsHandler).streamSotW(ss) },
			ServerStreams: true,
			ClientStreams: true,
		},
		{
			StreamName:    "DeltaAggregatedResources",
			Handler:       func(srv any, ss grpc.ServerStream) error { return srv.(adsHandler).streamDelta(ss) },
			ServerStreams: true,
			ClientStreams: true,
		},
	},
	Metadata: "envoy/service/discovery/v3/ads.proto",
}

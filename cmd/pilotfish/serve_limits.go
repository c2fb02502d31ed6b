package main

import (
	"time"

	"github.com/spf13/pflag"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"

	"github.com/pilotfish-mesh/pilotfish/serve"
)

// limitOptions are serve's resilience flags: gRPC keepalive, handshake
// timeout, message size and streams per connection, and the xDS server's
// send timeout, admission and limits (serve.Limits). Zero values mean
// gRPC's and serve's defaults, so tests may leave them unset.
type limitOptions struct {
	sendTimeout          time.Duration
	requestConcurrency   int
	maxNames             int
	maxStreamsPerIP      int
	maxNodeIDBytes       int // 0: serve's default; negative: no limit
	maxNodeMetadataBytes int // 0: serve's default; negative: no limit
	maxRecvMsgSize       int
	maxConcurrentStreams int           // 0: gRPC's default (no limit)
	handshakeTimeout     time.Duration // 0: gRPC's default (120s)
	keepaliveInterval    time.Duration
	keepaliveTimeout     time.Duration
	maxConnAge           time.Duration
	maxConnAgeGrace      time.Duration
}

func addLimitFlags(f *pflag.FlagSet, o *limitOptions) {
	f.DurationVar(&o.sendTimeout, "xds-send-timeout", envDuration("PILOT_XDS_SEND_TIMEOUT", 30*time.Second),
		"close an xDS stream whose response write stays blocked this long because the proxy stopped reading (PILOT_XDS_SEND_TIMEOUT; 0 disables; istiod's default is 0). A stalled write gives its push-throttle slot back after 1s either way")
	f.IntVar(&o.requestConcurrency, "xds-request-concurrency", 0,
		"how many streams may generate and write responses to requests at once; the rest wait, earliest connected stream first, so a reconnect storm is answered in connect order with bounded memory (0: four per core, at least 8; negative: no limit)")
	f.IntVar(&o.maxNames, "xds-max-subscribed-names", 100000,
		"the most resource names one xDS stream may subscribe to per type; more ends the stream with RESOURCE_EXHAUSTED (0: no limit)")
	f.IntVar(&o.maxStreamsPerIP, "xds-max-streams-per-client", 0,
		"the most xDS streams open at once from one client IP; more are refused with RESOURCE_EXHAUSTED (0: no limit)")
	f.IntVar(&o.maxNodeIDBytes, "xds-max-node-id-bytes", serve.DefaultMaxNodeIDBytes,
		"the longest node id an xDS stream's first request may carry; longer ones end the stream with INVALID_ARGUMENT (Istio's node ids stay under 700 bytes; negative: no limit)")
	f.IntVar(&o.maxNodeMetadataBytes, "xds-max-node-metadata-bytes", serve.DefaultMaxNodeMetadataBytes,
		"the largest encoded node, apart from its id, an xDS stream's first request may carry: metadata (where istio-agent puts the pod's labels and annotations; Kubernetes allows 256 KiB of annotations), locality, extensions; larger ones end the stream with INVALID_ARGUMENT (negative: no limit)")
	f.IntVar(&o.maxRecvMsgSize, "grpc-max-recv-msg-size", envInt("ISTIO_GPRC_MAXRECVMSGSIZE", 4<<20),
		"the largest gRPC request accepted, in bytes; larger ones fail with RESOURCE_EXHAUSTED (ISTIO_GPRC_MAXRECVMSGSIZE, istiod's spelling)")
	f.IntVar(&o.maxConcurrentStreams, "grpc-max-concurrent-streams", envInt("ISTIO_GPRC_MAXSTREAMS", 1000),
		"the most streams one gRPC connection may carry at once; the server refuses more (REFUSED_STREAM), and gRPC clients wait for a free one. A proxy opens one or two (ISTIO_GPRC_MAXSTREAMS, istiod's spelling; istiod's default is 100000; 0: no limit)")
	f.DurationVar(&o.handshakeTimeout, "grpc-handshake-timeout", 10*time.Second,
		"close a connection that has not completed its TLS and HTTP/2 handshake (preface and SETTINGS) within this long (gRPC's default is 120s)")
	f.DurationVar(&o.keepaliveInterval, "keepalive-interval", 30*time.Second,
		"ping a gRPC client idle this long, and accept client pings as often as half of it (istiod's keepaliveInterval)")
	f.DurationVar(&o.keepaliveTimeout, "keepalive-timeout", 10*time.Second,
		"close a gRPC connection whose ping is not answered within this long (istiod's keepaliveTimeout)")
	f.DurationVar(&o.maxConnAge, "max-connection-age", 30*time.Minute,
		"send GOAWAY on a gRPC connection this old (gRPC adds ±10% jitter), so proxies reconnect and spread over the replicas, new ones included (istiod's keepaliveMaxServerConnectionAge, 30m in its chart; 0: never)")
	f.DurationVar(&o.maxConnAgeGrace, "max-connection-age-grace", 10*time.Second,
		"after --max-connection-age's GOAWAY, close the connection once this has passed; xDS streams never end on their own (istiod's keepaliveMaxServerConnectionAgeGrace)")
}

// grpcOptions are the gRPC server options of the limits, for every server
// that serves xDS.
func (o *limitOptions) grpcOptions() []grpc.ServerOption {
	var opts []grpc.ServerOption
	if o.maxRecvMsgSize > 0 {
		opts = append(opts, grpc.MaxRecvMsgSize(o.maxRecvMsgSize))
	}
	if o.maxConcurrentStreams > 0 {
		opts = append(opts, grpc.MaxConcurrentStreams(uint32(o.maxConcurrentStreams)))
	}
	if o.handshakeTimeout > 0 {
		opts = append(opts, grpc.ConnectionTimeout(o.handshakeTimeout))
	}
	if o.keepaliveInterval > 0 || o.maxConnAge > 0 {
		opts = append(opts, grpc.KeepaliveParams(o.keepaliveParams()))
	}
	if o.keepaliveInterval > 0 {
		opts = append(opts,
			// As istiod: clients may ping every interval/2 (Envoy's and
			// grpc-go's defaults stay below that), also without streams.
			grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{
				MinTime: o.keepaliveInterval / 2, PermitWithoutStream: true,
			}))
	}
	return opts
}

// keepaliveParams are the server's keepalive parameters. Any other
// ServerParameters setting (connection age) belongs in this struct too:
// grpc.KeepaliveParams replaces earlier ones, it does not merge them.
func (o *limitOptions) keepaliveParams() keepalive.ServerParameters {
	p := keepalive.ServerParameters{Time: o.keepaliveInterval, Timeout: o.keepaliveTimeout}
	if o.maxConnAge > 0 {
		p.MaxConnectionAge, p.MaxConnectionAgeGrace = o.maxConnAge, o.maxConnAgeGrace
		if p.MaxConnectionAgeGrace <= 0 {
			p.MaxConnectionAgeGrace = time.Millisecond // gRPC reads 0 as never
		}
	}
	return p
}

// xds returns the xDS server's limits.
func (o *limitOptions) xds() serve.Limits {
	return serve.Limits{
		SendTimeout:         o.sendTimeout,
		RequestConcurrency:  o.requestConcurrency,
		MaxSubscribedNames:  o.maxNames,
		MaxStreamsPerClient: o.maxStreamsPerIP,

		MaxNodeIDBytes:       o.maxNodeIDBytes,
		MaxNodeMetadataBytes: o.maxNodeMetadataBytes,
	}
}

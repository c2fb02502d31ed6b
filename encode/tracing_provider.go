package encode

import (
	"net/url"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tracingcfg "github.com/envoyproxy/go-control-plane/envoy/config/trace/v3"
	rdenv "github.com/envoyproxy/go-control-plane/envoy/extensions/tracers/opentelemetry/resource_detectors/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The tracers istiod's configureFromProviderConfig generates, one typed
// config per provider kind.

// Envoy's tracer names.
const (
	tracerZipkin        = "envoy.tracers.zipkin"
	tracerDatadog       = "envoy.tracers.datadog"
	tracerSkyWalking    = "envoy.tracers.skywalking"
	tracerOpenTelemetry = "envoy.tracers.opentelemetry"
)

// zipkinDefaultTimeout is istiod's collector timeout when the provider
// sets none (Envoy requires one on an HttpService).
const zipkinDefaultTimeout = 5 * time.Second

// providerConfig is the tracer's name and typed config.
func (t *Tracing) providerConfig() (string, *anypb.Any) {
	p := t.Provider
	switch p.Kind {
	case TraceZipkin:
		return tracerZipkin, rtAny(t.zipkin())
	case TraceDatadog:
		return tracerDatadog, rtAny(&tracingcfg.DatadogConfig{
			CollectorCluster:  t.Cluster,
			ServiceName:       t.Identity.ServiceCluster,
			CollectorHostname: t.Hostname,
		})
	case TraceSkyWalking:
		return tracerSkyWalking, rtAny(&tracingcfg.SkyWalkingConfig{GrpcService: t.envoyGRPC(nil, 0, false)})
	}
	return tracerOpenTelemetry, rtAny(t.openTelemetry())
}

func (t *Tracing) zipkin() *tracingcfg.ZipkinConfig {
	p := t.Provider
	path := p.Path
	if path == "" {
		path = "/api/v2/spans"
	}
	zc := &tracingcfg.ZipkinConfig{
		CollectorEndpointVersion: tracingcfg.ZipkinConfig_HTTP_JSON,
		TraceId_128Bit:           !p.TraceID64,
		SharedSpanContext:        wrapperspb.Bool(false),
	}
	if t.ZipkinHTTPService {
		timeout := zipkinDefaultTimeout
		if p.HasTimeout {
			timeout = p.Timeout
		}
		zc.CollectorService = &core.HttpService{
			HttpUri: &core.HttpUri{
				Uri:              "http://" + t.Hostname + path,
				HttpUpstreamType: &core.HttpUri_Cluster{Cluster: t.Cluster},
				Timeout:          durationpb.New(timeout),
			},
			RequestHeadersToAdd: traceHeaders(p.Headers),
		}
	} else {
		// Older proxies: the collector fields; timeout and headers are
		// dropped, as istiod drops them.
		zc.CollectorCluster = t.Cluster
		zc.CollectorEndpoint = path
		zc.CollectorHostname = t.Hostname
	}
	if t.ZipkinTraceContext && p.W3C {
		zc.TraceContextOption = tracingcfg.ZipkinConfig_USE_B3_WITH_W3C_PROPAGATION
	}
	return zc
}

func (t *Tracing) openTelemetry() *tracingcfg.OpenTelemetryConfig {
	p := t.Provider
	oc := &tracingcfg.OpenTelemetryConfig{ServiceName: t.Identity.ServiceCluster}
	if p.OTelHTTP {
		uri, err := url.JoinPath(t.Hostname, p.Path)
		if err != nil {
			uri = t.Hostname // engine checks the path; a host cannot fail the join
		}
		hu := &core.HttpUri{Uri: uri, HttpUpstreamType: &core.HttpUri_Cluster{Cluster: t.Cluster}}
		if p.HasTimeout {
			hu.Timeout = durationpb.New(p.Timeout)
		}
		oc.HttpService = &core.HttpService{HttpUri: hu, RequestHeadersToAdd: traceHeaders(p.Headers)}
	} else {
		oc.GrpcService = t.envoyGRPC(p.Headers, p.Timeout, p.HasTimeout)
	}
	if p.EnvDetector {
		oc.ResourceDetectors = append(oc.ResourceDetectors, &core.TypedExtensionConfig{
			Name: "envoy.tracers.opentelemetry.resource_detectors.environment", TypedConfig: rtAny(&rdenv.EnvironmentResourceDetectorConfig{}),
		})
	}
	if p.DynatraceDetector {
		oc.ResourceDetectors = append(oc.ResourceDetectors, &core.TypedExtensionConfig{
			Name: "envoy.tracers.opentelemetry.resource_detectors.dynatrace", TypedConfig: rtAny(&rdenv.DynatraceResourceDetectorConfig{}),
		})
	}
	return oc
}

// envoyGRPC is a gRPC service on the collector's cluster, with the
// collector's host as authority.
func (t *Tracing) envoyGRPC(md []TraceHeader, timeout time.Duration, hasTimeout bool) *core.GrpcService {
	g := &core.GrpcService{TargetSpecifier: &core.GrpcService_EnvoyGrpc_{EnvoyGrpc: &core.GrpcService_EnvoyGrpc{
		ClusterName: t.Cluster, Authority: t.Hostname,
	}}}
	if hasTimeout {
		g.Timeout = durationpb.New(timeout)
	}
	for _, h := range md {
		g.InitialMetadata = append(g.InitialMetadata, &core.HeaderValue{Key: h.Name, Value: h.Value})
	}
	return g
}

func traceHeaders(hs []TraceHeader) []*core.HeaderValueOption {
	if len(hs) == 0 {
		return nil
	}
	out := make([]*core.HeaderValueOption, 0, len(hs))
	for _, h := range hs {
		out = append(out, &core.HeaderValueOption{
			AppendAction: core.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD,
			Header:       &core.HeaderValue{Key: h.Name, Value: h.Value},
		})
	}
	return out
}

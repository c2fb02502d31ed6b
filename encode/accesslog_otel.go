package encode

import (
	"strings"

	accesslog "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	grpcaccesslog "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/grpc/v3"
	otelaccesslog "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/open_telemetry/v3"
	otlpcommon "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
)

// alWasmStateToLog is istiod's envoyWasmStateToLog: the filter state an
// OpenTelemetry logger sends (the peer metadata under its old and new
// keys).
var alWasmStateToLog = []string{"upstream_peer", "downstream_peer",
	"wasm.upstream_peer", "wasm.upstream_peer_id", "wasm.downstream_peer", "wasm.downstream_peer_id"}

// otelConfig is istiod's buildOpenTelemetryAccessLogConfig for an
// envoyOtelAls provider: the text format as the log body, the labels as
// string attributes sorted by key, built-in labels off, and the
// req_without_query formatter when either uses it. nil if a's labels do
// not parse.
func (a *AccessLog) otelConfig() *otelaccesslog.OpenTelemetryAccessLogConfig {
	cfg := &otelaccesslog.OpenTelemetryAccessLogConfig{
		CommonConfig: &grpcaccesslog.CommonGrpcAccessLogConfig{
			LogName: a.LogName,
			GrpcService: &core.GrpcService{TargetSpecifier: &core.GrpcService_EnvoyGrpc_{
				EnvoyGrpc: &core.GrpcService_EnvoyGrpc{ClusterName: a.Cluster, Authority: a.Authority},
			}},
			TransportApiVersion:     core.ApiVersion_V3,
			FilterStateObjectsToLog: alWasmStateToLog,
		},
		DisableBuiltinLabels: true,
	}
	reqWithoutQuery := strings.Contains(a.Text, "%REQ_WITHOUT_QUERY")
	if a.Text != "" {
		cfg.Body = &otlpcommon.AnyValue{Value: &otlpcommon.AnyValue_StringValue{StringValue: a.Text}}
	}
	if a.JSON != "" {
		st := &structpb.Struct{}
		if protojson.Unmarshal([]byte(a.JSON), st) != nil {
			return nil
		}
		if len(st.GetFields()) > 0 {
			kv := &otlpcommon.KeyValueList{}
			for _, k := range sortedKeys(st.GetFields()) {
				v := st.GetFields()[k].GetStringValue()
				reqWithoutQuery = reqWithoutQuery || strings.Contains(v, "%REQ_WITHOUT_QUERY")
				kv.Values = append(kv.Values, &otlpcommon.KeyValue{Key: k, Value: &otlpcommon.AnyValue{Value: &otlpcommon.AnyValue_StringValue{StringValue: v}}})
			}
			cfg.Attributes = kv
		}
	}
	if reqWithoutQuery {
		cfg.Formatters = []*core.TypedExtensionConfig{alReqWithoutQuery}
	}
	return cfg
}

// otelProto is a's logger for AccessLogOTel.
func (a *AccessLog) otelProto(out *accesslog.AccessLog) bool {
	cfg := a.otelConfig()
	if cfg == nil {
		return false
	}
	out.Name = "envoy.access_loggers.open_telemetry"
	out.ConfigType = &accesslog.AccessLog_TypedConfig{TypedConfig: rtAny(cfg)}
	return true
}

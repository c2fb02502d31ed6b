package encode

import (
	"strings"

	accesslog "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	fileaccesslog "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/file/v3"
	cel "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/filters/cel/v3"
	grpcaccesslog "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/grpc/v3"
	reqwithoutquery "github.com/envoyproxy/go-control-plane/envoy/extensions/formatter/req_without_query/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
)

// Access logs as istiod writes them (pilot/pkg/model/telemetry_logging.go
// and networking/core/accesslog.go): a file logger for the mesh config's
// accessLogFile or an envoyFileAccessLog provider, gRPC loggers for the
// envoyHttpAls and envoyTcpAls providers, each with the Telemetry's CEL
// filter; listener-level loggers also need the NR response flag (no filter
// chain matched), the only case the chains' loggers miss.

// AccessLogKind is the kind of provider an access log comes from.
type AccessLogKind uint8

const (
	// AccessLogFile is envoy.access_loggers.file (accessLogFile,
	// envoyFileAccessLog).
	AccessLogFile AccessLogKind = iota
	// AccessLogHTTPGRPC is envoy.access_loggers.http_grpc (envoyHttpAls).
	AccessLogHTTPGRPC
	// AccessLogTCPGRPC is envoy.tcp_grpc_access_log (envoyTcpAls).
	AccessLogTCPGRPC
	// AccessLogOTel is envoy.access_loggers.open_telemetry (envoyOtelAls):
	// Text is its body format, JSON its labels (attributes).
	AccessLogOTel
)

// AccessLog is one access logger, as values.
type AccessLog struct {
	Kind AccessLogKind
	// Path is a file logger's path.
	Path string
	// JSON is a file logger's JSON format (a JSON object of labels); when
	// empty, Text is its text format (with its final newline).
	JSON      string
	Text      string
	OmitEmpty bool
	// LogName, Cluster and Authority are a gRPC logger's log name and
	// service (the outbound cluster of the provider's service and port).
	LogName, Cluster, Authority string
	// FilterState are the filter state objects a gRPC logger logs.
	FilterState []string
	// RequestHeaders, ResponseHeaders and ResponseTrailers are envoyHttpAls'
	// additional*ToLog.
	RequestHeaders, ResponseHeaders, ResponseTrailers []string
	// Filter is the Telemetry's filter.expression (CEL), "" none.
	Filter string
}

// DefaultAccessLogText is istiod's EnvoyTextLogFormat: the text format of
// a file logger that sets none.
const DefaultAccessLogText = "[%START_TIME%] \"%REQ(:METHOD)% %REQ(X-ENVOY-ORIGINAL-PATH?:PATH)% " +
	"%PROTOCOL%\" %RESPONSE_CODE% %RESPONSE_FLAGS% " +
	"%RESPONSE_CODE_DETAILS% %CONNECTION_TERMINATION_DETAILS% " +
	"\"%UPSTREAM_TRANSPORT_FAILURE_REASON%\" %BYTES_RECEIVED% %BYTES_SENT% " +
	"%DURATION% %RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)% \"%REQ(X-FORWARDED-FOR)%\" " +
	"\"%REQ(USER-AGENT)%\" \"%REQ(X-REQUEST-ID)%\" \"%REQ(:AUTHORITY)%\" \"%UPSTREAM_HOST%\" " +
	"%UPSTREAM_CLUSTER_RAW% %UPSTREAM_LOCAL_ADDRESS% %DOWNSTREAM_LOCAL_ADDRESS% " +
	"%DOWNSTREAM_REMOTE_ADDRESS% %REQUESTED_SERVER_NAME% %ROUTE_NAME%\n"

// DefaultAccessLogJSON is istiod's EnvoyJSONLogFormatIstio: the JSON
// format of a JSON file logger that sets none.
const DefaultAccessLogJSON = `{"start_time":"%START_TIME%","route_name":"%ROUTE_NAME%",` +
	`"method":"%REQ(:METHOD)%","path":"%REQ(X-ENVOY-ORIGINAL-PATH?:PATH)%","protocol":"%PROTOCOL%",` +
	`"response_code":"%RESPONSE_CODE%","response_flags":"%RESPONSE_FLAGS%",` +
	`"response_code_details":"%RESPONSE_CODE_DETAILS%",` +
	`"connection_termination_details":"%CONNECTION_TERMINATION_DETAILS%",` +
	`"bytes_received":"%BYTES_RECEIVED%","bytes_sent":"%BYTES_SENT%","duration":"%DURATION%",` +
	`"upstream_service_time":"%RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)%",` +
	`"x_forwarded_for":"%REQ(X-FORWARDED-FOR)%","user_agent":"%REQ(USER-AGENT)%",` +
	`"request_id":"%REQ(X-REQUEST-ID)%","authority":"%REQ(:AUTHORITY)%",` +
	`"upstream_host":"%UPSTREAM_HOST%","upstream_cluster":"%UPSTREAM_CLUSTER_RAW%",` +
	`"upstream_local_address":"%UPSTREAM_LOCAL_ADDRESS%",` +
	`"downstream_local_address":"%DOWNSTREAM_LOCAL_ADDRESS%",` +
	`"downstream_remote_address":"%DOWNSTREAM_REMOTE_ADDRESS%",` +
	`"requested_server_name":"%REQUESTED_SERVER_NAME%",` +
	`"upstream_transport_failure_reason":"%UPSTREAM_TRANSPORT_FAILURE_REASON%"}`

// TelemetryProvider is one mesh config extensionProvider as Telemetry
// resources use it.
type TelemetryProvider struct {
	Name string
	// Prometheus: a metrics provider (istio.stats).
	Prometheus bool
	// Log is the access logger of an envoyFileAccessLog, envoyHttpAls,
	// envoyTcpAls or envoyOtelAls provider; nil for other kinds, which
	// write no access log in istiod either.
	Log *AccessLog
	// Service is the registry service of a gRPC or OpenTelemetry logger
	// ("namespace/host" or "host"); rules looks it up per config version
	// and leaves the logger out while the registry lacks it, as istiod's
	// LookupCluster failure does (no logger names a cluster no proxy has).
	Service string
	// Trace is the tracer of a zipkin, datadog, skywalking or
	// opentelemetry provider pilotfish generates; nil for other kinds
	// (a Telemetry naming it gives no tracing, as in istiod).
	Trace *TraceProvider
}

func (p *TelemetryProvider) hashInto(h *Hasher) {
	h.Str(p.Name)
	h.Bool(p.Prometheus)
	h.Bool(p.Log != nil)
	if p.Log != nil {
		p.Log.hashInto(h)
	}
	h.Str(p.Service)
	h.Bool(p.Trace != nil)
	if p.Trace != nil {
		p.Trace.hashInto(h)
	}
}

func (a *AccessLog) hashInto(h *Hasher) {
	h.U32(uint32(a.Kind))
	h.Str(a.Path)
	h.Str(a.JSON)
	h.Str(a.Text)
	h.Bool(a.OmitEmpty)
	h.Str(a.LogName)
	h.Str(a.Cluster)
	h.Str(a.Authority)
	h.Strs(a.FilterState)
	h.Strs(a.RequestHeaders)
	h.Strs(a.ResponseHeaders)
	h.Strs(a.ResponseTrailers)
	h.Str(a.Filter)
}

// accessLogs are side s's loggers for a chain (listener false) or for a
// listener (true: with the NR filter). nil when t logs nothing there.
func (t *Telemetry) accessLogs(s listenerSide, onListener bool) []*accesslog.AccessLog {
	ts := t.side(s)
	if ts == nil || len(ts.Logs) == 0 || onListener && t.NoListenerLogs {
		return nil
	}
	out := make([]*accesslog.AccessLog, 0, len(ts.Logs))
	for i := range ts.Logs {
		if al := ts.Logs[i].proto(onListener); al != nil {
			out = append(out, al)
		}
	}
	return out
}

var (
	alFilterNR = &accesslog.AccessLogFilter{FilterSpecifier: &accesslog.AccessLogFilter_ResponseFlagFilter{
		ResponseFlagFilter: &accesslog.ResponseFlagFilter{Flags: []string{"NR"}},
	}}
	alReqWithoutQuery = &core.TypedExtensionConfig{
		Name:        "envoy.formatter.req_without_query",
		TypedConfig: rtAny(&reqwithoutquery.ReqWithoutQuery{}),
	}
	// alStateToLog is istiod's envoyStateToLog: the peer metadata a gRPC
	// logger sends unless its provider names others.
	alStateToLog = []string{"upstream_peer", "downstream_peer"}
)

// proto is a's logger; nil if a's JSON does not parse (rules and engine
// parse it first, so it does).
func (a *AccessLog) proto(onListener bool) *accesslog.AccessLog {
	out := &accesslog.AccessLog{}
	switch a.Kind {
	case AccessLogFile:
		fl := &fileaccesslog.FileAccessLog{Path: a.Path}
		f := &core.SubstitutionFormatString{OmitEmptyValues: a.OmitEmpty}
		var reqWithoutQuery bool
		if a.JSON != "" {
			st := &structpb.Struct{}
			if protojson.Unmarshal([]byte(a.JSON), st) != nil {
				return nil
			}
			f.Format = &core.SubstitutionFormatString_JsonFormat{JsonFormat: st}
			f.JsonFormatOptions = &core.JsonFormatOptions{}
			for _, v := range st.GetFields() {
				reqWithoutQuery = reqWithoutQuery || strings.Contains(v.GetStringValue(), "%REQ_WITHOUT_QUERY")
			}
		} else {
			f.Format = &core.SubstitutionFormatString_TextFormatSource{TextFormatSource: &core.DataSource{
				Specifier: &core.DataSource_InlineString{InlineString: a.Text},
			}}
			reqWithoutQuery = strings.Contains(a.Text, "%REQ_WITHOUT_QUERY")
		}
		if reqWithoutQuery {
			f.Formatters = []*core.TypedExtensionConfig{alReqWithoutQuery}
		}
		fl.AccessLogFormat = &fileaccesslog.FileAccessLog_LogFormat{LogFormat: f}
		out.Name = "envoy.access_loggers.file"
		out.ConfigType = &accesslog.AccessLog_TypedConfig{TypedConfig: rtAny(fl)}
	case AccessLogHTTPGRPC:
		out.Name = "envoy.access_loggers.http_grpc"
		out.ConfigType = &accesslog.AccessLog_TypedConfig{TypedConfig: rtAny(&grpcaccesslog.HttpGrpcAccessLogConfig{
			CommonConfig:                    a.grpcCommon(),
			AdditionalRequestHeadersToLog:   a.RequestHeaders,
			AdditionalResponseHeadersToLog:  a.ResponseHeaders,
			AdditionalResponseTrailersToLog: a.ResponseTrailers,
		})}
	case AccessLogTCPGRPC:
		out.Name = "envoy.tcp_grpc_access_log"
		out.ConfigType = &accesslog.AccessLog_TypedConfig{TypedConfig: rtAny(&grpcaccesslog.TcpGrpcAccessLogConfig{
			CommonConfig: a.grpcCommon(),
		})}
	case AccessLogOTel:
		if !a.otelProto(out) { // accesslog_otel.go
			return nil
		}
	default:
		return nil
	}
	var filters []*accesslog.AccessLogFilter
	if onListener {
		filters = append(filters, alFilterNR)
	}
	if a.Filter != "" {
		filters = append(filters, &accesslog.AccessLogFilter{FilterSpecifier: &accesslog.AccessLogFilter_ExtensionFilter{
			ExtensionFilter: &accesslog.ExtensionFilter{
				Name:       "envoy.access_loggers.extension_filters.cel",
				ConfigType: &accesslog.ExtensionFilter_TypedConfig{TypedConfig: rtAny(&cel.ExpressionFilter{Expression: a.Filter})},
			},
		}})
	}
	switch len(filters) {
	case 1:
		out.Filter = filters[0]
	case 2:
		out.Filter = &accesslog.AccessLogFilter{FilterSpecifier: &accesslog.AccessLogFilter_AndFilter{
			AndFilter: &accesslog.AndFilter{Filters: filters},
		}}
	}
	return out
}

func (a *AccessLog) grpcCommon() *grpcaccesslog.CommonGrpcAccessLogConfig {
	state := a.FilterState
	if len(state) == 0 {
		state = alStateToLog
	}
	return &grpcaccesslog.CommonGrpcAccessLogConfig{
		LogName: a.LogName,
		GrpcService: &core.GrpcService{TargetSpecifier: &core.GrpcService_EnvoyGrpc_{
			EnvoyGrpc: &core.GrpcService_EnvoyGrpc{ClusterName: a.Cluster, Authority: a.Authority},
		}},
		TransportApiVersion:     core.ApiVersion_V3,
		FilterStateObjectsToLog: state,
	}
}

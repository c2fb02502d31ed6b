package engine

import (
	"slices"
	"strconv"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
	meshv1alpha1 "istio.io/api/mesh/v1alpha1"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/rules"
)

// applyAccessLogMesh copies into m what Telemetry resources and the
// mesh's default telemetry need from the mesh config (docs/telemetry.md):
// the extensionProviders as Telemetry names them, defaultProviders, the
// legacy accessLogFile logger, and m.Telemetry, the telemetry of a proxy
// no Telemetry resource applies to. m.Stats is set (applyTelemetryMesh).
func applyAccessLogMesh(m *encode.Mesh, cfg *meshv1alpha1.MeshConfig) {
	m.MeshAccessLog = nil
	if f := cfg.GetAccessLogFile(); f != "" {
		l := meshFileLog(f, cfg)
		m.MeshAccessLog = &l
	}
	m.TelemetryProviders = nil
	for _, ep := range cfg.GetExtensionProviders() {
		m.TelemetryProviders = append(m.TelemetryProviders, telemetryProvider(ep, cfg))
	}
	m.DefaultMetrics = slices.Clone(cfg.GetDefaultProviders().GetMetrics())
	m.DefaultLogging = slices.Clone(cfg.GetDefaultProviders().GetAccessLogging())
	m.NoListenerLogs = cfg.GetDisableEnvoyListenerLog()
	side := encode.TelemetrySide{Stats: m.Stats, Logs: rules.DefaultLogs(m, nil)}
	if !side.Stats && len(side.Logs) == 0 {
		m.Telemetry = nil
		return
	}
	m.Telemetry = &encode.Telemetry{Client: side, Server: side, NoListenerLogs: m.NoListenerLogs}
}

// meshFileLog is istiod's FileAccessLogFromMeshConfig: a file logger at
// path in the mesh's accessLogEncoding and accessLogFormat (a JSON format
// that does not parse is istiod's default JSON format, as in istiod).
func meshFileLog(path string, cfg *meshv1alpha1.MeshConfig) encode.AccessLog {
	l := encode.AccessLog{Kind: encode.AccessLogFile, Path: path}
	if cfg.GetAccessLogEncoding() == meshv1alpha1.MeshConfig_JSON {
		l.JSON = encode.DefaultAccessLogJSON
		if f := cfg.GetAccessLogFormat(); f != "" {
			if j, ok := canonicalJSON(f); ok {
				l.JSON = j
			}
		}
		return l
	}
	l.Text = textFormat(cfg.GetAccessLogFormat())
	return l
}

// textFormat is istiod's fileAccessLogFormat: its default, or f ending in
// a newline.
func textFormat(f string) string {
	switch {
	case f == "":
		return encode.DefaultAccessLogText
	case !strings.HasSuffix(f, "\n"):
		return f + "\n"
	}
	return f
}

// canonicalJSON parses f as a JSON object (as a protobuf Struct, unknown
// fields allowed as in istiod) and writes it back.
func canonicalJSON(f string) (string, bool) {
	st := &structpb.Struct{}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal([]byte(f), st); err != nil {
		return "", false
	}
	return structJSON(st), true
}

func structJSON(st *structpb.Struct) string {
	b, err := protojson.MarshalOptions{}.Marshal(st)
	if err != nil {
		return ""
	}
	return string(b)
}

// telemetryProvider is ep as Telemetry resources use it (istiod's
// telemetryAccessLog and buildHTTPTelemetryFilter).
func telemetryProvider(ep *meshv1alpha1.MeshConfig_ExtensionProvider, cfg *meshv1alpha1.MeshConfig) encode.TelemetryProvider {
	p := encode.TelemetryProvider{Name: ep.GetName()}
	switch k := ep.GetProvider().(type) {
	case *meshv1alpha1.MeshConfig_ExtensionProvider_Prometheus:
		p.Prometheus = true
	case *meshv1alpha1.MeshConfig_ExtensionProvider_EnvoyFileAccessLog:
		l := fileProviderLog(ep.GetName(), k.EnvoyFileAccessLog, cfg)
		p.Log = &l
	case *meshv1alpha1.MeshConfig_ExtensionProvider_EnvoyHttpAls:
		a := k.EnvoyHttpAls
		l := grpcProviderLog(encode.AccessLogHTTPGRPC, a.GetService(), a.GetPort(), a.GetLogName(), "http_envoy_accesslog", a.GetFilterStateObjectsToLog())
		l.RequestHeaders = a.GetAdditionalRequestHeadersToLog()
		l.ResponseHeaders = a.GetAdditionalResponseHeadersToLog()
		l.ResponseTrailers = a.GetAdditionalResponseTrailersToLog()
		p.Log, p.Service = &l, a.GetService()
	case *meshv1alpha1.MeshConfig_ExtensionProvider_EnvoyTcpAls:
		a := k.EnvoyTcpAls
		l := grpcProviderLog(encode.AccessLogTCPGRPC, a.GetService(), a.GetPort(), a.GetLogName(), "tcp_envoy_accesslog", a.GetFilterStateObjectsToLog())
		p.Log, p.Service = &l, a.GetService()
	case *meshv1alpha1.MeshConfig_ExtensionProvider_EnvoyOtelAls:
		a := k.EnvoyOtelAls
		l := grpcProviderLog(encode.AccessLogOTel, a.GetService(), a.GetPort(), a.GetLogName(), "otel_envoy_accesslog", nil)
		// istiod's openTelemetryLog: the text as written (no newline
		// added), its default text format when unset; labels as attributes.
		l.Text = encode.DefaultAccessLogText
		if t := a.GetLogFormat().GetText(); t != "" {
			l.Text = t
		}
		if labels := a.GetLogFormat().GetLabels(); labels != nil {
			l.JSON = structJSON(labels)
		}
		p.Log, p.Service = &l, a.GetService()
	}
	// A tracing kind pilotfish generates; one whose settings it cannot
	// generate is refused when it is the default provider
	// (applyTracingMesh) and gives no tracing when a Telemetry names it.
	if tp, err := traceProvider(ep); err == nil {
		p.Trace = tp
	}
	return p
}

// fileProviderLog is an envoyFileAccessLog provider's logger. istiod's
// built-in provider "envoy" without a format of its own takes the mesh's
// accessLogFormat and accessLogEncoding.
func fileProviderLog(name string, f *meshv1alpha1.MeshConfig_ExtensionProvider_EnvoyFileAccessLogProvider, cfg *meshv1alpha1.MeshConfig) encode.AccessLog {
	if name == "envoy" && f.GetLogFormat() == nil && !f.GetOmitEmptyValues() {
		return meshFileLog(f.GetPath(), cfg)
	}
	l := encode.AccessLog{Kind: encode.AccessLogFile, Path: f.GetPath(), OmitEmpty: f.GetOmitEmptyValues()}
	if l.Path == "" {
		l.Path = "/dev/stdout"
	}
	if labels, ok := f.GetLogFormat().GetLogFormat().(*meshv1alpha1.MeshConfig_ExtensionProvider_EnvoyFileAccessLogProvider_LogFormat_Labels); ok {
		l.JSON = encode.DefaultAccessLogJSON
		if len(labels.Labels.GetFields()) > 0 {
			l.JSON = structJSON(labels.Labels)
		}
		return l
	}
	l.Text = textFormat(f.GetLogFormat().GetText())
	return l
}

// grpcProviderLog is an envoyHttpAls or envoyTcpAls provider's logger.
// Its service is "namespace/host" or "host", as istiod's LookupCluster
// reads it; the cluster is the host's outbound cluster on port. The
// provider keeps the service: rules looks it up per config version and
// leaves the logger out while the registry lacks it (rules/telemetry_logs.go).
func grpcProviderLog(kind encode.AccessLogKind, service string, port uint32, logName, defName string, state []string) encode.AccessLog {
	host := service
	if _, h, ok := strings.Cut(service, "/"); ok {
		host = h
	}
	if logName == "" {
		logName = defName
	}
	return encode.AccessLog{
		Kind: kind, LogName: logName, FilterState: slices.Clone(state),
		Cluster: "outbound|" + strconv.FormatUint(uint64(port), 10) + "||" + host, Authority: host,
	}
}

package ingest

// telemetryLedger classifies Telemetry's fields (telemetry.istio.io).
const (
	telemetryTest = "engine.TestTelemetryAccessLogMatchesIstiod"
	// tracingTest compares every HCM's tracing with istiod's for
	// Telemetry tracing at every level (case telemetry-tracing).
	tracingTest = "engine.TestTelemetryTracingMatchesIstiod"
	notInCase   = "copied into the logger as istiod does; the istiod case does not set it"
	alsService  = "\"namespace/host\" or \"host\" names the outbound cluster and authority as in istiod; unlike istiod, a service the registry lacks (or a host in several namespaces) is not refused"
)

// partialNote is partial, proven by the Telemetry comparison.
func partialNote(caveat string) LedgerEntry { return partial(telemetryTest, caveat) }

var telemetryLedger = ledgerTable{
	"istio.telemetry.v1alpha1.Telemetry.selector": honoured(telemetryTest),
	"istio.telemetry.v1alpha1.Telemetry.targetRef": partial("ingest.TestTelemetryRow",
		"a Gateway API gateway's Telemetry by targetRef, as AuthorizationPolicy's (rules.attaches); not compared with istiod"),
	"istio.telemetry.v1alpha1.Telemetry.targetRefs": partial("ingest.TestTelemetryRow",
		"a Gateway API gateway's Telemetry by targetRefs, as AuthorizationPolicy's (rules.attaches); not compared with istiod"),
	"istio.telemetry.v1alpha1.Telemetry.tracing":                         honoured(tracingTest),
	"istio.telemetry.v1alpha1.Tracing.match":                             honoured(tracingTest),
	"istio.telemetry.v1alpha1.Tracing.providers":                         honoured(tracingTest),
	"istio.telemetry.v1alpha1.Tracing.random_sampling_percentage":        honoured(tracingTest),
	"istio.telemetry.v1alpha1.Tracing.disable_span_reporting":            honoured(tracingTest),
	"istio.telemetry.v1alpha1.Tracing.custom_tags":                       honoured(tracingTest),
	"istio.telemetry.v1alpha1.Tracing.use_request_id_for_trace_sampling": honoured(tracingTest),
	"istio.telemetry.v1alpha1.Tracing.enable_istio_tags":                 honoured(tracingTest),
	"istio.telemetry.v1alpha1.Tracing.disable_context_propagation":       honoured(tracingTest),
	"istio.telemetry.v1alpha1.Tracing.TracingSelector.mode":              honoured(tracingTest),
	"istio.telemetry.v1alpha1.Tracing.CustomTag.literal":                 honoured(tracingTest),
	"istio.telemetry.v1alpha1.Tracing.CustomTag.environment":             honoured(tracingTest),
	"istio.telemetry.v1alpha1.Tracing.CustomTag.header":                  honoured(tracingTest),
	"istio.telemetry.v1alpha1.Tracing.CustomTag.formatter":               honouredNote("rules.TestTelemetryTracingFormatterTag", "proxies of Istio 1.29 and later only, as istiod"),
	"istio.telemetry.v1alpha1.Tracing.Literal.value":                     honoured(tracingTest),
	"istio.telemetry.v1alpha1.Tracing.Environment.name":                  honoured(tracingTest),
	"istio.telemetry.v1alpha1.Tracing.Environment.default_value":         honoured(tracingTest),
	"istio.telemetry.v1alpha1.Tracing.RequestHeader.name":                honoured(tracingTest),
	"istio.telemetry.v1alpha1.Tracing.RequestHeader.default_value":       honoured(tracingTest),
	"istio.telemetry.v1alpha1.Tracing.Formatter.value":                   honouredNote("rules.TestTelemetryTracingFormatterTag", "proxies of Istio 1.29 and later only, as istiod"),
	"istio.telemetry.v1alpha1.Telemetry.metrics":                         honoured(telemetryTest),
	"istio.telemetry.v1alpha1.Telemetry.access_logging":                  honoured(telemetryTest),
	"istio.telemetry.v1alpha1.Metrics.providers":                         honoured(telemetryTest),
	"istio.telemetry.v1alpha1.Metrics.overrides":                         honoured(telemetryTest),
	"istio.telemetry.v1alpha1.Metrics.reporting_interval":                honoured(telemetryTest),
	"istio.telemetry.v1alpha1.AccessLogging.match":                       honoured(telemetryTest),
	"istio.telemetry.v1alpha1.AccessLogging.providers":                   honoured(telemetryTest),
	"istio.telemetry.v1alpha1.AccessLogging.disabled":                    honoured(telemetryTest),
	"istio.telemetry.v1alpha1.AccessLogging.filter":                      honoured(telemetryTest),

	// The mesh config's access log providers, as Telemetry names them
	// (engine/mesh_accesslog.go).
	"istio.mesh.v1alpha1.MeshConfig.ExtensionProvider.EnvoyFileAccessLogProvider.path":                                honoured(telemetryTest),
	"istio.mesh.v1alpha1.MeshConfig.ExtensionProvider.EnvoyFileAccessLogProvider.log_format":                          honoured(telemetryTest),
	"istio.mesh.v1alpha1.MeshConfig.ExtensionProvider.EnvoyFileAccessLogProvider.omit_empty_values":                   honoured("engine.TestTelemetryOverridesMatchesIstiod"),
	"istio.mesh.v1alpha1.MeshConfig.ExtensionProvider.EnvoyHttpGrpcV3LogProvider.service":                             partialNote(alsService),
	"istio.mesh.v1alpha1.MeshConfig.ExtensionProvider.EnvoyHttpGrpcV3LogProvider.port":                                honoured(telemetryTest),
	"istio.mesh.v1alpha1.MeshConfig.ExtensionProvider.EnvoyHttpGrpcV3LogProvider.log_name":                            honoured(telemetryTest),
	"istio.mesh.v1alpha1.MeshConfig.ExtensionProvider.EnvoyHttpGrpcV3LogProvider.filter_state_objects_to_log":         partial(telemetryTest, notInCase),
	"istio.mesh.v1alpha1.MeshConfig.ExtensionProvider.EnvoyHttpGrpcV3LogProvider.additional_request_headers_to_log":   partial(telemetryTest, notInCase),
	"istio.mesh.v1alpha1.MeshConfig.ExtensionProvider.EnvoyHttpGrpcV3LogProvider.additional_response_headers_to_log":  partial(telemetryTest, notInCase),
	"istio.mesh.v1alpha1.MeshConfig.ExtensionProvider.EnvoyHttpGrpcV3LogProvider.additional_response_trailers_to_log": partial(telemetryTest, notInCase),
	"istio.mesh.v1alpha1.MeshConfig.ExtensionProvider.EnvoyTcpGrpcV3LogProvider.service":                              partialNote(alsService),
	"istio.mesh.v1alpha1.MeshConfig.ExtensionProvider.EnvoyTcpGrpcV3LogProvider.port":                                 honoured(telemetryTest),
	"istio.mesh.v1alpha1.MeshConfig.ExtensionProvider.EnvoyTcpGrpcV3LogProvider.log_name":                             honoured(telemetryTest),
	"istio.mesh.v1alpha1.MeshConfig.ExtensionProvider.EnvoyTcpGrpcV3LogProvider.filter_state_objects_to_log":          partial(telemetryTest, notInCase),
	"istio.telemetry.v1alpha1.ProviderRef.name":                                                                       honoured(telemetryTest),
	"istio.telemetry.v1alpha1.MetricsOverrides.match":                                                                 honoured(telemetryTest),
	"istio.telemetry.v1alpha1.MetricsOverrides.disabled":                                                              honoured(telemetryTest),
	"istio.telemetry.v1alpha1.MetricsOverrides.tag_overrides":                                                         honoured(telemetryTest),
	"istio.telemetry.v1alpha1.AccessLogging.LogSelector.mode":                                                         honoured(telemetryTest),
	"istio.telemetry.v1alpha1.AccessLogging.Filter.expression":                                                        honoured(telemetryTest),
	"istio.mesh.v1alpha1.MeshConfig.ExtensionProvider.EnvoyFileAccessLogProvider.LogFormat.text":                      honoured("engine.TestTelemetryOverridesMatchesIstiod"),
	"istio.mesh.v1alpha1.MeshConfig.ExtensionProvider.EnvoyFileAccessLogProvider.LogFormat.labels":                    honoured(telemetryTest),
	"istio.telemetry.v1alpha1.MetricSelector.metric":                                                                  honoured(telemetryTest),
	"istio.telemetry.v1alpha1.MetricSelector.custom_metric":                                                           honoured(telemetryTest),
	"istio.telemetry.v1alpha1.MetricSelector.mode":                                                                    honoured(telemetryTest),
	"istio.telemetry.v1alpha1.MetricsOverrides.TagOverride.operation":                                                 honoured(telemetryTest),
	"istio.telemetry.v1alpha1.MetricsOverrides.TagOverride.value":                                                     honoured(telemetryTest),
	"istio.mesh.v1alpha1.MeshConfig.ExtensionProvider.EnvoyOpenTelemetryLogProvider.service":                          partialNote(alsService),
	"istio.mesh.v1alpha1.MeshConfig.ExtensionProvider.EnvoyOpenTelemetryLogProvider.port":                             honoured(telemetryTest),
	"istio.mesh.v1alpha1.MeshConfig.ExtensionProvider.EnvoyOpenTelemetryLogProvider.log_name":                         partial(telemetryTest, notInCase),
	"istio.mesh.v1alpha1.MeshConfig.ExtensionProvider.EnvoyOpenTelemetryLogProvider.log_format":                       honoured(telemetryTest),
	"istio.mesh.v1alpha1.MeshConfig.ExtensionProvider.EnvoyOpenTelemetryLogProvider.LogFormat.text":                   honoured(telemetryTest),
	"istio.mesh.v1alpha1.MeshConfig.ExtensionProvider.EnvoyOpenTelemetryLogProvider.LogFormat.labels":                 honoured(telemetryTest),
}

package ingest

import (
	"bytes"

	yaml "go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	meshv1 "istio.io/api/mesh/v1alpha1"
)

// The mesh config (ConfigMap istio: keys mesh and meshNetworks) is read
// outside of objects, so its messages are ledger roots of their own: two
// ledger-only kinds after the object kinds, with the same tables, checks,
// warnings and docs as the Istio kinds.
const (
	kindMeshConfig Kind = numKinds + iota
	kindMeshNetworks
	numLedgerKinds
)

// MeshConfigKind is the kind name mesh config problems carry (in
// /debug/config_errors and the unsupported-fields gauge).
const MeshConfigKind = "MeshConfig"

// ledgerKindName names a ledger kind (an object kind, or a mesh root).
func ledgerKindName(k Kind) string {
	switch k {
	case kindMeshConfig:
		return MeshConfigKind
	case kindMeshNetworks:
		return "MeshNetworks"
	}
	return k.String()
}

// ledgerKindGroup is, for docs/compatibility.md, where a kind comes from.
func ledgerKindGroup(k Kind) string {
	switch k {
	case kindMeshConfig:
		return "ConfigMap istio, key mesh (or --mesh-config)"
	case kindMeshNetworks:
		return "ConfigMap istio, key meshNetworks"
	}
	return kinds[k].group
}

// ledgerTop is the first step of a kind's field paths.
func ledgerTop(k Kind) string {
	switch k {
	case kindMeshConfig:
		return "mesh"
	case kindMeshNetworks:
		return "meshNetworks"
	}
	return "spec"
}

func meshRootDescriptor(k Kind) protoreflect.MessageDescriptor {
	if k == kindMeshNetworks {
		return (&meshv1.MeshNetworks{}).ProtoReflect().Descriptor()
	}
	return (&meshv1.MeshConfig{}).ProtoReflect().Descriptor()
}

const (
	meshAccessLogTest = "engine.TestMeshAccessLogMatchesIstiod"
	meshTelemetry     = "telemetry settings are not implemented by pilotfish yet (issue 20)"
	meshAmbient       = "ambient mode (ztunnel, waypoints, HBONE) is not implemented by pilotfish"
	meshNotYet        = "not implemented by pilotfish yet"
	meshTested        = "main.TestMeshConfigFieldsServed"
	meshStatsTest     = "engine.TestDefaultTelemetryMatchesIstiod"
	// meshTracingTest compares every tracing-* istiodref case with istiod.
	meshTracingTest = "engine.TestTracingMatchesIstiod"
	// meshRefused: what pilotfish does when a mesh config sets a field it
	// refuses (engine.ErrUnsupportedMeshSetting) rather than ignore.
	meshRefused = "the mesh config is refused (the last good one stays; see /debug/config_errors)"
)

// meshLedger classifies the mesh config's fields.
var meshLedger = ledgerTable{
	"istio.mesh.v1alpha1.MeshConfig.proxy_listen_port":               partial("engine.TestApplyListenerMeshRefuses", "only istiod's 15001: another port is refused (the mesh config is not applied), as injection's iptables rules and pilotfish's listeners use 15001"),
	"istio.mesh.v1alpha1.MeshConfig.proxy_inbound_listen_port":       partial("engine.TestApplyListenerMeshRefuses", "only istiod's 15006: another port is refused (the mesh config is not applied)"),
	"istio.mesh.v1alpha1.MeshConfig.proxy_http_port":                 partial("engine.TestApplyListenerMeshRefuses", "only 0: pilotfish builds no HTTP proxy listener, so another port is refused (the mesh config is not applied)"),
	"istio.mesh.v1alpha1.MeshConfig.connect_timeout":                 honoured("engine.TestMeshClusterSettingsMatchIstiod"),
	"istio.mesh.v1alpha1.MeshConfig.hbone_idle_timeout":              unsupported(meshAmbient),
	"istio.mesh.v1alpha1.MeshConfig.protocol_detection_timeout":      honoured("rules.TestMeshListenerMatchesIstiod"),
	"istio.mesh.v1alpha1.MeshConfig.tcp_keepalive":                   honoured("engine.TestMeshClusterSettingsMatchIstiod").whole(),
	"istio.mesh.v1alpha1.MeshConfig.ingress_class":                   unsupported("Kubernetes Ingress resources are not read by pilotfish"),
	"istio.mesh.v1alpha1.MeshConfig.ingress_service":                 unsupported("Kubernetes Ingress resources are not read by pilotfish"),
	"istio.mesh.v1alpha1.MeshConfig.ingress_controller_mode":         unsupported("Kubernetes Ingress resources are not read by pilotfish"),
	"istio.mesh.v1alpha1.MeshConfig.ingress_selector":                unsupported("Kubernetes Ingress resources are not read by pilotfish"),
	"istio.mesh.v1alpha1.MeshConfig.enable_tracing":                  honouredNote(meshTracingTest, "without defaultProviders.tracing, every sidecar and gateway HCM gets istiod's tracing without a provider (the bootstrap's tracer); engine.TestTracingMeshToggleReclassifies"),
	"istio.mesh.v1alpha1.MeshConfig.access_log_file":                 honouredNote(meshAccessLogTest, "the file logger on every HCM and tcp_proxy, and with the NR filter on virtualOutbound, virtualInbound and gateway listeners, where no Telemetry configures access logging"),
	"istio.mesh.v1alpha1.MeshConfig.access_log_format":               honoured(meshAccessLogTest),
	"istio.mesh.v1alpha1.MeshConfig.access_log_encoding":             honoured(meshAccessLogTest),
	"istio.mesh.v1alpha1.MeshConfig.enable_envoy_access_log_service": unsupported(meshTelemetry),
	"istio.mesh.v1alpha1.MeshConfig.disable_envoy_listener_log":      honoured("engine.TestMeshListenerLogDisabled"),
	"istio.mesh.v1alpha1.MeshConfig.default_config": partial("inject.TestCorpusMatchesIstioctl",
		"given to proxies by sidecar injection (PROXY_CONFIG, which istio-agent applies), as istiod's injector does; "+
			"the control plane reads a proxy's settings from its node metadata; tracing's sampling, customTags, "+
			"maxPathTagLength and enableIstioTags shape every HCM's tracing as istiod's ("+meshTracingTest+"), from a proxy's "+
			"PROXY_CONFIG when it sends one, else from the mesh's defaultConfig (case tracing-proxyconfig)").whole(),
	"istio.mesh.v1alpha1.MeshConfig.outbound_traffic_policy":            honoured(meshTested),
	"istio.mesh.v1alpha1.MeshConfig.OutboundTrafficPolicy.mode":         honoured("engine.TestMeshOutboundTrafficPolicy"),
	"istio.mesh.v1alpha1.MeshConfig.OutboundTrafficPolicy.tls":          unsupported(meshNotYet),
	"istio.mesh.v1alpha1.MeshConfig.inbound_traffic_policy":             honoured("rules.TestMeshListenerMatchesIstiod"),
	"istio.mesh.v1alpha1.MeshConfig.config_sources":                     unsupported("pilotfish reads the API server and --config-dir, never MCP or file config sources"),
	"istio.mesh.v1alpha1.MeshConfig.enable_auto_mtls":                   honoured("engine.TestMeshLocalityDistributeMatchesIstiod"),
	"istio.mesh.v1alpha1.MeshConfig.trust_domain":                       honoured(meshTested),
	"istio.mesh.v1alpha1.MeshConfig.trust_domain_aliases":               honoured("rules.TestTrustDomainAliasesMatchIstiod"),
	"istio.mesh.v1alpha1.MeshConfig.ca_certificates":                    partial("engine.TestMeshTLSMatchesIstiod", "only trustDomains is used (identities of those trust domains are accepted and expected, as istiod); the certificates themselves are for the agents").whole(),
	"istio.mesh.v1alpha1.MeshConfig.default_service_export_to":          honoured("rules.TestMeshExportToMatchesIstiod"),
	"istio.mesh.v1alpha1.MeshConfig.default_virtual_service_export_to":  honoured("rules.TestMeshExportToMatchesIstiod"),
	"istio.mesh.v1alpha1.MeshConfig.default_destination_rule_export_to": honoured("rules.TestMeshExportToMatchesIstiod"),
	"istio.mesh.v1alpha1.MeshConfig.root_namespace":                     honoured(meshTested),
	"istio.mesh.v1alpha1.MeshConfig.locality_lb_setting":                partial("engine.TestMeshLocalityDistributeMatchesIstiod", "failoverPriority at mesh level is refused (the mesh config is not applied); enabled, distribute and failover as istiod (also engine.TestMeshLocalityDisabledMatchesIstiod)").whole(),
	"istio.mesh.v1alpha1.MeshConfig.zone_aware_lb_setting":              unsupportedDoes("not implemented by pilotfish", meshRefused),
	"istio.mesh.v1alpha1.MeshConfig.dns_refresh_rate":                   honoured("engine.TestMeshClusterSettingsMatchIstiod"),
	"istio.mesh.v1alpha1.MeshConfig.h2_upgrade_policy":                  honoured("engine.TestMeshClusterSettingsMatchIstiod"),
	"istio.mesh.v1alpha1.MeshConfig.inbound_cluster_stat_name":          unsupportedDoes("custom stat names (telemetry) are not implemented yet (issue 20)", meshRefused),
	"istio.mesh.v1alpha1.MeshConfig.outbound_cluster_stat_name":         unsupportedDoes("custom stat names (telemetry) are not implemented yet (issue 20)", meshRefused),
	"istio.mesh.v1alpha1.MeshConfig.certificates":                       unsupported("deprecated in Istio; pilotfish's CA does not write DNS certificates"),
	"istio.mesh.v1alpha1.MeshConfig.service_settings":                   honouredNote("engine.TestApplyClusterMesh", "hosts validated; clusterLocal changes nothing in a one-cluster mesh, as in istiod").whole(),
	"istio.mesh.v1alpha1.MeshConfig.service_scope_configs":              unsupported(meshAmbient),
	"istio.mesh.v1alpha1.MeshConfig.enable_prometheus_merge":            honouredNote("inject.TestCorpusMatchesIstioctl", "read by sidecar injection (prometheus.io annotations merged into the agent's)"),
	"istio.mesh.v1alpha1.MeshConfig.verify_certificate_at_client":       unsupported("deprecated in Istio"),
	"istio.mesh.v1alpha1.MeshConfig.ca":                                 unsupported("pilotfish signs with its own CA (--ca-*), never an external one named here"),
	"istio.mesh.v1alpha1.MeshConfig.extension_providers":                honoured(meshStatsTest),
	"istio.mesh.v1alpha1.MeshConfig.ExtensionProvider.name":             honoured(meshStatsTest),
	"istio.mesh.v1alpha1.MeshConfig.ExtensionProvider.prometheus":       honouredNote(meshStatsTest, "resolves defaultProviders.metrics (istiod's built-in prometheus, stackdriver and envoy providers included)"),
	"istio.mesh.v1alpha1.MeshConfig.ExtensionProvider.zipkin":           honouredNote(meshTracingTest, "as defaultProviders.tracing or named by a Telemetry's tracing (engine.TestTelemetryTracingMatchesIstiod): istiod's zipkin tracer (HttpService for proxies of 1.29+, the collector fields before)").whole(),
	"istio.mesh.v1alpha1.MeshConfig.ExtensionProvider.lightstep":        unsupported("deprecated in Istio, whose istiod generates no tracer for it: as a default tracing provider it leaves HCMs without tracing"),
	"istio.mesh.v1alpha1.MeshConfig.ExtensionProvider.datadog":          honouredNote(meshTracingTest, "as defaultProviders.tracing or named by a Telemetry's tracing; the span service name is the node's cluster (engine.TestTracingDatadogServiceName)").whole(),
	"istio.mesh.v1alpha1.MeshConfig.ExtensionProvider.stackdriver":      unsupported(meshTelemetry),
	"istio.mesh.v1alpha1.MeshConfig.ExtensionProvider.opencensus":       unsupported(meshTelemetry),
	"istio.mesh.v1alpha1.MeshConfig.ExtensionProvider.skywalking":       honouredNote(meshTracingTest, "as defaultProviders.tracing or named by a Telemetry's tracing (accessToken is not used, as in istiod)").whole(),
	"istio.mesh.v1alpha1.MeshConfig.ExtensionProvider.opentelemetry": partial(meshTracingTest,
		"as defaultProviders.tracing or named by a Telemetry's tracing (engine.TestTelemetryTracingMatchesIstiod): http and grpc exporters, headers, initialMetadata, timeouts, resource detectors as istiod; "+
			"dynatraceSampler and serviceAttributeEnrichment OTEL_SEMANTIC_CONVENTIONS on the default tracing provider are refused (the mesh config is not applied), "+
			"and on a provider only a Telemetry names give that Telemetry no tracing").whole().warnWhen(valueWarning{
		applies: otelUnsupportedSetting,
		when:    "dynatraceSampler or serviceAttributeEnrichment OTEL_SEMANTIC_CONVENTIONS is set",
		why:     "dynatraceSampler, OTEL_SEMANTIC_CONVENTIONS",
		effect:  "a Telemetry naming this provider gets no tracing from it (as the default tracing provider: the mesh config is refused)",
	}),
	"istio.mesh.v1alpha1.MeshConfig.ExtensionProvider.envoy_file_access_log": honoured("engine.TestTelemetryAccessLogMatchesIstiod"),
	"istio.mesh.v1alpha1.MeshConfig.ExtensionProvider.envoy_http_als":        honoured("engine.TestTelemetryAccessLogMatchesIstiod"),
	"istio.mesh.v1alpha1.MeshConfig.ExtensionProvider.envoy_tcp_als":         honoured("engine.TestTelemetryAccessLogMatchesIstiod"),
	"istio.mesh.v1alpha1.MeshConfig.ExtensionProvider.envoy_otel_als":        honoured("engine.TestTelemetryAccessLogMatchesIstiod"),
	"istio.mesh.v1alpha1.MeshConfig.ExtensionProvider.sds":                   unsupported("pilotfish's SDS serves its CA's certificates and Kubernetes Secrets only"),
	"istio.mesh.v1alpha1.MeshConfig.ExtensionProvider.envoy_ext_authz_http":  honouredNote("engine.TestExtAuthzMatchesIstiod", "AuthorizationPolicy CUSTOM as istiod (also engine.TestApplyExtAuthzMesh)").whole(),
	"istio.mesh.v1alpha1.MeshConfig.ExtensionProvider.envoy_ext_authz_grpc":  honouredNote("engine.TestExtAuthzMatchesIstiod", "AuthorizationPolicy CUSTOM as istiod (also engine.TestApplyExtAuthzMesh)").whole(),
	"istio.mesh.v1alpha1.MeshConfig.default_providers":                       partial(meshStatsTest, "metrics and tracing"),
	"istio.mesh.v1alpha1.MeshConfig.DefaultProviders.metrics": partial(meshStatsTest,
		"a prometheus provider puts istio.stats on every sidecar and gateway chain as istiod does without Telemetry resources (engine.TestApplyTelemetryMesh); another kind adds nothing, as in istiod; Telemetry resources, which change this in istiod, are not read yet (issue 20); two names of prometheus providers are refused (the mesh config is not applied), istiod would count every metric twice"),
	"istio.mesh.v1alpha1.MeshConfig.DefaultProviders.tracing": honouredNote(meshTracingTest,
		"the first name's provider (zipkin, opentelemetry, datadog, skywalking) traces every sidecar and gateway HCM as istiod does without Telemetry resources; "+
			"its service is looked up in the registry at every push (engine.TestTracingProviderServicePushes); a missing provider or service leaves HCMs without tracing, as in istiod"),
	"istio.mesh.v1alpha1.MeshConfig.DefaultProviders.access_logging": partial("engine.TestApplyAccessLogMesh", "the default providers' loggers by provider name, accessLogFile when they give none, as istiod's AccessLogging; not compared with istiod"),
	"istio.mesh.v1alpha1.MeshConfig.discovery_selectors": honouredNote("ingest.TestDiscoverySelectorsMatchIstiod",
		"limits the namespaces read from the API server, live (cmd/pilotfish.TestMeshDiscoverySelectors); the config directory is not filtered").whole(),
	"istio.mesh.v1alpha1.MeshConfig.path_normalization":                   honoured("rules.TestMeshListenerMatchesIstiod"),
	"istio.mesh.v1alpha1.MeshConfig.ProxyPathNormalization.normalization": honoured("rules.TestMeshListenerDecodeMatchesIstiod"),
	"istio.mesh.v1alpha1.MeshConfig.InboundTrafficPolicy.mode":            honoured("rules.TestMeshListenerMatchesIstiod"),
	"istio.mesh.v1alpha1.MeshConfig.default_http_retry_policy":            honoured("rules.TestMeshListenerMatchesIstiod").whole(),
	"istio.mesh.v1alpha1.MeshConfig.mesh_mTLS":                            honoured("engine.TestMeshTLSMatchesIstiod").whole(),
	"istio.mesh.v1alpha1.MeshConfig.tls_defaults":                         honoured("engine.TestMeshTLSMatchesIstiod").whole(),
	"istio.mesh.v1alpha1.MeshConfig.default_traffic_policy":               honoured("engine.TestMeshDefaultTrafficPolicyMatchesIstiod").whole(),
	"istio.mesh.v1alpha1.MeshConfig.service_entry_visibility":             partial("engine.TestApplyListenerMeshRefuses", "applyToSidecars: true is refused (its policies are not implemented, and ignoring them would widen visibility); otherwise it concerns ambient only and changes nothing for sidecars").whole(),

	"istio.mesh.v1alpha1.MeshNetworks.networks": unsupported("multi-network meshes are not supported by pilotfish (one network)"),
}

// whole makes a supported entry stand for its message's whole subtree:
// its fields are not classified one by one (the note says why).
func (e LedgerEntry) whole() LedgerEntry {
	e.subtree = true
	return e
}

// MeshUnsupported returns the ledger's warnings for a mesh config: one
// per unsupported field the document sets (only what it sets, not
// istiod's defaults, which Parse applies), as *Error of kind MeshConfig
// naming the field ("mesh.localityLbSetting") and its line in file.
// data is the mesh document (the `mesh` key's YAML, for the lines), bare
// the fields it sets alone (meshconfig.Bare).
func MeshUnsupported(file string, data []byte, bare *meshv1.MeshConfig) []error {
	var doc yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(data)).Decode(&doc); err != nil || len(doc.Content) == 0 || bare == nil {
		return nil
	}
	root := &yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{
		{Kind: yaml.ScalarNode, Value: "mesh", Line: 1}, doc.Content[0]}}
	r := reporter{file: file, kind: MeshConfigKind, docLine: 1, root: root}
	w := ledgerWalker{kl: compiledLedger()[kindMeshConfig], r: &r, top: "mesh"}
	w.message(proto.Message(bare).ProtoReflect())
	return r.errs
}

// MeshProblem is a problem of a mesh config as an *Error of kind
// MeshConfig, for /debug/config_errors: file names where the document
// came from ("ConfigMap istio-system/istio key mesh", a file path), field
// its path below the mesh key; warning marks what was ignored (an unknown
// field, meshNetworks' networks) rather than refused.
func MeshProblem(file string, line int, field, msg string, warning bool) error {
	cause := ErrInvalid
	if warning {
		cause = ErrIgnored
	}
	e := &Error{Pos: Position{File: file, Line: line}, Kind: MeshConfigKind, Message: msg, cause: cause}
	if field != "" {
		e.Field = "mesh." + field
	}
	return e
}

// otelUnsupportedSetting reports whether an opentelemetry extension
// provider sets what pilotfish's tracer does not generate (the engine
// refuses the provider: engine/mesh_tracing.go's traceProvider).
func otelUnsupportedSetting(v protoreflect.Value) bool {
	o, ok := v.Message().Interface().(*meshv1.MeshConfig_ExtensionProvider_OpenTelemetryTracingProvider)
	return ok && (o.GetSampling() != nil ||
		o.GetServiceAttributeEnrichment() == meshv1.MeshConfig_ExtensionProvider_OTEL_SEMANTIC_CONVENTIONS)
}

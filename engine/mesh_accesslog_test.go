package engine

import (
	"testing"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/inject"
)

// TestApplyAccessLogMesh: the mesh config's access log settings as istiod
// reads them: the default text format (a newline added to a custom one),
// JSON (istiod's default labels when the format does not parse), the
// built-in envoy provider taking the mesh's format, gRPC providers'
// clusters from "namespace/host" or "host", defaultProviders.accessLogging
// before accessLogFile, and OpenTelemetry's defaults.
func TestApplyAccessLogMesh(t *testing.T) {
	mesh := func(y string) *encode.Mesh {
		t.Helper()
		cfg, err := inject.ParseMesh([]byte(y))
		if err != nil {
			t.Fatal(err)
		}
		m, err := MeshSettings{Config: cfg}.Mesh()
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	if m := mesh("rootNamespace: istio-system\n"); m.MeshAccessLog != nil || m.Telemetry != nil {
		t.Fatalf("no accessLogFile: logger %+v, telemetry %+v", m.MeshAccessLog, m.Telemetry)
	}
	m := mesh("accessLogFile: /dev/stdout\n")
	if l := m.MeshAccessLog; l == nil || l.Text != encode.DefaultAccessLogText || l.JSON != "" || l.Path != "/dev/stdout" {
		t.Fatalf("default text logger: %+v", l)
	}
	if m.Telemetry == nil || len(m.Telemetry.Client.Logs) != 1 || len(m.Telemetry.Server.Logs) != 1 || m.Telemetry.Client.Stats {
		t.Fatalf("mesh telemetry: %+v", m.Telemetry)
	}
	if l := mesh("accessLogFile: /tmp/a\naccessLogFormat: '%START_TIME%'\n").MeshAccessLog; l.Text != "%START_TIME%\n" {
		t.Errorf("custom text %q, want a newline added", l.Text)
	}
	if l := mesh("accessLogFile: /tmp/a\naccessLogEncoding: JSON\naccessLogFormat: '{not json'\n").MeshAccessLog; l.JSON != encode.DefaultAccessLogJSON {
		t.Errorf("bad JSON format: %q, want istiod's default", l.JSON)
	}
	m = mesh(`accessLogEncoding: JSON
accessLogFormat: '{"c":"%RESPONSE_CODE%"}'
defaultProviders: {accessLogging: [envoy, tcp]}
extensionProviders:
- {name: tcp, envoyTcpAls: {service: obs/als.obs.svc.cluster.local, port: 9000}}
- {name: http, envoyHttpAls: {service: als.obs.svc.cluster.local, port: 9001, logName: mine}}
- {name: otel, envoyOtelAls: {service: otel.obs.svc.cluster.local, port: 4317}}
`)
	logs := m.Telemetry.Client.Logs
	if len(logs) != 2 || logs[0].JSON != `{"c":"%RESPONSE_CODE%"}` || logs[0].Path != "/dev/stdout" {
		t.Fatalf("defaultProviders loggers: %+v", logs)
	}
	if l := logs[1]; l.Kind != encode.AccessLogTCPGRPC || l.Cluster != "outbound|9000||als.obs.svc.cluster.local" || l.Authority != "als.obs.svc.cluster.local" || l.LogName != "tcp_envoy_accesslog" {
		t.Errorf("tcp ALS logger: %+v", l)
	}
	for _, p := range m.TelemetryProviders {
		switch p.Name {
		case "http":
			if p.Log == nil || p.Log.LogName != "mine" || p.Log.Cluster != "outbound|9001||als.obs.svc.cluster.local" {
				t.Errorf("http ALS provider: %+v", p.Log)
			}
		case "otel":
			if p.Log == nil || p.Log.Kind != encode.AccessLogOTel || p.Log.LogName != "otel_envoy_accesslog" || p.Log.Text != encode.DefaultAccessLogText {
				t.Errorf("otel provider: %+v", p.Log)
			}
		}
	}
}

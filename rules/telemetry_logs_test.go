package rules

import (
	"testing"

	"github.com/pilotfish-mesh/pilotfish/encode"
)

// TestDefaultTelemetryLooksUpLogServices: a default access log provider
// whose gRPC service the registry lacks gives no logger, so the mesh's
// accessLogFile logger stands in (istiod's fallback when no provider gives
// one); once the service exists the provider's logger is back, and a
// Telemetry naming the provider gets its logger the same way.
func TestDefaultTelemetryLooksUpLogServices(t *testing.T) {
	file := encode.AccessLog{Kind: encode.AccessLogFile, Path: "/dev/stdout"}
	als := encode.AccessLog{Kind: encode.AccessLogHTTPGRPC, LogName: "als", Cluster: "outbound|9000||als.obs.svc.cluster.local"}
	mesh := encode.DefaultMesh()
	mesh.MeshAccessLog = &file
	mesh.TelemetryProviders = []encode.TelemetryProvider{{Name: "als", Log: &als, Service: "obs/als.obs.svc.cluster.local"}}
	mesh.DefaultLogging = []string{"als"}
	mesh.Telemetry = &encode.Telemetry{Client: encode.TelemetrySide{Logs: DefaultLogs(mesh, nil)}, Server: encode.TelemetrySide{Logs: DefaultLogs(mesh, nil)}}

	without := efSnapshot(t, `apiVersion: v1
kind: Namespace
metadata: {name: obs}
`)
	got := defaultTelemetry(without, mesh)
	if got == nil || len(got.Client.Logs) != 1 || got.Client.Logs[0].Kind != encode.AccessLogFile || got.Server.Logs[0].Path != file.Path {
		t.Errorf("without the service: %+v, want the accessLogFile logger on both sides", got)
	}
	if mesh.Telemetry.Client.Logs[0].Kind != encode.AccessLogHTTPGRPC {
		t.Errorf("the mesh's own default telemetry changed: %+v", mesh.Telemetry.Client.Logs)
	}
	with := efSnapshot(t, `apiVersion: v1
kind: Service
metadata: {name: als, namespace: obs}
spec:
  clusterIP: 10.96.9.9
  ports: [{name: grpc, port: 9000}]
`)
	if got := defaultTelemetry(with, mesh); got != mesh.Telemetry {
		t.Errorf("with the service: %+v, want the mesh's default telemetry itself", got)
	}
	for _, c := range []struct {
		name     string
		resolves bool
		want     encode.AccessLogKind
	}{{"missing", false, encode.AccessLogFile}, {"present", true, encode.AccessLogHTTPGRPC}} {
		logs := sideLogs(nil, mesh, 0, func(string) bool { return c.resolves })
		if len(logs) != 1 || logs[0].Kind != c.want {
			t.Errorf("%s: sideLogs %+v, want one logger of kind %v", c.name, logs, c.want)
		}
	}
}

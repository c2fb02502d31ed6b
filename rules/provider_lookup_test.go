package rules

import (
	"strings"
	"testing"

	"github.com/pilotfish-mesh/pilotfish/encode"
)

// TestProviderLookupFailures: the providers whose service the registry
// lacks (an access logger's, a tracer's, an ext_authz provider's) are
// named once each with istiod's LookupCluster error; providers that
// resolve, or have no service, are not.
func TestProviderLookupFailures(t *testing.T) {
	snap := efSnapshot(t, `apiVersion: v1
kind: Service
metadata: {name: collector, namespace: obs}
spec:
  clusterIP: 10.96.9.1
  ports: [{name: grpc, port: 9411}]
`)
	als := encode.AccessLog{Kind: encode.AccessLogHTTPGRPC}
	file := encode.AccessLog{Kind: encode.AccessLogFile, Path: "/dev/stdout"}
	mesh := encode.DefaultMesh()
	mesh.TelemetryProviders = []encode.TelemetryProvider{
		{Name: "als-typo", Log: &als, Service: "obs/colector.obs.svc.cluster.local"},
		{Name: "als-ok", Log: &als, Service: "collector.obs.svc.cluster.local"},
		{Name: "file", Log: &file},
		{Name: "zipkin-typo", Trace: &encode.TraceProvider{Service: "zipkin.obs.svc.cluster.local"}},
		{Name: "zipkin-ok", Trace: &encode.TraceProvider{Service: "obs/collector.obs.svc.cluster.local"}},
	}
	mesh.ExtAuthz = []encode.ExtAuthzProvider{{Name: "authz-typo", Service: "authz.obs.svc.cluster.local"}, {Name: "authz-ok", Service: "collector.obs.svc.cluster.local"}}
	got := ProviderLookupFailures(snap, mesh)
	want := []string{"[als-typo]: could not find service obs/colector.obs.svc.cluster.local", "[zipkin-typo]: could not find service zipkin.obs.svc.cluster.local", "[authz-typo]: could not find service authz.obs.svc.cluster.local"}
	if len(got) != len(want) {
		t.Fatalf("failures %q, want %d", got, len(want))
	}
	for i := range want {
		if !strings.Contains(got[i], want[i]) || !strings.HasPrefix(got[i], "warning: MeshConfig: mesh.extensionProviders") {
			t.Errorf("failure %d = %q, want it to name %q", i, got[i], want[i])
		}
	}
	if ProviderLookupFailures(snap, nil) != nil {
		t.Error("a nil mesh has failures")
	}
}

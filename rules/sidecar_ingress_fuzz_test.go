package rules

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/index"
	"github.com/pilotfish-mesh/pilotfish/ingest"
)

// FuzzSidecarIngress: any ingress listener that passes validation (port,
// protocol, bind, defaultEndpoint, captureMode, connection pool) gives
// inbound listeners and clusters that pass ValidateAll; one that fails
// validation never reaches the index. Never a panic.
func FuzzSidecarIngress(f *testing.F) {
	f.Add(uint32(9080), "HTTP", "", "127.0.0.1:8080", "", int32(0))
	f.Add(uint32(9443), "TCP", "0.0.0.0", "unix:///var/run/app.sock", "NONE", int32(7))
	f.Add(uint32(5000), "GRPC", "::", "[::]:5001", "IPTABLES", int32(1))
	f.Add(uint32(5000), "grpc-web", "10.0.0.1", "0.0.0.0:1", "DEFAULT", int32(-1))
	f.Add(uint32(0), "UDP", "x", "127.0.0.1:http", "NONE", int32(0))
	f.Add(uint32(70000), "", "", "[::1]:65535", "", int32(3))
	f.Fuzz(func(t *testing.T, port uint32, protocol, bind, endpoint, capture string, maxConn int32) {
		q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
		var in strings.Builder
		fmt.Fprintf(&in, "  - port: {number: %d, protocol: %s, name: p}\n", port, q(protocol))
		if bind != "" {
			fmt.Fprintf(&in, "    bind: %s\n", q(bind))
		}
		if endpoint != "" {
			fmt.Fprintf(&in, "    defaultEndpoint: %s\n", q(endpoint))
		}
		if capture != "" {
			fmt.Fprintf(&in, "    captureMode: %s\n", q(capture))
		}
		if maxConn != 0 {
			fmt.Fprintf(&in, "    connectionPool: {tcp: {maxConnections: %d}}\n", maxConn)
		}
		doc := "apiVersion: networking.istio.io/v1\nkind: Sidecar\nmetadata: {name: ratings, namespace: a}\nspec:\n  workloadSelector: {labels: {app: ratings}}\n  ingress:\n" + in.String()
		objs, errs := ingest.Decode("sidecar.yaml", []byte(doc))
		if len(errs) > 0 || len(objs) != 1 || len(ingest.Validate(&objs[0])) > 0 {
			return // rejected: never indexed
		}
		sw := newScopedWriter(t, ingressMesh)
		sw.apply(doc) // replaces a/ratings
		if got := encode.SidecarIngressOf(configByRef(sw.w.Snapshot(), index.ConfigSidecar, "a/ratings")); len(got) != 1 || got[0].GetPort().GetNumber() != port {
			t.Fatalf("a/ratings ingress %v, want the fuzzed one", got)
		}
		e := newTestEngine(sw.w, testOptions{})
		for _, ip := range []string{"10.244.1.5", "fd00::5"} {
			sc := ingressScope(t, e, sw.w.Snapshot(), "a", ip)
			if sc.Class.Sidecar != "a/ratings" && ip == "10.244.1.5" {
				t.Fatalf("Sidecar %q not selected", sc.Class.Sidecar)
			}
			// inboundOf decodes every resource through ValidateAll.
			inboundOf(t, sc)
		}
	})
}

package ingest

import (
	"fmt"
	"testing"

	"github.com/pilotfish-mesh/pilotfish/index"
)

const seOneHost = `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: svc, namespace: shop}
spec:
  hosts: [%s]
  addresses: [240.0.0.1]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: 10.0.0.1}]
`

// TestConvertRowListsFollowTheObject moves one ServiceEntry between the
// inline ref list (one host: three rows) and the spilled one (two hosts:
// five rows), and checks that every update retires exactly the rows the
// object no longer produces.
func TestConvertRowListsFollowTheObject(t *testing.T) {
	w := index.NewWriter()
	c := NewConverter(w, "cluster.local")
	check := func(step string, hosts ...string) {
		t.Helper()
		snap := w.Snapshot()
		if snap.NumServices() != len(hosts) || snap.NumEndpointShards() != len(hosts) || snap.NumConfigs(index.ConfigServiceEntry) != 1 {
			t.Fatalf("%s: %d services, %d shards, %d configs; want %d, %d, 1", step,
				snap.NumServices(), snap.NumEndpointShards(), snap.NumConfigs(index.ConfigServiceEntry), len(hosts), len(hosts))
		}
		for _, h := range hosts {
			s, _, ok := snap.LookupService(h, "shop")
			if !ok {
				t.Fatalf("%s: no service %s", step, h)
			}
			if len(s.Addresses) != 1 || len(s.Ports) != 1 || snap.Endpoints(s.Key).Len() != 1 {
				t.Fatalf("%s: service %s has %d addresses, %d ports, %d endpoints", step, h, len(s.Addresses), len(s.Ports), snap.Endpoints(s.Key).Len())
			}
		}
	}
	apply(t, w, c, fmt.Sprintf(seOneHost, "a.example"))
	check("one host", "a.example")
	apply(t, w, c, fmt.Sprintf(seOneHost, "a.example, b.example"))
	check("two hosts", "a.example", "b.example")
	apply(t, w, c, fmt.Sprintf(seOneHost, "c.example"))
	check("another host", "c.example")
}

func TestProtocolOf(t *testing.T) {
	for _, tc := range []struct {
		name string
		want index.Protocol
	}{
		{"HTTP", index.ProtocolHTTP},
		{"http-web", index.ProtocolHTTP},
		{"Http2", index.ProtocolHTTP2},
		{"HTTPS", index.ProtocolHTTPS},
		{"grpc", index.ProtocolGRPC},
		{"grpc-api", index.ProtocolGRPC},
		{"GRPC-Web", index.ProtocolGRPCWeb},
		{"grpc-web-x", index.ProtocolGRPCWeb},
		{"TCP", index.ProtocolTCP},
		{"tls-passthrough", index.ProtocolTLS},
		{"Mongo", index.ProtocolMongo},
		{"redis", index.ProtocolRedis},
		{"MySQL", index.ProtocolMySQL},
		{"UDP", index.ProtocolUDP},
		{"", index.ProtocolUnknown},
		{"web", index.ProtocolUnknown},
		{"httpx", index.ProtocolUnknown},
	} {
		if got := protocolOf(tc.name); got != tc.want {
			t.Errorf("protocolOf(%q) = %v, want %v", tc.name, got, tc.want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { protocolOf("HTTP") }); n != 0 {
		t.Errorf("protocolOf allocates %v times", n)
	}
}

// TestLocalitySym checks that the buffered fast path interns exactly what
// endpointLocality returns, and allocates nothing for a known locality.
func TestLocalitySym(t *testing.T) {
	w := index.NewWriter()
	c := NewConverter(w, "cluster.local")
	c.nodes = map[string]string{"n": "r//", "m": "r/z1/s"}
	str := func(s string) *string { return &s }
	for _, tc := range []struct{ node, zone *string }{
		{nil, nil}, {nil, str("")}, {nil, str("z")}, {str("other"), str("z")},
		{str("n"), str("z")}, {str("n"), nil}, {str("m"), str("z")}, {str("other"), nil},
	} {
		want := index.Sym(0)
		if loc := c.endpointLocality(tc.node, tc.zone); loc != "" {
			want = c.sym(loc)
		}
		if got := c.localitySym(tc.node, tc.zone); got != want {
			t.Errorf("localitySym(%v, %v) = %q, want %q", ptrString(tc.node), ptrString(tc.zone), w.Symbols().String(got), w.Symbols().String(want))
		}
	}
	zone := str("zone-7")
	c.localitySym(nil, zone)
	if n := testing.AllocsPerRun(100, func() { c.localitySym(nil, zone) }); n != 0 {
		t.Errorf("localitySym of a known zone allocates %v times", n)
	}
}

package bench

import (
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/pilotfish-mesh/pilotfish/engine"
)

// subscriptions returns the EDS cluster names and RDS route names a proxy
// subscribes to after its CDS and LDS, as Envoy would.
func subscriptions(tb testing.TB, c *engine.Conn) (eds, rds []string) {
	clusters, err := c.Generate(engine.TypeCluster, nil, true, nil)
	if err != nil {
		tb.Fatal(err)
	}
	for _, r := range clusters {
		var cl clusterv3.Cluster
		unmarshalAny(tb, r.Any, &cl)
		if cl.GetType() == clusterv3.Cluster_EDS {
			name := cl.GetEdsClusterConfig().GetServiceName()
			if name == "" {
				name = cl.Name
			}
			eds = append(eds, name)
		}
	}
	listeners, err := c.Generate(engine.TypeListener, nil, true, nil)
	if err != nil {
		tb.Fatal(err)
	}
	seen := map[string]bool{}
	for _, r := range listeners {
		var l listenerv3.Listener
		unmarshalAny(tb, r.Any, &l)
		for _, fc := range l.FilterChains {
			for _, f := range fc.Filters {
				var hcm hcmv3.HttpConnectionManager
				if f.GetTypedConfig() == nil || f.GetTypedConfig().UnmarshalTo(&hcm) != nil {
					continue
				}
				if n := hcm.GetRds().GetRouteConfigName(); n != "" && !seen[n] {
					seen[n] = true
					rds = append(rds, n)
				}
			}
		}
	}
	return eds, rds
}

// unmarshalAny decodes the value of an encoded Any into m.
func unmarshalAny(tb testing.TB, b []byte, m proto.Message) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			tb.Fatal("bad Any")
		}
		b = b[n:]
		if num == 2 && typ == protowire.BytesType {
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				tb.Fatal("bad Any value")
			}
			if err := proto.Unmarshal(v, m); err != nil {
				tb.Fatal(err)
			}
			return
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		b = b[n:]
	}
}

// TestProxyConfigSmall runs the benchmarks' setup at a small size in plain
// go test, so a broken benchmark fails CI rather than the next bench run.
func TestProxyConfigSmall(t *testing.T) {
	for _, name := range []string{"http", "virtualservice", "tcp", "serviceentry-workloadentry"} {
		t.Run(name, func(t *testing.T) {
			w, eds, rds := setup(t, workloadCase{name, 10})
			_ = w
			if len(eds) == 0 {
				t.Fatal("no EDS clusters")
			}
			if name == "http" && len(rds) == 0 {
				t.Fatal("no route configs")
			}
		})
	}
}

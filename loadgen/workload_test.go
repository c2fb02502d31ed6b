package loadgen

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/types/known/durationpb"
)

// httpWorkload is a go-control-plane snapshot the size of istio-bench's
// http workload at Services=N as istiod serves it to one sidecar: N
// istio-like outbound EDS clusters plus BlackHole, Passthrough and
// InboundPassthrough (STATIC), N ClusterLoadAssignments, listeners
// virtualOutbound, virtualInbound (TCP) and 0.0.0.0_80 naming route
// configuration "80" with N virtual hosts. Service i is
// svc-i.ns-(i%10).svc.cluster.local.
func httpWorkload(t testing.TB, services int, version string) *cachev3.Snapshot {
	res := map[resource.Type][]types.Resource{}
	for i := range services {
		c := istioLikeCluster(t, i)
		res[resource.ClusterType] = append(res[resource.ClusterType], c)
		res[resource.EndpointType] = append(res[resource.EndpointType], cla(c.GetName(), i, 0))
	}
	for _, name := range []string{"BlackHoleCluster", "PassthroughCluster", "InboundPassthroughCluster"} {
		res[resource.ClusterType] = append(res[resource.ClusterType], &clusterv3.Cluster{Name: name,
			ConnectTimeout: durationpb.New(10 * time.Second)})
	}
	tcp := func(name, cluster string) *listenerv3.Listener {
		return &listenerv3.Listener{Name: name, FilterChains: []*listenerv3.FilterChain{{Filters: []*listenerv3.Filter{{
			Name: "envoy.filters.network.tcp_proxy", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: mustAny(t,
				&tcpproxyv3.TcpProxy{StatPrefix: cluster, ClusterSpecifier: &tcpproxyv3.TcpProxy_Cluster{Cluster: cluster}})},
		}}}}}
	}
	res[resource.ListenerType] = []types.Resource{
		tcp("virtualOutbound", "PassthroughCluster"), tcp("virtualInbound", "InboundPassthroughCluster"), portListener(t, 80, 0),
	}
	rc := routeConfig("80", services, 0, func(i int) string {
		return fmt.Sprintf("outbound|80||svc-%d.ns-%d.svc.cluster.local", i, i%10)
	})
	res[resource.RouteType] = []types.Resource{rc}
	snap, err := cachev3.NewSnapshot(version, res)
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

// TestHTTPWorkload runs loadgen against the http workload at a small size
// in plain go test, with one service added as the change (the scale run's
// scenario, see TestServeHTTPWorkload).
func TestHTTPWorkload(t *testing.T) {
	srv := startXDS(t, httpWorkload(t, 50, "v1"))
	cfg := testConfig(srv.addr, 20, SotW)
	cfg.ChangeFunc = func(context.Context) error {
		srv.set(t, httpWorkload(t, 51, "v2"))
		return nil
	}
	cfg.ExpectResource = "cds/outbound|80||svc-50.ns-0.svc.cluster.local"
	rep := run(t, cfg)
	checkConsistent(t, rep)
	checkHeld(t, rep, map[string]int{"cds": 54, "eds": 51, "lds": 3, "rds": 1})
	if dir := os.Getenv("LOADGEN_REPORT_DIR"); dir != "" {
		writeReports(t, rep, dir+"/http-workload")
	}
}

// TestServeHTTPWorkload is not a test: with LOADGEN_SERVE_ADDR set it runs
// a go-control-plane ADS server holding httpWorkload(LOADGEN_SERVICES,
// default 1000) on that address until killed, adding one service (a new
// snapshot version) on each SIGHUP, for scale runs of `pilotfish loadgen`
// in a separate process:
//
//	go test -c -o /tmp/loadgen.test ./loadgen
//	LOADGEN_SERVE_ADDR=127.0.0.1:15010 /tmp/loadgen.test -test.run TestServeHTTPWorkload -test.timeout 0 &
//	pilotfish loadgen --xds 127.0.0.1:15010 --proxies 2000 --change-cmd "kill -HUP $!" \
//	  --expect-resource 'cds/outbound|80||svc-1000.ns-0.svc.cluster.local'
func TestServeHTTPWorkload(t *testing.T) {
	addr := os.Getenv("LOADGEN_SERVE_ADDR")
	if addr == "" {
		t.Skip("set LOADGEN_SERVE_ADDR to serve the http workload")
	}
	services := 1000
	if s := os.Getenv("LOADGEN_SERVICES"); s != "" {
		services, _ = strconv.Atoi(s)
	}
	srv := startXDSOn(t, addr, httpWorkload(t, services, "v0"))
	t.Logf("serving http workload (%d services) on %s", services, srv.addr)
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM, os.Interrupt)
	for v := 1; ; v++ {
		select {
		case <-hup:
			services++
			srv.set(t, httpWorkload(t, services, "v"+strconv.Itoa(v)))
			t.Logf("v%d: %d services", v, services)
		case <-term:
			return
		}
	}
}

func writeReports(t *testing.T, rep *Report, base string) {
	for ext, write := range map[string]func(w *os.File) error{
		".json": func(w *os.File) error { return rep.WriteJSON(w) },
		".html": func(w *os.File) error { return rep.WriteHTML(w) },
	} {
		f, err := os.Create(base + ext)
		if err != nil {
			t.Fatal(err)
		}
		if err := write(f); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
}

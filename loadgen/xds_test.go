package loadgen

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The tests drive loadgen against go-control-plane's real ADS server and
// SnapshotCache on 127.0.0.1, and read what the server saw through its
// callbacks. Nothing here is a fake: both ends speak gRPC over TCP.

// xdsServer is an in-process go-control-plane ADS server serving one
// snapshot to every node.
type xdsServer struct {
	addr  string
	cache cachev3.SnapshotCache

	mu       sync.Mutex
	acks     map[string]int // type URL → ACK-or-subscribe requests with a nonce; guarded by mu
	nacks    map[string]int // type URL → NACKs; guarded by mu
	nodes    map[string]*corev3.Node
	requests int
	nackCh   chan struct{} // a signal per NACK, dropped when full
}

// everyNode maps all nodes to one snapshot key.
type everyNode struct{}

func (everyNode) ID(*corev3.Node) string { return "all" }

func startXDS(t testing.TB, snap *cachev3.Snapshot) *xdsServer {
	t.Helper()
	return startXDSOn(t, "127.0.0.1:0", snap)
}

func startXDSOn(t testing.TB, addr string, snap *cachev3.Snapshot) *xdsServer {
	t.Helper()
	s := &xdsServer{
		cache:  cachev3.NewSnapshotCache(true, everyNode{}, quietLogger{}),
		acks:   map[string]int{},
		nacks:  map[string]int{},
		nodes:  map[string]*corev3.Node{},
		nackCh: make(chan struct{}, 1<<16),
	}
	if snap != nil {
		s.set(t, snap)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cb := serverv3.CallbackFuncs{
		StreamRequestFunc: func(_ int64, req *discoveryv3.DiscoveryRequest) error {
			s.observe(req.GetNode(), req.GetTypeUrl(), req.GetResponseNonce(), req.GetErrorDetail() != nil)
			return nil
		},
		StreamDeltaRequestFunc: func(_ int64, req *discoveryv3.DeltaDiscoveryRequest) error {
			s.observe(req.GetNode(), req.GetTypeUrl(), req.GetResponseNonce(), req.GetErrorDetail() != nil)
			return nil
		},
	}
	srv := serverv3.NewServer(ctx, s.cache, cb)
	gs := grpc.NewServer()
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(gs, srv)
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	s.addr = lis.Addr().String()
	go gs.Serve(lis)
	t.Cleanup(func() {
		cancel()
		gs.Stop()
	})
	return s
}

func (s *xdsServer) observe(node *corev3.Node, typeURL, nonce string, nack bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests++
	if node != nil {
		s.nodes[node.GetId()] = node
	}
	switch {
	case nack:
		s.nacks[typeURL]++
		select {
		case s.nackCh <- struct{}{}:
		default:
		}
	case nonce != "":
		s.acks[typeURL]++
	}
}

func (s *xdsServer) counts() (acks, nacks map[string]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	acks, nacks = map[string]int{}, map[string]int{}
	for k, v := range s.acks {
		acks[k] = v
	}
	for k, v := range s.nacks {
		nacks[k] = v
	}
	return acks, nacks
}

func (s *xdsServer) set(t testing.TB, snap *cachev3.Snapshot) {
	t.Helper()
	if err := s.cache.SetSnapshot(context.Background(), "all", snap); err != nil {
		t.Fatal(err)
	}
}

type quietLogger struct{}

func (quietLogger) Debugf(string, ...any) {}
func (quietLogger) Infof(string, ...any)  {}
func (quietLogger) Warnf(string, ...any)  {}
func (quietLogger) Errorf(string, ...any) {}

// mesh describes a snapshot: EDS clusters svc-0..svc-(services-1) with one
// CLA each, plus static clusters, listeners naming route configurations and
// route configurations routing to the clusters.
type mesh struct {
	version  string
	services int
	static   int // STATIC clusters (no EDS)
	// listeners: one per port, named 0.0.0.0_PORT, whose HCM names route
	// configuration PORT; routes: one route configuration per port.
	ports []int
	// vhosts per route configuration (default: one per service).
	vhosts int
	// grpcTargets: api_listeners named svc-i.default.svc.cluster.local:80
	// for the first grpcTargets services, each naming route config
	// outbound|80||HOST.
	grpcTargets int
	extra       []string // more EDS clusters (added by a change)
	// salt changes every resource's bytes (for Delta, whose servers send
	// only resources whose bytes changed).
	salt int
}

func host(i int) string { return fmt.Sprintf("svc-%d.default.svc.cluster.local", i) }

func clusterName(h string) string { return "outbound|80||" + h }

func edsCluster(name string, withServiceName bool, salt int) *clusterv3.Cluster {
	c := &clusterv3.Cluster{
		Name:                 name,
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
		ConnectTimeout:       durationpb.New(time.Duration(10+salt) * time.Second),
		EdsClusterConfig: &clusterv3.Cluster_EdsClusterConfig{
			EdsConfig: &corev3.ConfigSource{
				ResourceApiVersion:    corev3.ApiVersion_V3,
				ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
			},
		},
	}
	if withServiceName {
		c.EdsClusterConfig.ServiceName = name
	}
	return c
}

func cla(name string, i, salt int) *endpointv3.ClusterLoadAssignment {
	return &endpointv3.ClusterLoadAssignment{
		ClusterName: name,
		Endpoints: []*endpointv3.LocalityLbEndpoints{{
			Locality: &corev3.Locality{},
			LbEndpoints: []*endpointv3.LbEndpoint{{
				HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
					Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
						Address:       fmt.Sprintf("10.244.%d.%d", i/250, i%250+1),
						PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(8080 + salt)},
					}}},
				}},
				LoadBalancingWeight: wrapperspb.UInt32(1),
			}},
		}},
	}
}

func mustAny(t testing.TB, m proto.Message) *anypb.Any {
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func hcm(t testing.TB, rdsName string, inline *routev3.RouteConfiguration) *hcmv3.HttpConnectionManager {
	h := &hcmv3.HttpConnectionManager{
		StatPrefix:  "outbound",
		HttpFilters: []*hcmv3.HttpFilter{{Name: "envoy.filters.http.router", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(t, &routerv3.Router{})}}},
	}
	if inline != nil {
		h.RouteSpecifier = &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: inline}
	} else {
		h.RouteSpecifier = &hcmv3.HttpConnectionManager_Rds{Rds: &hcmv3.Rds{
			RouteConfigName: rdsName,
			ConfigSource: &corev3.ConfigSource{
				ResourceApiVersion:    corev3.ApiVersion_V3,
				ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
			},
		}}
	}
	return h
}

func portListener(t testing.TB, port, salt int) *listenerv3.Listener {
	return &listenerv3.Listener{
		Name:       fmt.Sprintf("0.0.0.0_%d", port),
		StatPrefix: fmt.Sprintf("salt-%d", salt),
		Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
			Address: "0.0.0.0", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(port)},
		}}},
		FilterChains: []*listenerv3.FilterChain{{
			Filters: []*listenerv3.Filter{{
				Name:       "envoy.filters.network.http_connection_manager",
				ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: mustAny(t, hcm(t, fmt.Sprint(port), nil))},
			}},
		}},
	}
}

func apiListener(t testing.TB, name, rds string) *listenerv3.Listener {
	return &listenerv3.Listener{
		Name:        name,
		ApiListener: &listenerv3.ApiListener{ApiListener: mustAny(t, hcm(t, rds, nil))},
	}
}

func routeConfig(name string, vhosts, salt int, cluster func(i int) string) *routev3.RouteConfiguration {
	rc := &routev3.RouteConfiguration{Name: name, MaxDirectResponseBodySizeBytes: wrapperspb.UInt32(uint32(4096 + salt))}
	for i := range vhosts {
		rc.VirtualHosts = append(rc.VirtualHosts, &routev3.VirtualHost{
			Name:    fmt.Sprintf("%s-%d", name, i),
			Domains: []string{host(i), host(i) + ":80"},
			Routes: []*routev3.Route{{
				Match:  &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
				Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: cluster(i)}}},
			}},
		})
	}
	return rc
}

// snapshot builds m's snapshot.
func (m mesh) snapshot(t testing.TB) *cachev3.Snapshot {
	t.Helper()
	res := map[resource.Type][]types.Resource{}
	add := func(typ string, r types.Resource) { res[typ] = append(res[typ], r) }
	for i := range m.services {
		name := clusterName(host(i))
		add(resource.ClusterType, edsCluster(name, i%2 == 0, m.salt))
		add(resource.EndpointType, cla(name, i, m.salt))
	}
	for i, name := range m.extra {
		add(resource.ClusterType, edsCluster(name, true, m.salt))
		add(resource.EndpointType, cla(name, 1000+i, m.salt))
	}
	for i := range m.static {
		add(resource.ClusterType, &clusterv3.Cluster{
			Name:                 fmt.Sprintf("static-%d", i),
			ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
			ConnectTimeout:       durationpb.New(time.Duration(1+m.salt) * time.Second),
		})
	}
	vhosts := m.vhosts
	if vhosts == 0 {
		vhosts = m.services
	}
	for _, port := range m.ports {
		add(resource.ListenerType, portListener(t, port, m.salt))
		add(resource.RouteType, routeConfig(fmt.Sprint(port), vhosts, m.salt, func(i int) string { return clusterName(host(i % m.services)) }))
	}
	for i := range m.grpcTargets {
		h := host(i)
		add(resource.ListenerType, apiListener(t, h+":80", clusterName(h)))
		add(resource.RouteType, routeConfig(clusterName(h), 1, m.salt, func(int) string { return clusterName(h) }))
	}
	snap, err := cachev3.NewSnapshot(m.version, res)
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

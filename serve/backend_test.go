package serve_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/pilotfish-mesh/pilotfish/engine"
	"github.com/pilotfish-mesh/pilotfish/serve"
)

// testBackend is a serve.Backend for tests only: the real engine does not
// exist yet. It serves fixed, mutable sets of real Envoy resources (marshaled
// once into Any, versioned by a hash of their bytes, so setting identical
// content again changes nothing) and pushes to its sessions on demand. It
// serves the four core types; any other type is engine.ErrUnknownType.
type testBackend struct {
	mu         sync.Mutex
	res        map[string]map[string]engine.Resource // guarded by mu; type → name → resource
	sessions   map[string]*testSession               // guarded by mu; by node id
	connectErr error                                 // guarded by mu; returned by Connect when set
}

func newTestBackend() *testBackend {
	b := &testBackend{res: map[string]map[string]engine.Resource{}, sessions: map[string]*testSession{}}
	for _, t := range []string{engine.TypeCluster, engine.TypeEndpoint, engine.TypeListener, engine.TypeRoute} {
		b.res[t] = map[string]engine.Resource{}
	}
	return b
}

// set adds or replaces resources. It does not push.
func (b *testBackend) set(t testing.TB, msgs ...proto.Message) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, m := range msgs {
		r := toResource(t, m)
		b.res[typeURLOf(m)][r.Name] = r
	}
}

// remove deletes resources of typeURL. It does not push.
func (b *testBackend) remove(typeURL string, names ...string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, n := range names {
		delete(b.res[typeURL], n)
	}
}

// push queues p on every session, merging with what is pending, as the
// engine's push queue will.
func (b *testBackend) push(p engine.Push) {
	b.mu.Lock()
	sessions := slices.Collect(maps.Values(b.sessions))
	b.mu.Unlock()
	for _, s := range sessions {
		s.queue(p)
	}
}

// session waits for the session of node id to connect.
func (b *testBackend) session(t testing.TB, id string) *testSession {
	t.Helper()
	var s *testSession
	waitFor(t, "session "+id, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		s = b.sessions[id]
		return s != nil
	})
	return s
}

func (b *testBackend) Connect(_ context.Context, node *corev3.Node, _ string) (serve.Session, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.connectErr != nil {
		return nil, b.connectErr
	}
	s := &testSession{b: b, id: node.GetId(), pending: make(chan struct{}, 1), closed: make(chan struct{})}
	b.sessions[s.id] = s
	return s, nil
}

// testSession is testBackend's serve.Session. It records ACKs and NACKs.
type testSession struct {
	b       *testBackend
	id      string
	pending chan struct{}
	closed  chan struct{}

	mu        sync.Mutex
	queued    *engine.Push // guarded by mu
	sent      []string     // guarded by mu; "typeURL version"
	acks      []string     // guarded by mu; "typeURL version"
	nacks     []string     // guarded by mu; "typeURL version: message"
	signals   int          // guarded by mu; pushes queued that signalled
	pushDones int          // guarded by mu
}

func (s *testSession) queue(p engine.Push) {
	s.mu.Lock()
	if s.queued != nil {
		p = s.queued.Merge(p)
	}
	s.queued = &p
	select {
	case s.pending <- struct{}{}:
		s.signals++
	default:
	}
	s.mu.Unlock()
}

func (s *testSession) PushDone() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pushDones++
}

func (s *testSession) Sent(typeURL, version string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sent = append(s.sent, typeURL+" "+version)
}

func (s *testSession) ID() string               { return s.id }
func (s *testSession) Pending() <-chan struct{} { return s.pending }

func (s *testSession) TakePush() (engine.Push, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.queued == nil {
		return engine.Push{}, false
	}
	p := *s.queued
	s.queued = nil
	return p, true
}

func (s *testSession) Generate(typeURL string, names []string, wildcard bool, dst []engine.Resource) ([]engine.Resource, error) {
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	all, ok := s.b.res[typeURL]
	if !ok {
		return dst, fmt.Errorf("%w: %s", engine.ErrUnknownType, typeURL)
	}
	if wildcard {
		for _, name := range slices.Sorted(maps.Keys(all)) {
			dst = append(dst, all[name])
		}
		return dst, nil // every name exists in all already
	}
	for _, n := range names {
		if r, ok := all[n]; ok {
			dst = append(dst, r)
		}
	}
	return dst, nil
}

func (s *testSession) Acked(typeURL, version string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.acks = append(s.acks, typeURL+" "+version)
}

func (s *testSession) Nacked(typeURL, version, message string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nacks = append(s.nacks, typeURL+" "+version+": "+message)
}

func (s *testSession) Close() { close(s.closed) }

func (s *testSession) counts() (acks, nacks int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.acks), len(s.nacks)
}

// waitFor polls cond until it holds or fails the test after 10s.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// toResource marshals m into an encoded Any, as the engine's cache will.
func toResource(t testing.TB, m proto.Message) engine.Resource {
	t.Helper()
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	return engine.Resource{Name: nameOf(m), Version: fmt.Sprintf("%016x", xxhash.Sum64(b)), Any: b}
}

func typeURLOf(m proto.Message) string {
	return "type.googleapis.com/" + string(m.ProtoReflect().Descriptor().FullName())
}

func nameOf(m proto.Message) string {
	switch m := m.(type) {
	case *clusterv3.Cluster:
		return m.GetName()
	case *endpointv3.ClusterLoadAssignment:
		return m.GetClusterName()
	case *listenerv3.Listener:
		return m.GetName()
	case *routev3.RouteConfiguration:
		return m.GetName()
	}
	panic(fmt.Sprintf("nameOf %T", m))
}

// adsSource is a ConfigSource pointing at the ADS stream.
func adsSource() *corev3.ConfigSource {
	return &corev3.ConfigSource{
		ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
		ResourceApiVersion:    corev3.ApiVersion_V3,
	}
}

// cluster is an EDS cluster; gen varies its content (and so its version).
func cluster(name string, gen int) *clusterv3.Cluster {
	return &clusterv3.Cluster{
		Name:                 name,
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
		EdsClusterConfig:     &clusterv3.Cluster_EdsClusterConfig{EdsConfig: adsSource()},
		LbPolicy:             clusterv3.Cluster_ROUND_ROBIN,
		ConnectTimeout:       durationpb.New(time.Duration(gen+1) * time.Second),
	}
}

// cla is a ClusterLoadAssignment with one endpoint in an empty locality.
func cla(name, ip string, port uint32) *endpointv3.ClusterLoadAssignment {
	return &endpointv3.ClusterLoadAssignment{
		ClusterName: name,
		Endpoints: []*endpointv3.LocalityLbEndpoints{{
			Locality:            &corev3.Locality{},
			LoadBalancingWeight: wrapperspb.UInt32(1),
			LbEndpoints: []*endpointv3.LbEndpoint{{
				HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
					Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
						Address:       ip,
						PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port},
					}}},
				}},
			}},
		}},
	}
}

// apiListener is a proxyless-gRPC style Listener: an HttpConnectionManager
// taking route config routeName over ADS, router filter last.
func apiListener(t testing.TB, name, routeName string) *listenerv3.Listener {
	t.Helper()
	router, err := anypb.New(&routerv3.Router{})
	if err != nil {
		t.Fatal(err)
	}
	hcm, err := anypb.New(&hcmv3.HttpConnectionManager{
		StatPrefix: name,
		RouteSpecifier: &hcmv3.HttpConnectionManager_Rds{Rds: &hcmv3.Rds{
			ConfigSource: adsSource(), RouteConfigName: routeName,
		}},
		HttpFilters: []*hcmv3.HttpFilter{{
			Name: "envoy.filters.http.router", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: router},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return &listenerv3.Listener{Name: name, ApiListener: &listenerv3.ApiListener{ApiListener: hcm}}
}

// routeConfig routes everything for domain to cluster.
func routeConfig(name, domain, cluster string) *routev3.RouteConfiguration {
	return &routev3.RouteConfiguration{
		Name: name,
		VirtualHosts: []*routev3.VirtualHost{{
			Name:    name,
			Domains: []string{domain},
			Routes: []*routev3.Route{{
				Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
				Action: &routev3.Route_Route{Route: &routev3.RouteAction{
					ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: cluster},
				}},
			}},
		}},
	}
}

// testMetrics counts what serve reports.
type testMetrics struct {
	serve.NopXDSMetrics
	mu                      sync.Mutex
	connected, disconnected int            // guarded by mu
	pushed, rejected        map[string]int // guarded by mu; by type URL
	pushedBytes             int            // guarded by mu
}

func newTestMetrics() *testMetrics {
	return &testMetrics{pushed: map[string]int{}, rejected: map[string]int{}}
}

func (m *testMetrics) Connected(bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.connected++
}

func (m *testMetrics) Disconnected(bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.disconnected++
}

func (m *testMetrics) Pushed(typeURL string, bytes int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pushed[typeURL]++
	m.pushedBytes += bytes
}

func (m *testMetrics) Rejected(typeURL string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rejected[typeURL]++
}

func (m *testMetrics) rejectedOf(typeURL string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.rejected[typeURL]
}

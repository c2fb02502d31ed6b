package main

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// sidecarProxy is a raw ADS client standing in for an Envoy sidecar: it
// subscribes to every cluster and listener, to the endpoints of every EDS
// cluster and to every route configuration a listener names (RDS), ACKs
// each response, keeps the latest resources of each type as
// raw bytes and counts responses by type. redial moves it to another
// server, as a proxy does when its control plane goes away.
type sidecarProxy struct {
	t    *testing.T
	node *corev3.Node

	mu        sync.Mutex
	cc        *grpc.ClientConn
	cancel    context.CancelFunc
	latest    map[string]map[string][]byte // type → resource name → bytes
	counts    map[string]int               // responses received, by type
	edsNames  []string
	rdsNames  []string
	streamErr error
}

func newSidecarProxy(t *testing.T, addr string) *sidecarProxy {
	md, _ := structpb.NewStruct(map[string]any{"NAMESPACE": "shop", "ISTIO_VERSION": "1.31.0", "CLUSTER_ID": "Kubernetes"})
	c := &sidecarProxy{t: t, node: &corev3.Node{Id: "sidecar~10.244.9.9~client-0.shop~shop.svc.cluster.local", Metadata: md}}
	c.dial(addr)
	t.Cleanup(c.close)
	return c
}

func (c *sidecarProxy) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cancel != nil {
		c.cancel()
		_ = c.cc.Close()
	}
}

// dial opens a new stream to addr, forgetting what the last one received.
func (c *sidecarProxy) dial(addr string) {
	c.close()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		c.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := discoveryv3.NewAggregatedDiscoveryServiceClient(cc).StreamAggregatedResources(ctx)
	if err != nil {
		cancel()
		c.t.Fatal(err)
	}
	c.mu.Lock()
	c.cc, c.cancel = cc, cancel
	c.latest, c.counts, c.edsNames, c.rdsNames, c.streamErr = map[string]map[string][]byte{}, map[string]int{}, nil, nil, nil
	c.mu.Unlock()
	var sendMu sync.Mutex
	send := func(r *discoveryv3.DiscoveryRequest) {
		sendMu.Lock()
		defer sendMu.Unlock()
		r.Node = c.node
		_ = stream.Send(r)
	}
	send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.ClusterType})
	send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.ListenerType})
	go func() {
		for {
			resp, err := stream.Recv()
			if err != nil {
				c.mu.Lock()
				c.streamErr = err
				c.mu.Unlock()
				return
			}
			byName := map[string][]byte{}
			for _, r := range resp.Resources {
				byName[kubeResourceName(resp.TypeUrl, r.Value)] = r.Value
			}
			c.mu.Lock()
			c.latest[resp.TypeUrl] = byName
			c.counts[resp.TypeUrl]++
			// A CDS response decides the EDS subscription, an LDS one
			// the RDS subscription.
			var sub []string
			subType, held := "", (*[]string)(nil)
			switch resp.TypeUrl {
			case resourcev3.ClusterType:
				sub, subType, held = kubeEDSClusters(resp), resourcev3.EndpointType, &c.edsNames
			case resourcev3.ListenerType:
				sub, subType, held = kubeRDSNames(resp), resourcev3.RouteType, &c.rdsNames
			}
			resub := held != nil && !kubeEqualStrings(sub, *held)
			if resub {
				*held = sub
			}
			var names []string
			switch resp.TypeUrl {
			case resourcev3.EndpointType:
				names = c.edsNames
			case resourcev3.RouteType:
				names = c.rdsNames
			}
			c.mu.Unlock()
			send(&discoveryv3.DiscoveryRequest{TypeUrl: resp.TypeUrl, VersionInfo: resp.VersionInfo,
				ResponseNonce: resp.Nonce, ResourceNames: names})
			if resub {
				send(&discoveryv3.DiscoveryRequest{TypeUrl: subType, ResourceNames: sub})
			}
		}
	}()
}

func kubeEqualStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func kubeEDSClusters(resp *discoveryv3.DiscoveryResponse) []string {
	names := []string{}
	for _, r := range resp.Resources {
		var cl clusterv3.Cluster
		if proto.Unmarshal(r.Value, &cl) != nil || cl.GetType() != clusterv3.Cluster_EDS {
			continue
		}
		name := cl.Name
		if sn := cl.GetEdsClusterConfig().GetServiceName(); sn != "" {
			name = sn
		}
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// kubeRDSNames lists the route configurations the listeners' HTTP
// connection managers fetch over RDS, sorted.
func kubeRDSNames(resp *discoveryv3.DiscoveryResponse) []string {
	seen := map[string]bool{}
	for _, r := range resp.Resources {
		var l listenerv3.Listener
		if proto.Unmarshal(r.Value, &l) != nil {
			continue
		}
		chains := l.FilterChains
		if l.DefaultFilterChain != nil {
			chains = append(chains, l.DefaultFilterChain)
		}
		for _, fc := range chains {
			for _, f := range fc.Filters {
				var hcm hcmv3.HttpConnectionManager
				if f.GetTypedConfig() == nil || f.GetTypedConfig().UnmarshalTo(&hcm) != nil {
					continue
				}
				if n := hcm.GetRds().GetRouteConfigName(); n != "" {
					seen[n] = true
				}
			}
		}
	}
	names := []string{}
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func kubeResourceName(typeURL string, b []byte) string {
	switch typeURL {
	case resourcev3.ClusterType:
		var m clusterv3.Cluster
		_ = proto.Unmarshal(b, &m)
		return m.Name
	case resourcev3.EndpointType:
		var m endpointv3.ClusterLoadAssignment
		_ = proto.Unmarshal(b, &m)
		return m.ClusterName
	case resourcev3.ListenerType:
		var m listenerv3.Listener
		_ = proto.Unmarshal(b, &m)
		return m.Name
	case resourcev3.RouteType:
		var m routev3.RouteConfiguration
		_ = proto.Unmarshal(b, &m)
		return m.Name
	}
	return ""
}

// resources returns a copy of the latest resources of a type.
func (c *sidecarProxy) resources(typeURL string) map[string][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string][]byte{}
	for k, v := range c.latest[typeURL] {
		out[k] = v
	}
	return out
}

func (c *sidecarProxy) count(typeURL string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[typeURL]
}

func (c *sidecarProxy) err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.streamErr
}

// endpoints returns the addresses of a cluster's endpoints, "" if unknown.
func (c *sidecarProxy) endpoints(cluster string) []string {
	b, ok := c.resources(resourcev3.EndpointType)[cluster]
	if !ok {
		return nil
	}
	var cla endpointv3.ClusterLoadAssignment
	if err := proto.Unmarshal(b, &cla); err != nil {
		c.t.Fatal(err)
	}
	var out []string
	for _, l := range cla.Endpoints {
		for _, e := range l.LbEndpoints {
			out = append(out, e.GetEndpoint().GetAddress().GetSocketAddress().GetAddress())
		}
	}
	sort.Strings(out)
	return out
}

// workloadMetadata returns the istio.workload metadata of a cluster's
// endpoints ("name;namespace;service;revision;cluster"), sorted.
func (c *sidecarProxy) workloadMetadata(cluster string) []string {
	b, ok := c.resources(resourcev3.EndpointType)[cluster]
	if !ok {
		return nil
	}
	var cla endpointv3.ClusterLoadAssignment
	if err := proto.Unmarshal(b, &cla); err != nil {
		c.t.Fatal(err)
	}
	var out []string
	for _, l := range cla.Endpoints {
		for _, e := range l.LbEndpoints {
			out = append(out, e.GetMetadata().GetFilterMetadata()["istio"].GetFields()["workload"].GetStringValue())
		}
	}
	sort.Strings(out)
	return out
}

// sameXDSResources compares two clients' latest CDS, EDS, LDS and RDS
// byte for byte (replicas must serve identical bytes: versions name bytes, and a
// proxy moving between replicas must not be pushed what it has); it
// returns "" when identical, else what differs.
func sameXDSResources(a, b *sidecarProxy) string {
	for _, typ := range []string{resourcev3.ClusterType, resourcev3.EndpointType, resourcev3.ListenerType, resourcev3.RouteType} {
		ra, rb := a.resources(typ), b.resources(typ)
		if len(ra) == 0 {
			return "no " + typ + " received"
		}
		if len(ra) != len(rb) {
			return typ + ": resource counts differ"
		}
		for name, ba := range ra {
			if bb, ok := rb[name]; !ok || !bytes.Equal(ba, bb) {
				return typ + " " + name + " differs:\n" + describeResource(typ, ba) + "\n" + describeResource(typ, bb)
			}
		}
	}
	return ""
}

func newResource(typeURL string) proto.Message {
	switch typeURL {
	case resourcev3.ClusterType:
		return &clusterv3.Cluster{}
	case resourcev3.EndpointType:
		return &endpointv3.ClusterLoadAssignment{}
	case resourcev3.ListenerType:
		return &listenerv3.Listener{}
	case resourcev3.RouteType:
		return &routev3.RouteConfiguration{}
	}
	return nil
}

// describeResource renders a resource as text, for failure messages.
func describeResource(typeURL string, b []byte) string {
	m := newResource(typeURL)
	if m == nil {
		return fmt.Sprintf("%x", b)
	}
	if err := proto.Unmarshal(b, m); err != nil {
		return err.Error()
	}
	return prototext.Format(m)
}

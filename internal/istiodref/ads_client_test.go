package istiodref

import (
	"context"
	"slices"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/structpb"
)

const (
	typeCDS = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
	typeEDS = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"
	typeLDS = "type.googleapis.com/envoy.config.listener.v3.Listener"
	typeRDS = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration"
)

// quiet is how long istiod must send nothing before the proxy counts as
// having its whole config.
const quiet = 3 * time.Second

// connectProxy connects p to istiod's plaintext ADS port as Envoy would:
// CDS and LDS, then EDS for the EDS clusters and RDS for the route names
// the listeners use, ACKing every response. It returns once istiod has been
// quiet for a while; the stream stays open until stop is called.
func connectProxy(ctx context.Context, t *testing.T, addr string, p Proxy) (stop func()) {
	md, err := structpb.NewStruct(p.Metadata)
	if err != nil {
		t.Fatalf("%s: metadata: %v", p.Name, err)
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithCancel(ctx)
	stream, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(sctx)
	if err != nil {
		t.Fatal(err)
	}
	stop = func() { cancel(); conn.Close() }
	node := &corev3.Node{Id: p.ID, Metadata: md}
	subscribed := map[string][]string{}
	send := func(typ string, names []string, version, nonce string) {
		subscribed[typ] = names
		if err := stream.Send(&discoveryv3.DiscoveryRequest{Node: node, TypeUrl: typ, ResourceNames: names, VersionInfo: version, ResponseNonce: nonce}); err != nil {
			t.Fatalf("%s: send: %v", p.Name, err)
		}
	}
	responses := make(chan *discoveryv3.DiscoveryResponse)
	errs := make(chan error, 1)
	go func() {
		for {
			r, err := stream.Recv()
			if err != nil {
				errs <- err
				return
			}
			select {
			case responses <- r:
			case <-sctx.Done():
				return
			}
		}
	}()
	send(typeCDS, nil, "", "")
	send(typeLDS, nil, "", "")
	got := map[string]bool{}
	for {
		select {
		case r := <-responses:
			got[r.TypeUrl] = true
			names := subscribed[r.TypeUrl]
			send(r.TypeUrl, names, r.VersionInfo, r.Nonce) // ACK
			var more []string
			switch r.TypeUrl {
			case typeCDS:
				more = edsClusters(t, r)
				if !slices.Equal(more, subscribed[typeEDS]) {
					send(typeEDS, more, "", "")
				}
			case typeLDS:
				more = routeNames(t, r)
				if !slices.Equal(more, subscribed[typeRDS]) {
					send(typeRDS, more, "", "")
				}
			}
		case err := <-errs:
			t.Fatalf("%s: stream: %v", p.Name, err)
		case <-time.After(quiet):
			if got[typeCDS] && got[typeLDS] {
				return stop
			}
		case <-ctx.Done():
			t.Fatalf("%s: no config from istiod: %v", p.Name, ctx.Err())
		}
	}
}

func edsClusters(t *testing.T, r *discoveryv3.DiscoveryResponse) []string {
	var out []string
	for _, a := range r.Resources {
		var c clusterv3.Cluster
		if err := a.UnmarshalTo(&c); err != nil {
			t.Fatal(err)
		}
		if c.GetType() == clusterv3.Cluster_EDS {
			out = append(out, c.Name)
		}
	}
	slices.Sort(out)
	return out
}

func routeNames(t *testing.T, r *discoveryv3.DiscoveryResponse) []string {
	var out []string
	for _, a := range r.Resources {
		var l listenerv3.Listener
		if err := a.UnmarshalTo(&l); err != nil {
			t.Fatal(err)
		}
		chains := append(slices.Clone(l.FilterChains), l.DefaultFilterChain)
		for _, fc := range chains {
			for _, f := range fc.GetFilters() {
				var hcm hcmv3.HttpConnectionManager
				if f.GetTypedConfig().MessageIs(&hcm) && f.GetTypedConfig().UnmarshalTo(&hcm) == nil {
					if n := hcm.GetRds().GetRouteConfigName(); n != "" && !slices.Contains(out, n) {
						out = append(out, n)
					}
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

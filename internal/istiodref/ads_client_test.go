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
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"
)

const (
	typeCDS = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
	typeEDS = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"
	typeLDS = "type.googleapis.com/envoy.config.listener.v3.Listener"
	typeRDS = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration"
	// ECDS: istiod's config dump holds the extension configs a proxy
	// subscribed, so the client asks for every name its listeners reference.
	typeECDS = "type.googleapis.com/envoy.config.core.v3.TypedExtensionConfig"
)

// quiet is how long istiod must send nothing before the proxy counts as
// having its whole config.
const quiet = 3 * time.Second

// connectProxy connects p to istiod's plaintext ADS port as Envoy would:
// CDS and LDS, then EDS for the EDS clusters, RDS for the route names the
// listeners use and ECDS for the extension configs they reference, ACKing
// every response. It returns once istiod has been quiet for a while, with
// the last ECDS resources it sent; the stream stays open until stop is
// called. ECDS is unsubscribed before it returns: istiod's config dump of a
// proxy watching Wasm extension configs fails ("proto: not found"), so
// the ECDS resources are saved apart (Case.ExtensionFile).
func connectProxy(ctx context.Context, t *testing.T, addr string, p Proxy) (stop func(), ecds []*anypb.Any) {
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
	var ecdsVersion, ecdsNonce string
	for {
		select {
		case r := <-responses:
			got[r.TypeUrl] = true
			if r.TypeUrl == typeECDS {
				ecds, ecdsVersion, ecdsNonce = r.Resources, r.VersionInfo, r.Nonce
			}
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
				if ext := extensionNames(t, r); len(ext) > 0 && !slices.Equal(ext, subscribed[typeECDS]) {
					send(typeECDS, ext, "", "")
				}
			}
		case err := <-errs:
			t.Fatalf("%s: stream: %v", p.Name, err)
		case <-time.After(quiet):
			if got[typeCDS] && got[typeLDS] {
				if len(subscribed[typeECDS]) > 0 {
					send(typeECDS, []string{}, ecdsVersion, ecdsNonce)
					time.Sleep(quiet) // istiod handles the unsubscription before the dump
				}
				return stop, ecds
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

// extensionNames lists the filters the listeners in r take from ECDS
// (config_discovery), network and HTTP alike, sorted.
func extensionNames(t *testing.T, r *discoveryv3.DiscoveryResponse) []string {
	var out []string
	add := func(name string) {
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	for _, a := range r.Resources {
		var l listenerv3.Listener
		if err := a.UnmarshalTo(&l); err != nil {
			t.Fatal(err)
		}
		for _, fc := range append(slices.Clone(l.FilterChains), l.DefaultFilterChain) {
			for _, f := range fc.GetFilters() {
				if f.GetConfigDiscovery() != nil {
					add(f.Name)
				}
				var hcm hcmv3.HttpConnectionManager
				if f.GetTypedConfig().MessageIs(&hcm) && f.GetTypedConfig().UnmarshalTo(&hcm) == nil {
					for _, hf := range hcm.HttpFilters {
						if hf.GetConfigDiscovery() != nil {
							add(hf.Name)
						}
					}
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

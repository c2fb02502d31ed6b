package loadgen

import (
	"fmt"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	httpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// istioLikeCluster is an outbound EDS cluster shaped like istiod's (circuit
// breakers, HTTP protocol options, an mTLS transport socket match, istio
// metadata): about 900 bytes, so that the benchmark walks realistic
// messages, not bare names.
func istioLikeCluster(t testing.TB, i int) *clusterv3.Cluster {
	h := fmt.Sprintf("svc-%d.ns-%d.svc.cluster.local", i, i%10)
	name := "outbound|80||" + h
	c := edsCluster(name, true, 0)
	c.LbPolicy = clusterv3.Cluster_LEAST_REQUEST
	c.CircuitBreakers = &clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{{
		MaxConnections: wrapperspb.UInt32(4294967295), MaxPendingRequests: wrapperspb.UInt32(4294967295),
		MaxRequests: wrapperspb.UInt32(4294967295), MaxRetries: wrapperspb.UInt32(4294967295),
		TrackRemaining: true,
	}}}
	c.TypedExtensionProtocolOptions = map[string]*anypb.Any{
		"envoy.extensions.upstreams.http.v3.HttpProtocolOptions": mustAny(t, &httpv3.HttpProtocolOptions{
			CommonHttpProtocolOptions: &corev3.HttpProtocolOptions{IdleTimeout: durationpb.New(time.Hour)},
			UpstreamProtocolOptions: &httpv3.HttpProtocolOptions_UseDownstreamProtocolConfig{
				UseDownstreamProtocolConfig: &httpv3.HttpProtocolOptions_UseDownstreamHttpConfig{},
			},
		}),
	}
	c.TransportSocketMatches = []*clusterv3.Cluster_TransportSocketMatch{{
		Name:  "tlsMode-istio",
		Match: &structpb.Struct{Fields: map[string]*structpb.Value{"tlsMode": structpb.NewStringValue("istio")}},
		TransportSocket: &corev3.TransportSocket{Name: "envoy.transport_sockets.tls", ConfigType: &corev3.TransportSocket_TypedConfig{
			TypedConfig: mustAny(t, &tlsv3.UpstreamTlsContext{Sni: "outbound_.80_._." + h, CommonTlsContext: &tlsv3.CommonTlsContext{
				AlpnProtocols: []string{"istio-peer-exchange", "istio"},
				TlsCertificateSdsSecretConfigs: []*tlsv3.SdsSecretConfig{{Name: "default", SdsConfig: &corev3.ConfigSource{
					ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}}}}},
			}}),
		}},
	}}
	c.Metadata = &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{"istio": {Fields: map[string]*structpb.Value{
		"services": structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{structpb.NewStructValue(&structpb.Struct{
			Fields: map[string]*structpb.Value{"host": structpb.NewStringValue(h), "name": structpb.NewStringValue(fmt.Sprint("svc-", i)),
				"namespace": structpb.NewStringValue(fmt.Sprint("ns-", i%10))}})}}),
	}}}}
	return c
}

// cdsResponse is a SotW CDS response of n istio-like clusters.
func cdsResponse(t testing.TB, n int) []byte {
	msgs := make([]proto.Message, n)
	for i := range msgs {
		msgs[i] = istioLikeCluster(t, i)
	}
	return sotwResponse(t, ClusterType, msgs)
}

// BenchmarkDecodeCDS decodes a 1,000-cluster CDS response: lazily (what
// every simulated proxy does) and fully (unmarshal every cluster and run
// ValidateAll, decode "full").
func BenchmarkDecodeCDS(b *testing.B) {
	msg := cdsResponse(b, 1000)
	for _, mode := range []Decode{Lazy, Full} {
		b.Run(string(mode), func(b *testing.B) {
			d := decoder{syms: newSymtab(), full: mode == Full}
			r := new(response)
			b.ReportAllocs()
			b.SetBytes(int64(len(msg)))
			for b.Loop() {
				if err := d.decodeSotW(msg, r); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1000, "ns/cluster")
		})
	}
}

// TestDecodeCDSSmall is BenchmarkDecodeCDS's small-size companion in plain
// go test: both modes agree on a 10-cluster response.
func TestDecodeCDSSmall(t *testing.T) {
	msg := cdsResponse(t, 10)
	for _, mode := range []Decode{Lazy, Full} {
		d := decoder{syms: newSymtab(), full: mode == Full}
		var r response
		if err := d.decodeSotW(msg, &r); err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		if r.resources != 10 || len(r.entries) != 10 || r.invalid != 0 {
			t.Errorf("%s: %d resources, %d entries, %d invalid (%s)", mode, r.resources, len(r.entries), r.invalid, r.whyBad)
		}
	}
}

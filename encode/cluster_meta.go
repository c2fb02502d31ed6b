package encode

import (
	udpatypev1 "github.com/cncf/xds/go/udpa/type/v1"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	caresv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/network/dns_resolver/cares/v3"
	rawbufferv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/raw_buffer/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/pilotfish-mesh/pilotfish/index"
)

// Shared, immutable pieces of generated clusters. They are never mutated
// after init; generated messages may point at them because marshaling only
// reads.
var (
	// clMXFilter is istiod's TCPClusterMx: the
	// istio.metadata_exchange upstream network filter (a TypedStruct, as the
	// extension lives in istio-proxy, not in Envoy's API).
	clMXFilter = &clusterv3.Filter{
		Name: "istio.metadata_exchange",
		TypedConfig: clAny(&udpatypev1.TypedStruct{
			TypeUrl: "type.googleapis.com/envoy.tcp.metadataexchange.config.MetadataExchange",
			Value: &structpb.Struct{Fields: map[string]*structpb.Value{
				"enable_discovery": structpb.NewBoolValue(true),
				"protocol":         structpb.NewStringValue("istio-peer-exchange"),
			}},
		}),
	}
	// clCaresResolver is the c-ares resolver istiod puts on DNS
	// clusters (udp_max_queries: PILOT_DNS_CARES_UDP_MAX_QUERIES, 100).
	clCaresResolver = &corev3.TypedExtensionConfig{
		Name:        "envoy.network.dns_resolver.cares",
		TypedConfig: clAny(&caresv3.CaresDnsResolverConfig{UdpMaxQueries: wrapperspb.UInt32(100)}),
	}
	clRawBufferSocket = &corev3.TransportSocket{
		Name:       "envoy.transport_sockets.raw_buffer",
		ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: clAny(&rawbufferv3.RawBuffer{})},
	}
)

// clAny packs m into an Any with deterministic bytes, so that two
// generations of one key compare equal in verify mode (proto.Equal compares
// an Any's value bytes, and a map inside it would otherwise marshal in
// random order).
//
// Messages built per cluster (TLS contexts, protocol options) hold no maps,
// so vtprotobuf's marshaling (build tag vtprotobuf) is deterministic for
// them too, and several times faster.
func clAny(m proto.Message) *anypb.Any {
	var b []byte
	var err error
	if vt, ok := m.(vtMarshaler); ok && !clHasMaps(m) {
		b = make([]byte, vt.SizeVT())
		_, err = vt.MarshalToSizedBufferVTStrict(b)
	} else {
		b, err = proto.MarshalOptions{Deterministic: true}.Marshal(m)
	}
	if err != nil {
		panic("encode: marshaling " + string(m.ProtoReflect().Descriptor().FullName()) + ": " + err.Error())
	}
	return &anypb.Any{TypeUrl: "type.googleapis.com/" + string(m.ProtoReflect().Descriptor().FullName()), Value: b}
}

func clU32(v uint32) *wrapperspb.UInt32Value { return &wrapperspb.UInt32Value{Value: v} }

func clStructString(s string) *structpb.Value {
	return &structpb.Value{Kind: &structpb.Value_StringValue{StringValue: s}}
}

func clStructBool(b bool) *structpb.Value {
	return &structpb.Value{Kind: &structpb.Value_BoolValue{BoolValue: b}}
}

// clIstioMetadata returns the cluster's filter_metadata["istio"], creating it.
func clIstioMetadata(c *clusterv3.Cluster) *structpb.Struct {
	if c.Metadata == nil {
		c.Metadata = &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{}}
	}
	if c.Metadata.FilterMetadata == nil {
		c.Metadata.FilterMetadata = map[string]*structpb.Struct{}
	}
	m, ok := c.Metadata.FilterMetadata["istio"]
	if !ok {
		m = &structpb.Struct{Fields: map[string]*structpb.Value{}}
		c.Metadata.FilterMetadata["istio"] = m
	}
	return m
}

// clServiceMetadata is istiod's buildServiceMetadata: host, short name and
// namespace. A ServiceEntry's short name is its host, as in istiod.
func clServiceMetadata(k clIn, svc *index.Service) *structpb.Value {
	host := k.names.String(svc.Key.Host)
	name := host
	if svc.Origin == index.OriginKubernetes && svc.Name != 0 {
		name = k.names.String(svc.Name)
	}
	return &structpb.Value{Kind: &structpb.Value_StructValue{StructValue: &structpb.Struct{Fields: map[string]*structpb.Value{
		"host":      clStructString(host),
		"name":      clStructString(name),
		"namespace": clStructString(k.names.String(svc.Key.Namespace)),
	}}}}
}

// clSetServiceMetadata sets filter_metadata.istio.services (telemetry).
func clSetServiceMetadata(c *clusterv3.Cluster, services ...*structpb.Value) {
	clIstioMetadata(c).Fields["services"] = &structpb.Value{Kind: &structpb.Value_ListValue{
		ListValue: &structpb.ListValue{Values: services},
	}}
}

// clAddConfigMetadata sets filter_metadata.istio.config to the
// DestinationRule's API path, as istiod's AddConfigInfoMetadata does.
func clAddConfigMetadata(c *clusterv3.Cluster, k clIn) {
	cfg := k.DestinationRule
	path := "/apis/networking.istio.io/v1/namespaces/" + k.names.String(cfg.Key.Namespace) +
		"/destination-rule/" + k.names.String(cfg.Key.Name)
	clIstioMetadata(c).Fields["config"] = clStructString(path)
}

// clHasMaps reports whether m's type can hold a map (a Struct, a TypedStruct):
// those are marshaled deterministically by proto.Marshal instead.
func clHasMaps(m proto.Message) bool {
	switch m.(type) {
	case *udpatypev1.TypedStruct, *structpb.Struct:
		return true
	}
	return false
}

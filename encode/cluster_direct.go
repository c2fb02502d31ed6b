package encode

import (
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/pilotfish-mesh/pilotfish/index"
)

// Most outbound clusters have no DestinationRule: an EDS cluster whose
// bytes differ from its neighbours' only in its name, its service's
// telemetry metadata and, with auto mTLS, its SNI and SANs. The direct
// encoder writes those clusters from their strings and a few constant
// pre-encoded fields instead of building some forty messages (two structpb
// maps among them) and marshaling them: cold CDS of one router on a
// 1,000-service mesh is dominated by exactly that. Every other cluster
// (DestinationRules, DNS and ORIGINAL_DST, proxyless gRPC, inbound) is
// built as a message by [Cluster], the reference the direct encoding is
// checked against (verify mode, TestAppendClusterMatchesReference).

// Cluster field numbers the direct encoder writes.
const (
	cdName                      protowire.Number = 1
	cdType                      protowire.Number = 2
	cdEdsClusterConfig          protowire.Number = 3
	cdConnectTimeout            protowire.Number = 4
	cdLbPolicy                  protowire.Number = 6
	cdMetadata                  protowire.Number = 25
	cdAltStatName               protowire.Number = 28
	cdUpstreamConnectionOptions protowire.Number = 30
	cdTransportSocketMatches    protowire.Number = 43

	// Cluster.EdsClusterConfig{eds_config: 1, service_name: 2}
	cdEdsConfig      protowire.Number = 1
	cdEdsServiceName protowire.Number = 2
	// google.protobuf.Duration{seconds: 1, nanos: 2}
	cdSeconds protowire.Number = 1
	cdNanos   protowire.Number = 2
)

// Constant fields, encoded once with their tags from the reference
// messages, so they cannot drift from what [Cluster] builds.
var (
	cdEdsConfigBytes      = cdInner(cdFieldBytes(&clusterv3.Cluster{EdsClusterConfig: &clusterv3.Cluster_EdsClusterConfig{EdsConfig: clEnvoyEDSConfig}}))
	cdCircuitBreakerBytes = cdFieldBytes(&clusterv3.Cluster{CircuitBreakers: clDefaultCircuitBreakers})
	cdCommonLbBytes       = cdFieldBytes(&clusterv3.Cluster{CommonLbConfig: (&clState{c: &clusterv3.Cluster{CommonLbConfig: &clusterv3.Cluster_CommonLbConfig{}}}).withDefaultLb().CommonLbConfig})
	cdFiltersBytes        = cdFieldBytes(&clusterv3.Cluster{Filters: []*clusterv3.Filter{clMXFilter}})
	cdH2OptionsBytes      = cdProtocolOptionsBytes((*clState).setH2)
	cdDownstreamBytes     = cdProtocolOptionsBytes((*clState).setUseDownstreamProtocol)
	cdLeastRequest        = protowire.AppendVarint(protowire.AppendTag(nil, cdLbPolicy, protowire.VarintType), uint64(clusterv3.Cluster_LEAST_REQUEST))
	cdTypeEDS             = protowire.AppendVarint(protowire.AppendTag(nil, cdType, protowire.VarintType), uint64(clusterv3.Cluster_EDS))
)

// withDefaultLb applies the default load balancer to an empty cluster (the
// panic threshold istiod turns off), for cdCommonLbBytes.
func (s *clState) withDefaultLb() *clusterv3.Cluster {
	s.applyLoadBalancer(nil)
	return s.c
}

func cdFieldBytes(c *clusterv3.Cluster) []byte {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(c)
	if err != nil {
		panic("encode: cluster constant: " + err.Error())
	}
	return b
}

// cdProtocolOptionsBytes is typed_extension_protocol_options as finish
// writes it after set.
func cdProtocolOptionsBytes(set func(*clState)) []byte {
	s := &clState{c: &clusterv3.Cluster{}}
	set(s)
	return cdFieldBytes(&clusterv3.Cluster{TypedExtensionProtocolOptions: s.finish().TypedExtensionProtocolOptions})
}

// ClusterDirect reports whether [AppendCluster] encodes the cluster k
// describes directly: an outbound EDS cluster of a sidecar or router with
// no DestinationRule (nor ServiceEntry subjectAltNames), in a mesh whose
// localityLbSetting distributes nothing and which sets no
// defaultTrafficPolicy (either changes every cluster). It allocates
// nothing.
func ClusterDirect(k *ClusterKey) bool {
	return k.Role == ClusterOutbound && k.DestinationRule == nil && k.Subset == "" && k.Service != nil &&
		len(k.Service.SubjectAltNames) == 0 &&
		(k.ProxyType == ProxySidecar || k.ProxyType == ProxyRouter) &&
		clDiscoveryType(k.ProxyType, k.Service) == clusterv3.Cluster_EDS &&
		(k.Mesh.localityLB() == nil || len(k.Mesh.LocalityLB.Distribute) == 0) &&
		(k.Mesh == nil || k.Mesh.DefaultTrafficPolicy == "")
}

// AppendCluster is the direct encoding of a cluster [ClusterDirect]
// accepts, for [ResourceAppend]: prefix, then the cluster as a
// length-delimited value. [Cluster] is its reference.
func AppendCluster(prefix []byte, n index.Names, key *ClusterKey) (string, []byte) {
	k := clIn{key, n}
	host := clHostname(k)
	ns := k.names.String(k.Service.Key.Namespace)
	short := host
	if k.Service.Origin == index.OriginKubernetes && k.Service.Name != 0 {
		short = k.names.String(k.Service.Name)
	}
	size := len(prefix) + 3 + cdFixedSize + 3*(len(host)+24) + len(host) + len(short) + len(ns)
	if k.Mesh.keepalive() != nil {
		size += cdKeepaliveReserve
	}
	if cdAutoMTLS(k) {
		size += cdAutoMTLSReserve(k, host)
	}
	dst := make([]byte, 0, size)
	dst = append(dst, prefix...)
	body := cdOpenLen2(&dst)

	dst = protowire.AppendTag(dst, cdName, protowire.BytesType)
	nl := openLen(&dst)
	dst = AppendClusterName(dst, k.Port.Number, "", host)
	name := string(dst[nl+1:])
	dst = closeLen(dst, nl)
	dst = append(dst, cdTypeEDS...)

	// eds_cluster_config: the shared ADS source, then service_name.
	dst = protowire.AppendTag(dst, cdEdsClusterConfig, protowire.BytesType)
	eds := openLen(&dst)
	dst = append(dst, cdEdsConfigBytes...) // eds_config
	dst = protowire.AppendTag(dst, cdEdsServiceName, protowire.BytesType)
	dst = protowire.AppendString(dst, name)
	dst = closeLen(dst, eds)

	dst = cdAppendConnectTimeout(dst, k.Mesh)
	dst = append(dst, cdLeastRequest...)
	dst = append(dst, cdCircuitBreakerBytes...)
	dst = cdAppendMetadata(dst, k, host, short, ns)
	dst = append(dst, cdCommonLbBytes...)
	dst = protowire.AppendTag(dst, cdAltStatName, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(len(name)+1))
	dst = append(dst, name...)
	dst = append(dst, ';')
	if ka := k.Mesh.keepalive(); ka != nil {
		dst = cdAppendKeepalive(dst, ka)
	}

	// Upstream protocol options, as setUpstreamProtocol picks them (and
	// meshConfig's h2UpgradePolicy, as applyTrafficPolicy).
	p := k.Port.Protocol
	h2 := p == index.ProtocolHTTP2 || p == index.ProtocolGRPC || p == index.ProtocolGRPCWeb || clMeshH2Upgrade(p, k.Mesh)
	switch {
	case h2:
		dst = append(dst, cdH2OptionsBytes...)
	case p == index.ProtocolUnknown && k.ProxyType == ProxySidecar:
		dst = append(dst, cdDownstreamBytes...)
	}
	dst = append(dst, cdFiltersBytes...)
	dst = cdAppendAutoMTLS(dst, k, host, h2)
	return name, cdCloseLen2(dst, body)
}

// cdAppendKeepalive writes upstream_connection_options as clKeepalive
// builds it for the mesh's tcpKeepalive alone: tcp_keepalive {probes 1,
// time 2, interval 3}, each a UInt32Value whose value 0 encodes empty.
func cdAppendKeepalive(dst []byte, ka *TCPKeepalive) []byte {
	wrapped := func(n protowire.Number, v uint32) int {
		inner := 0
		if v != 0 {
			inner = 1 + protowire.SizeVarint(uint64(v))
		}
		return protowire.SizeTag(n) + protowire.SizeVarint(uint64(inner)) + inner
	}
	appendWrapped := func(dst []byte, n protowire.Number, v uint32) []byte {
		dst = protowire.AppendTag(dst, n, protowire.BytesType)
		if v == 0 {
			return append(dst, 0)
		}
		dst = protowire.AppendVarint(dst, uint64(1+protowire.SizeVarint(uint64(v))))
		dst = protowire.AppendTag(dst, 1, protowire.VarintType)
		return protowire.AppendVarint(dst, uint64(v))
	}
	tk := 0
	if ka.Probes > 0 {
		tk += wrapped(1, ka.Probes)
	}
	if ka.HasTime {
		tk += wrapped(2, ka.Time)
	}
	if ka.HasInterval {
		tk += wrapped(3, ka.Interval)
	}
	dst = protowire.AppendTag(dst, cdUpstreamConnectionOptions, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(protowire.SizeTag(1)+protowire.SizeVarint(uint64(tk))+tk))
	dst = protowire.AppendTag(dst, 1, protowire.BytesType) // UpstreamConnectionOptions.tcp_keepalive
	dst = protowire.AppendVarint(dst, uint64(tk))
	if ka.Probes > 0 {
		dst = appendWrapped(dst, 1, ka.Probes)
	}
	if ka.HasTime {
		dst = appendWrapped(dst, 2, ka.Time)
	}
	if ka.HasInterval {
		dst = appendWrapped(dst, 3, ka.Interval)
	}
	return dst
}

// cdKeepaliveReserve is room for upstream_connection_options (tcpKeepalive).
const cdKeepaliveReserve = 24

// cdOpenLen2 and cdCloseLen2 are openLen and closeLen for a value of 128
// to 16,383 bytes, as a cluster is: two bytes are reserved for its length,
// so the value is moved only when it is smaller or larger than that.
func cdOpenLen2(dst *[]byte) int {
	*dst = append(*dst, 0, 0)
	return len(*dst) - 2
}

func cdCloseLen2(dst []byte, at int) []byte {
	n := len(dst) - at - 2
	switch w := protowire.SizeVarint(uint64(n)); w {
	case 2:
		dst[at], dst[at+1] = byte(n)|0x80, byte(n>>7)
		return dst
	case 1:
		copy(dst[at+1:], dst[at+2:])
		dst[at] = byte(n)
		return dst[:len(dst)-1]
	default:
		dst = append(dst, make([]byte, w-2)...)
		copy(dst[at+w:], dst[at+2:at+2+n])
		protowire.AppendVarint(dst[at:at], uint64(n))
		return dst
	}
}

// cdFixedSize bounds the constant fields' bytes, for the first allocation.
var cdFixedSize = len(cdEdsConfigBytes) + len(cdCircuitBreakerBytes) + len(cdCommonLbBytes) + len(cdFiltersBytes) +
	max(len(cdH2OptionsBytes), len(cdDownstreamBytes)) + 64

// cdInner is the value of the one length-delimited field b encodes: the
// fields of an encoded message's only field, to be written inside it.
func cdInner(b []byte) []byte {
	_, typ, n := protowire.ConsumeTag(b)
	if typ != protowire.BytesType || n < 0 {
		panic("encode: cluster constant is not one message field")
	}
	v, m := protowire.ConsumeBytes(b[n:])
	if m < 0 || n+m != len(b) {
		panic("encode: cluster constant is not one message field")
	}
	return v
}

// cdAppendConnectTimeout writes connect_timeout as clConnectTimeout gives it.
func cdAppendConnectTimeout(dst []byte, m *Mesh) []byte {
	d := clConnectTimeout(m)
	dst = protowire.AppendTag(dst, cdConnectTimeout, protowire.BytesType)
	at := openLen(&dst)
	if d.Seconds != 0 {
		dst = protowire.AppendTag(dst, cdSeconds, protowire.VarintType)
		dst = protowire.AppendVarint(dst, uint64(d.Seconds))
	}
	if d.Nanos != 0 {
		dst = protowire.AppendTag(dst, cdNanos, protowire.VarintType)
		dst = protowire.AppendVarint(dst, uint64(int64(d.Nanos)))
	}
	return closeLen(dst, at)
}

// cdAppendMetadata writes filter_metadata.istio: {external: true} for a
// mesh-external service, then services: [{host, name, namespace}] — the
// keys sorted, as the deterministic marshal of clOutbound's Struct gives.
// Every length is computed before it is written, so nothing is moved.
func cdAppendMetadata(dst []byte, k clIn, host, short, ns string) []byte {
	svc := cdStringFieldSize("host", host) + cdStringFieldSize("name", short) + cdStringFieldSize("namespace", ns)
	structValue := cdLenSize(svc)  // Value{struct_value}
	list := cdLenSize(structValue) // ListValue{values: [that]}
	listValue := cdLenSize(list)   // Value{list_value}
	services := cdEntrySize("services", listValue)
	istio := cdLenSize(services)
	if k.Service.MeshExternal {
		istio += len(cdExternalField)
	}
	entry := cdEntrySize("istio", istio)

	dst = protowire.AppendTag(dst, cdMetadata, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(cdLenSize(entry)))
	dst = cdAppendEntryHead(dst, 1, entry, "istio", istio) // Metadata.filter_metadata
	if k.Service.MeshExternal {
		dst = append(dst, cdExternalField...)
	}
	dst = cdAppendEntryHead(dst, 1, services, "services", listValue) // Struct.fields
	dst = protowire.AppendTag(dst, 6, protowire.BytesType)           // Value.list_value
	dst = protowire.AppendVarint(dst, uint64(list))
	dst = protowire.AppendTag(dst, 1, protowire.BytesType) // ListValue.values
	dst = protowire.AppendVarint(dst, uint64(structValue))
	dst = protowire.AppendTag(dst, 5, protowire.BytesType) // Value.struct_value
	dst = protowire.AppendVarint(dst, uint64(svc))
	dst = cdAppendStringField(dst, "host", host)
	dst = cdAppendStringField(dst, "name", short)
	return cdAppendStringField(dst, "namespace", ns)
}

// cdExternalField is the Struct field external: true.
var cdExternalField = cdAppendBoolField(nil, "external", true)

// cdLenSize is the size of a length-delimited field of n bytes (one-byte tag).
func cdLenSize(n int) int { return 1 + protowire.SizeVarint(uint64(n)) + n }

// cdEntrySize is a map entry {key: 1 string, value: 2 message of n bytes}.
func cdEntrySize(key string, n int) int { return cdLenSize(len(key)) + cdLenSize(n) }

// cdStringFieldSize is a Struct.fields entry (field 1) holding a string Value.
func cdStringFieldSize(key, val string) int {
	return cdLenSize(cdEntrySize(key, cdLenSize(len(val))))
}

// cdAppendEntryHead writes a map entry's tag (field), its size, its key,
// and the tag and size of its value (n bytes), which the caller writes.
func cdAppendEntryHead(dst []byte, field protowire.Number, size int, key string, n int) []byte {
	dst = protowire.AppendTag(dst, field, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(size))
	dst = protowire.AppendTag(dst, 1, protowire.BytesType)
	dst = protowire.AppendString(dst, key)
	dst = protowire.AppendTag(dst, 2, protowire.BytesType)
	return protowire.AppendVarint(dst, uint64(n))
}

func cdAppendStringField(dst []byte, key, val string) []byte {
	value := cdLenSize(len(val))
	dst = cdAppendEntryHead(dst, 1, cdEntrySize(key, value), key, value)
	dst = protowire.AppendTag(dst, 3, protowire.BytesType) // Value.string_value
	return protowire.AppendString(dst, val)
}

func cdAppendBoolField(dst []byte, key string, b bool) []byte {
	value := 2
	dst = cdAppendEntryHead(dst, 1, cdEntrySize(key, value), key, value)
	dst = protowire.AppendTag(dst, 4, protowire.VarintType) // Value.bool_value
	return protowire.AppendVarint(dst, protowire.EncodeBool(b))
}

// ClusterResource returns the cached cluster k describes, encoded directly
// when [ClusterDirect] accepts k and built by [Cluster] otherwise (the same
// cache key either way: the two encodings describe the same message).
func ClusterResource(c *Cache, n index.Names, k *ClusterKey) (*Entry, error) {
	if ClusterDirect(k) {
		return Resource(c, n, k, clusterDirectGen)
	}
	return Resource(c, n, k, clusterGen)
}

var (
	clusterGen       = resourceGen(KindCluster, ClusterType, Cluster)
	clusterDirectGen = resourceGenAppend(KindCluster, ClusterType, Cluster, AppendCluster)
)

package encode

import (
	"slices"
	"strconv"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// Auto mTLS without a DestinationRule gives every in-mesh cluster the same
// two transport socket matches, differing only in the SNI and the SANs of
// the ISTIO_MUTUAL context (and its ALPN on HTTP/2 ports). They are written
// around constant pre-encoded fields. The TLS context travels as an Any
// whose value proto.Equal compares byte for byte, so its fields are written
// in the order clAny's marshal writes them: ascending field numbers, which
// vtprotobuf and (the one oneof, combined_validation_context, being the
// highest field) Go's protobuf both give; the constant parts come from the
// same marshaler (cdMsgBytes).

// Field numbers of the TLS messages written here.
const (
	cdTSMTransportSocket protowire.Number = 3 // TransportSocketMatch.transport_socket
	cdTSTypedConfig      protowire.Number = 3 // TransportSocket.typed_config
	cdAnyValue           protowire.Number = 2 // Any.value
	cdUpstreamCommon     protowire.Number = 1 // UpstreamTlsContext.common_tls_context
	cdUpstreamSNI        protowire.Number = 2 // UpstreamTlsContext.sni
	cdCommonCombined     protowire.Number = 8 // CommonTlsContext.combined_validation_context
	cdCombinedDefault    protowire.Number = 1 // CombinedCertificateValidationContext.default_validation_context
	cdValidationSANs     protowire.Number = 9 // CertificateValidationContext.match_subject_alt_names
	cdMatcherExact       protowire.Number = 1 // StringMatcher.exact
)

var (
	// TransportSocketMatch "tlsMode-istio": its name and match.
	cdTSMIstioHead = cdMsgBytes(&clusterv3.Cluster_TransportSocketMatch{Name: "tlsMode-istio", Match: clMatchIstio})
	// The "tlsMode-disabled" match, whole, with its Cluster field tag.
	cdTSMDisabled = cdFieldBytes(&clusterv3.Cluster{TransportSocketMatches: []*clusterv3.Cluster_TransportSocketMatch{
		{Name: "tlsMode-disabled", Match: clMatchAny, TransportSocket: clRawBufferSocket},
	}})
	cdTSName      = cdMsgBytes(&corev3.TransportSocket{Name: clTLSSocket})
	cdTLSTypeURL  = cdMsgBytes(&anypb.Any{TypeUrl: "type.googleapis.com/" + string((&tlsv3.UpstreamTlsContext{}).ProtoReflect().Descriptor().FullName())})
	cdTLSParams   = cdMsgBytes(&tlsv3.CommonTlsContext{TlsParams: clTLSParams})
	cdALPN        = cdMsgBytes(&tlsv3.CommonTlsContext{AlpnProtocols: clALPNInMesh})
	cdALPNH2      = cdMsgBytes(&tlsv3.CommonTlsContext{AlpnProtocols: clALPNInMeshH2})
	cdSDSDefault  = cdMsgBytes(&tlsv3.CommonTlsContext{TlsCertificateSdsSecretConfigs: clSDSDefaultList})
	cdSDSRoot     = cdMsgBytes(&tlsv3.CommonTlsContext_CombinedCertificateValidationContext{ValidationContextSdsSecretConfig: clSDSRootConfig})
	cdTSMTagBytes = protowire.AppendTag(nil, cdTransportSocketMatches, protowire.BytesType)
)

// cdMsgBytes encodes a constant as clAny would (vtprotobuf's field order
// when available): parts of an Any's value must match its bytes.
func cdMsgBytes(m proto.Message) []byte {
	var b []byte
	var err error
	if vt, ok := m.(vtMarshaler); ok {
		b, err = appendVT(nil, vt)
	} else {
		b, err = proto.MarshalOptions{Deterministic: true}.Marshal(m)
	}
	if err != nil {
		panic("encode: cluster constant: " + err.Error())
	}
	return b
}

// cdAutoMTLS reports whether applyUpstreamTLS gives a cluster without a
// DestinationRule auto mTLS: an in-mesh service whose mTLS mode is known.
func cdAutoMTLS(k clIn) bool {
	return !k.Service.MeshExternal && (k.Mesh == nil || k.Mesh.EnableAutoMTLS) &&
		k.MTLS != ServiceMTLSUnknown && k.MTLS != ServiceMTLSDisable
}

// cdAppendAutoMTLS appends the auto mTLS transport socket matches when
// they apply.
func cdAppendAutoMTLS(dst []byte, k clIn, host string, h2 bool) []byte {
	if !cdAutoMTLS(k) {
		return dst
	}
	// The SANs: spiffe://TD/ns/NS/sa/SA, sorted (by SA: the rest is common).
	var scratch [8]string
	sas := scratch[:0]
	for _, sa := range k.ServiceAccounts {
		sas = append(sas, k.names.String(sa))
	}
	slices.Sort(sas)
	td := "cluster.local"
	if k.Mesh != nil && k.Mesh.TrustDomain != "" {
		td = k.Mesh.TrustDomain
	}
	ns := k.names.String(k.Service.Key.Namespace)
	sanPrefix := len("spiffe://") + len(td) + len("/ns/") + len(ns) + len("/sa/")
	// With trust domain aliases the identities of every trust domain,
	// sorted as strings (rare: built as strings).
	var full []string
	if k.Mesh != nil && len(k.Mesh.TrustDomainAliases) > 0 && len(sas) > 0 {
		for _, sa := range sas {
			full = append(full, "spiffe://"+td+"/ns/"+ns+"/sa/"+sa)
		}
		full = clExpandTrustDomains(full, k.Mesh.TrustDomainAliases)
		slices.Sort(full)
		full = slices.Compact(full)
		sas = nil // written as the strings of full
	}

	sans := 0
	for _, sa := range sas {
		sans += cdLenSize(cdLenSize(sanPrefix + len(sa)))
	}
	for _, san := range full {
		sans += cdLenSize(cdLenSize(len(san)))
	}
	combined := cdLenSize(sans) + len(cdSDSRoot)
	alpn := cdALPN
	if h2 {
		alpn = cdALPNH2
	}
	common := len(cdTLSParams) + len(alpn) + len(cdSDSDefault) + cdLenSize(combined)
	portDigits := cdDigits(k.Port.Number)
	sni := len("outbound_.") + portDigits + len("_._.") + len(host)
	upstream := cdLenSize(common) + cdLenSize(sni)
	anyLen := len(cdTLSTypeURL) + cdLenSize(upstream)
	ts := len(cdTSName) + cdLenSize(anyLen)
	tsm := len(cdTSMIstioHead) + cdLenSize(ts)

	dst = append(dst, cdTSMTagBytes...)
	dst = protowire.AppendVarint(dst, uint64(tsm))
	dst = append(dst, cdTSMIstioHead...)
	dst = protowire.AppendTag(dst, cdTSMTransportSocket, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(ts))
	dst = append(dst, cdTSName...)
	dst = protowire.AppendTag(dst, cdTSTypedConfig, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(anyLen))
	dst = append(dst, cdTLSTypeURL...)
	dst = protowire.AppendTag(dst, cdAnyValue, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(upstream))

	dst = protowire.AppendTag(dst, cdUpstreamCommon, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(common))
	dst = append(dst, cdTLSParams...)
	dst = append(dst, alpn...)
	dst = append(dst, cdSDSDefault...)
	dst = protowire.AppendTag(dst, cdCommonCombined, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(combined))
	dst = protowire.AppendTag(dst, cdCombinedDefault, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(sans))
	for _, san := range full {
		dst = protowire.AppendTag(dst, cdValidationSANs, protowire.BytesType)
		dst = protowire.AppendVarint(dst, uint64(cdLenSize(len(san))))
		dst = protowire.AppendTag(dst, cdMatcherExact, protowire.BytesType)
		dst = protowire.AppendString(dst, san)
	}
	for _, sa := range sas {
		dst = protowire.AppendTag(dst, cdValidationSANs, protowire.BytesType)
		dst = protowire.AppendVarint(dst, uint64(cdLenSize(sanPrefix+len(sa))))
		dst = protowire.AppendTag(dst, cdMatcherExact, protowire.BytesType)
		dst = protowire.AppendVarint(dst, uint64(sanPrefix+len(sa)))
		dst = append(dst, "spiffe://"...)
		dst = append(dst, td...)
		dst = append(dst, "/ns/"...)
		dst = append(dst, ns...)
		dst = append(dst, "/sa/"...)
		dst = append(dst, sa...)
	}
	dst = append(dst, cdSDSRoot...)

	dst = protowire.AppendTag(dst, cdUpstreamSNI, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(sni))
	dst = append(dst, "outbound_."...)
	dst = strconv.AppendUint(dst, uint64(k.Port.Number), 10)
	dst = append(dst, "_._."...)
	dst = append(dst, host...)
	return append(dst, cdTSMDisabled...)
}

// cdAutoMTLSReserve bounds what cdAppendAutoMTLS writes, for the first
// allocation: the constant pieces, the SNI, the SANs of every trust domain
// and room for the tags and lengths. A cached cluster keeps its buffer's
// capacity, so the bound is kept tight.
func cdAutoMTLSReserve(k clIn, host string) int {
	n := len(cdTSMTagBytes) + len(cdTSMIstioHead) + len(cdTSName) + len(cdTLSTypeURL) + len(cdTLSParams) +
		max(len(cdALPN), len(cdALPNH2)) + len(cdSDSDefault) + len(cdSDSRoot) + len(cdTSMDisabled) +
		len("outbound_.") + 10 + len("_._.") + len(host) + 48
	td, copies := len("cluster.local"), 1
	if k.Mesh != nil {
		if k.Mesh.TrustDomain != "" {
			td = len(k.Mesh.TrustDomain)
		}
		for _, a := range k.Mesh.TrustDomainAliases {
			td = max(td, len(a))
		}
		copies += len(k.Mesh.TrustDomainAliases)
	}
	san := len("spiffe://") + td + len("/ns/") + len(k.names.String(k.Service.Key.Namespace)) + len("/sa/") + 8
	for _, sa := range k.ServiceAccounts {
		n += copies * (san + len(k.names.String(sa)))
	}
	return n
}

// cdDigits is the length of n in decimal.
func cdDigits(n uint32) int {
	d := 1
	for ; n >= 10; n /= 10 {
		d++
	}
	return d
}

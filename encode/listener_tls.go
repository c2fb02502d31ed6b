package encode

import (
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	matcher "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// lsCipherSuites are istiod's default server cipher suites.
var lsCipherSuites = []string{
	"ECDHE-ECDSA-AES256-GCM-SHA384",
	"ECDHE-RSA-AES256-GCM-SHA384",
	"ECDHE-ECDSA-AES128-GCM-SHA256",
	"ECDHE-RSA-AES128-GCM-SHA256",
	"AES256-GCM-SHA384",
	"AES128-GCM-SHA256",
}

// ALPN values a sidecar's inbound mTLS accepts.
var (
	lsALPNInboundHTTP = []string{"h2", "http/1.1"}
	lsALPNInboundTCP  = []string{"istio-peer-exchange", "h2", "http/1.1"}
)

// lsSDS is an SDS secret from istio-agent: the workload's ("default",
// "ROOTCA"), with no initial fetch timeout, or a file's ("file-cert:...",
// "file-root:..."), with Envoy's default, as istiod's
// ConstructSdsSecretConfig.
func lsSDS(name string) *tlsv3.SdsSecretConfig {
	s := lsAgentSDS(name)
	if name != "default" && name != "ROOTCA" {
		s.SdsConfig.InitialFetchTimeout = nil
	}
	return s
}

func lsAgentSDS(name string) *tlsv3.SdsSecretConfig {
	return &tlsv3.SdsSecretConfig{Name: name, SdsConfig: &core.ConfigSource{
		ConfigSourceSpecifier: &core.ConfigSource_ApiConfigSource{ApiConfigSource: &core.ApiConfigSource{
			ApiType:                   core.ApiConfigSource_GRPC,
			TransportApiVersion:       core.ApiVersion_V3,
			SetNodeOnFirstMessageOnly: true,
			GrpcServices: []*core.GrpcService{{TargetSpecifier: &core.GrpcService_EnvoyGrpc_{
				EnvoyGrpc: &core.GrpcService_EnvoyGrpc{ClusterName: "sds-grpc"},
			}}},
		}},
		InitialFetchTimeout: durationpb.New(0),
		ResourceApiVersion:  core.ApiVersion_V3,
	}}
}

// lsPeerSANs are the SPIFFE prefixes istio mTLS peers must match: the
// trust domain's, then each other trust domain's, once each, in order
// (istiod's TrustDomainsForValidation).
func lsPeerSANs(trustDomain string, others []string) []*matcher.StringMatcher {
	out := make([]*matcher.StringMatcher, 0, 1+len(others))
	seen := make(map[string]bool, 1+len(others))
	for i := -1; i < len(others); i++ {
		td := trustDomain
		if i >= 0 {
			td = others[i]
		}
		if td == "" || seen[td] {
			continue
		}
		seen[td] = true
		out = append(out, &matcher.StringMatcher{MatchPattern: &matcher.StringMatcher_Prefix{Prefix: "spiffe://" + td + "/"}})
	}
	return out
}

// lsInboundMTLS is istiod's inbound mTLS server context (BuildInboundTLS):
// the workload certificate, peers validated against the root and the trust domain's
// SPIFFE prefix, client certificates required.
func lsInboundMTLS(trustDomain string, peerTrustDomains, alpn []string, meshMTLS *TLSDefaults) *core.TransportSocket {
	// meshConfig.meshMTLS: TLS 1.3 minimum only when it says so (istiod's
	// GetMinTLSVersion), its suites instead of the defaults.
	params := &tlsv3.TlsParameters{
		TlsMinimumProtocolVersion: tlsv3.TlsParameters_TLSv1_2,
		TlsMaximumProtocolVersion: tlsv3.TlsParameters_TLSv1_3,
		CipherSuites:              lsCipherSuites,
	}
	if meshMTLS.MinTLS13 {
		params.TlsMinimumProtocolVersion = tlsv3.TlsParameters_TLSv1_3
	}
	if len(meshMTLS.CipherSuites) > 0 {
		params.CipherSuites = meshMTLS.CipherSuites
	}
	ctx := &tlsv3.DownstreamTlsContext{
		CommonTlsContext: &tlsv3.CommonTlsContext{
			TlsParams:                      params,
			TlsCertificateSdsSecretConfigs: []*tlsv3.SdsSecretConfig{lsSDS("default")},
			ValidationContextType: &tlsv3.CommonTlsContext_CombinedValidationContext{
				CombinedValidationContext: &tlsv3.CommonTlsContext_CombinedCertificateValidationContext{
					DefaultValidationContext: &tlsv3.CertificateValidationContext{
						MatchSubjectAltNames: lsPeerSANs(trustDomain, peerTrustDomains),
					},
					ValidationContextSdsSecretConfig: lsSDS("ROOTCA"),
				},
			},
			AlpnProtocols: alpn,
		},
		RequireClientCertificate: wrapperspb.Bool(true),
	}
	return &core.TransportSocket{
		Name:       "envoy.transport_sockets.tls",
		ConfigType: &core.TransportSocket_TypedConfig{TypedConfig: rtAny(ctx)},
	}
}

package encode

import (
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	networking "istio.io/api/networking/v1alpha3"
)

// clGRPC builds a cluster for a proxyless gRPC client the way istiod's
// grpcgen does: an EDS cluster over ADS with only what gRPC's xDS client
// implements (lb policy, max_requests, explicit ISTIO_MUTUAL through
// certificate provider instances). gRPC gets no auto mTLS: istiod cannot
// know whether the client uses xDS credentials.
func clGRPC(k clIn) *clusterv3.Cluster {
	host := clHostname(k)
	name := ClusterName(k.Port.Number, k.Subset, host)
	c := &clusterv3.Cluster{
		Name:                 name,
		AltStatName:          name + ";",
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
		EdsClusterConfig: &clusterv3.Cluster_EdsClusterConfig{
			ServiceName: name,
			EdsConfig:   clADSConfigSource(false),
		},
	}
	dr := clDestinationRule(k.DestinationRule)
	var subset *networking.Subset
	if k.Subset != "" {
		subset = clFindSubset(dr, k.Subset)
	}
	if dr == nil {
		return c
	}
	p := clResolvePolicy(dr, k.Port.Number, subset, nil) // istiod's gRPC generator has no mesh default
	if p.tls.GetMode() == networking.ClientTLSSettings_ISTIO_MUTUAL {
		s := &clState{k: k, c: c}
		c.TransportSocket = &corev3.TransportSocket{
			Name: clTLSSocket,
			ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: clAny(&tlsv3.UpstreamTlsContext{
				CommonTlsContext: clGRPCCommonTLS(s.spiffeSANs()),
			})},
		}
	}
	if lb := p.loadBalancer; lb != nil {
		if lb.GetConsistentHash() != nil {
			clApplyConsistentHash(c, lb)
		} else if lb.GetSimple() == networking.LoadBalancerSettings_LEAST_REQUEST {
			c.LbPolicy = clusterv3.Cluster_LEAST_REQUEST
		}
		// ROUND_ROBIN is gRPC's default; other policies are not supported
		// by gRPC and are left out, as istiod does.
	}
	// gRFC A32: only max_requests applies to gRPC.
	if n := p.connectionPool.GetHttp().GetHttp2MaxRequests(); n > 0 {
		c.CircuitBreakers = &clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{{MaxRequests: clU32(uint32(n))}}}
	}
	return c
}

// clGRPCCommonTLS is istiod's grpcgen buildCommonTLSContext: certificates
// from the client's "default" certificate provider instance (in the current
// field and in the deprecated one older gRPC releases read), the root from
// its ROOTCA certificate.
//
// One difference: istiod also sets the deprecated
// combined_validation_context.validation_context_certificate_provider_instance,
// which leaves the combined context without its required SDS config and
// fails Envoy's validation (ValidateAll). pilotfish puts the root in
// validation_context.ca_certificate_provider_instance, which gRPC reads
// since 1.66 (gRFC A29).
func clGRPCCommonTLS(sans []string) *tlsv3.CommonTlsContext {
	return &tlsv3.CommonTlsContext{
		TlsCertificateProviderInstance: &tlsv3.CertificateProviderPluginInstance{InstanceName: "default", CertificateName: "default"},
		TlsCertificateCertificateProviderInstance: &tlsv3.CommonTlsContext_CertificateProviderInstance{ //nolint:staticcheck // deprecated, for old clients
			InstanceName: "default", CertificateName: "default",
		},
		ValidationContextType: &tlsv3.CommonTlsContext_ValidationContext{
			ValidationContext: &tlsv3.CertificateValidationContext{
				MatchSubjectAltNames:          clExactSANs(sans),
				CaCertificateProviderInstance: &tlsv3.CertificateProviderPluginInstance{InstanceName: "default", CertificateName: "ROOTCA"},
			},
		},
	}
}

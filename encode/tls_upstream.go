package encode

import (
	"slices"
	"strings"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/pilotfish-mesh/pilotfish/index"
)

// Upstream TLS: istiod's cluster_tls.go semantics. Certificates come from
// the istio-agent over SDS (cluster sds-grpc): "default" is the workload
// certificate and "ROOTCA" the mesh root; credentialName secrets come from
// the control plane over ADS as "kubernetes://NAME".
const (
	clSDSCluster   = "sds-grpc"
	clSDSDefault   = "default"
	clSDSRoot      = "ROOTCA"
	clTLSSocket    = "envoy.transport_sockets.tls"
	clCredentialCA = "-cacert"
)

// ALPN values istiod advertises to in-mesh peers (with metadata exchange).
var (
	clALPNInMesh   = []string{"istio-peer-exchange", "istio"}
	clALPNInMeshH2 = []string{"istio-peer-exchange", "istio", "h2"}
	clALPNH2       = []string{"h2"}
)

// clSDS is istiod's ConstructSdsSecretConfig: the agent's SDS server,
// without an initial fetch timeout for the workload identity.
func clSDS(name string) *tlsv3.SdsSecretConfig {
	cs := &corev3.ConfigSource{
		ConfigSourceSpecifier: &corev3.ConfigSource_ApiConfigSource{ApiConfigSource: &corev3.ApiConfigSource{
			ApiType:                   corev3.ApiConfigSource_GRPC,
			SetNodeOnFirstMessageOnly: true,
			TransportApiVersion:       corev3.ApiVersion_V3,
			GrpcServices: []*corev3.GrpcService{{TargetSpecifier: &corev3.GrpcService_EnvoyGrpc_{
				EnvoyGrpc: &corev3.GrpcService_EnvoyGrpc{ClusterName: clSDSCluster},
			}}},
		}},
		ResourceApiVersion: corev3.ApiVersion_V3,
	}
	if name == clSDSDefault || name == clSDSRoot {
		cs.InitialFetchTimeout = durationpb.New(0 * time.Second)
	}
	return &tlsv3.SdsSecretConfig{Name: name, SdsConfig: cs}
}

// clCredentialSDS is a credentialName secret fetched from the control plane
// over ADS (istiod's ConstructSdsSecretConfigForCredential).
func clCredentialSDS(name string) *tlsv3.SdsSecretConfig {
	if !strings.HasPrefix(name, "kubernetes://") && !strings.HasPrefix(name, "configmap://") &&
		!strings.HasPrefix(name, "kubernetes-gateway://") {
		name = "kubernetes://" + name
	}
	return &tlsv3.SdsSecretConfig{Name: name, SdsConfig: &corev3.ConfigSource{
		ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
		ResourceApiVersion:    corev3.ApiVersion_V3,
	}}
}

// Shared, immutable pieces of upstream TLS contexts (generated messages
// point at them; marshaling only reads).
var (
	clTLSParams = &tlsv3.TlsParameters{
		TlsMinimumProtocolVersion: tlsv3.TlsParameters_TLSv1_2,
		TlsMaximumProtocolVersion: tlsv3.TlsParameters_TLSv1_3,
	}
	clSDSDefaultList = []*tlsv3.SdsSecretConfig{clSDS(clSDSDefault)}
	clSDSRootConfig  = clSDS(clSDSRoot)
	clMatchIstio     = &structpb.Struct{Fields: map[string]*structpb.Value{"tlsMode": clStructString("istio")}}
	clMatchAny       = &structpb.Struct{}
)

func clCommonTLS() *tlsv3.CommonTlsContext {
	return &tlsv3.CommonTlsContext{TlsParams: clTLSParams}
}

func clExactSANs(sans []string) []*matcherv3.StringMatcher {
	if len(sans) == 0 {
		return nil
	}
	out := make([]*matcherv3.StringMatcher, len(sans))
	for i, s := range sans {
		out[i] = &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: s}}
	}
	return out
}

// spiffeSANs is istiod's PushContext.ServiceAccounts for the key's
// service: its endpoints' service accounts as SPIFFE identities, and a
// ServiceEntry's subjectAltNames, sorted, without duplicates.
func (s *clState) spiffeSANs() []string {
	k := s.k
	var sans []index.Sym
	if k.Service != nil {
		sans = k.Service.SubjectAltNames
	}
	if len(k.ServiceAccounts) == 0 && len(sans) == 0 {
		return nil
	}
	td := "cluster.local"
	if k.Mesh != nil && k.Mesh.TrustDomain != "" {
		td = k.Mesh.TrustDomain
	}
	ns := k.names.String(k.Service.Key.Namespace)
	out := make([]string, 0, len(k.ServiceAccounts)+len(sans))
	for _, sa := range k.ServiceAccounts {
		out = append(out, "spiffe://"+td+"/ns/"+ns+"/sa/"+k.names.String(sa))
	}
	for _, san := range sans {
		out = append(out, k.names.String(san))
	}
	if k.Mesh != nil && len(k.Mesh.TrustDomainAliases) > 0 {
		out = clExpandTrustDomains(out, k.Mesh.TrustDomainAliases)
	}
	slices.Sort(out) // istiod lists them sorted
	return slices.Compact(out)
}

// clExpandTrustDomains is istiod's spiffe.ExpandWithTrustDomains: each
// SPIFFE identity spiffe://TD/ns/NS/sa/SA also in every alias trust
// domain (meshConfig.trustDomainAliases); other names as they are.
func clExpandTrustDomains(ids, aliases []string) []string {
	n := len(ids)
	for _, id := range ids[:n] {
		rest, ok := strings.CutPrefix(id, "spiffe://")
		if !ok {
			continue
		}
		_, path, ok := strings.Cut(rest, "/")
		if parts := strings.Split(path, "/"); !ok || len(parts) != 4 || parts[0] != "ns" || parts[2] != "sa" {
			continue // istiod's ParseIdentity refuses it: not expanded
		}
		for _, td := range aliases {
			ids = append(ids, "spiffe://"+td+"/"+path)
		}
	}
	return ids
}

// applyUpstreamTLS is istiod's buildUpstreamTLSSettings plus
// applyUpstreamTLSSettings: the DestinationRule's TLS, or auto mTLS, which
// becomes a transport socket match on the endpoints' tlsMode metadata.
func (s *clState) applyUpstreamTLS(tls *networking.ClientTLSSettings, sni string) {
	k, c := s.k, s.c
	auto := false
	switch {
	case tls == nil:
		if k.Service.MeshExternal || (k.Mesh != nil && !k.Mesh.EnableAutoMTLS) ||
			k.MTLS == ServiceMTLSUnknown || k.MTLS == ServiceMTLSDisable {
			return
		}
		tls = &networking.ClientTLSSettings{Mode: networking.ClientTLSSettings_ISTIO_MUTUAL, Sni: sni, SubjectAltNames: s.spiffeSANs()}
		auto = true
	case tls.Mode == networking.ClientTLSSettings_ISTIO_MUTUAL:
		t := &networking.ClientTLSSettings{Mode: tls.Mode, Sni: tls.Sni, SubjectAltNames: tls.SubjectAltNames, InsecureSkipVerify: tls.InsecureSkipVerify}
		if t.Sni == "" {
			t.Sni = sni
		}
		if t.SubjectAltNames == nil {
			t.SubjectAltNames = s.spiffeSANs()
		}
		tls = t
	}
	ctx := s.upstreamTLSContext(tls)
	if ctx != nil {
		c.TransportSocket = &corev3.TransportSocket{
			Name:       clTLSSocket,
			ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: clAny(ctx)},
		}
	}
	if auto && c.GetType() != clusterv3.Cluster_ORIGINAL_DST {
		ts := c.TransportSocket
		c.TransportSocket = nil
		c.TransportSocketMatches = []*clusterv3.Cluster_TransportSocketMatch{
			{
				Name:            "tlsMode-istio",
				Match:           clMatchIstio,
				TransportSocket: ts,
			},
			{
				Name:            "tlsMode-disabled",
				Match:           clMatchAny,
				TransportSocket: clRawBufferSocket,
			},
		}
	}
}

// upstreamTLSContext is istiod's buildUpstreamClusterTLSContext.
func (s *clState) upstreamTLSContext(tls *networking.ClientTLSSettings) *tlsv3.UpstreamTlsContext {
	// A credentialName in a DestinationRule without a workload selector is
	// ignored for sidecars: it would make every sidecar fetch the secret.
	// A rule with a selector (TLS origination for the workloads it
	// selects) keeps it.
	withSelector := s.k.DestinationRule != nil && s.k.DestinationRule.HasSelector
	if tls.CredentialName != "" && !strings.HasPrefix(tls.CredentialName, "configmap://") && s.k.ProxyType == ProxySidecar &&
		!withSelector && (tls.Mode == networking.ClientTLSSettings_SIMPLE || tls.Mode == networking.ClientTLSSettings_MUTUAL) {
		return nil
	}
	switch tls.Mode {
	case networking.ClientTLSSettings_ISTIO_MUTUAL:
		ctx := &tlsv3.UpstreamTlsContext{CommonTlsContext: clCommonTLS(), Sni: tls.Sni}
		cc := ctx.CommonTlsContext
		cc.TlsCertificateSdsSecretConfigs = clSDSDefaultList
		cc.ValidationContextType = &tlsv3.CommonTlsContext_CombinedValidationContext{
			CombinedValidationContext: &tlsv3.CommonTlsContext_CombinedCertificateValidationContext{
				DefaultValidationContext:         &tlsv3.CertificateValidationContext{MatchSubjectAltNames: clExactSANs(tls.SubjectAltNames)},
				ValidationContextSdsSecretConfig: clSDSRootConfig,
			},
		}
		if ctx.Sni == "" {
			ctx.Sni = s.c.Name
		}
		cc.AlpnProtocols = clALPNInMesh
		if s.isH2() {
			cc.AlpnProtocols = clALPNInMeshH2
		}
		return ctx
	case networking.ClientTLSSettings_SIMPLE:
		return s.userTLSContext(tls, false)
	case networking.ClientTLSSettings_MUTUAL:
		return s.userTLSContext(tls, true)
	default: // DISABLE
		return nil
	}
}

// userTLSContext is istiod's constructUpstreamTLS (SIMPLE and MUTUAL):
// certificates from credentialName over ADS, or files served by the agent
// over SDS ("file-cert:CERT~KEY", "file-root:CA", system roots by default).
func (s *clState) userTLSContext(tls *networking.ClientTLSSettings, mutual bool) *tlsv3.UpstreamTlsContext {
	// meshConfig.tlsDefaults' curves and suites (istiod's applyTLSDefaults).
	ctx := &tlsv3.UpstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{TlsParams: s.k.Mesh.tlsParams()}, Sni: tls.Sni}
	cc := ctx.CommonTlsContext
	insecure := tls.GetInsecureSkipVerify().GetValue()
	sans := tls.SubjectAltNames
	// auto_sni / auto_san_validation when the rule names neither.
	autoSNI := tls.Sni == ""
	autoSAN := autoSNI && len(sans) == 0 && !insecure
	if autoSNI || autoSAN {
		o := s.httpOptions()
		if o.UpstreamHttpProtocolOptions == nil {
			o.UpstreamHttpProtocolOptions = &corev3.UpstreamHttpProtocolOptions{}
		}
		o.UpstreamHttpProtocolOptions.AutoSni = autoSNI
		o.UpstreamHttpProtocolOptions.AutoSanValidation = autoSAN
	}
	// ServiceEntry hosts: their endpoints' service accounts stand in for SANs.
	if s.k.Service.Origin == index.OriginServiceEntry && len(sans) == 0 {
		sans = s.spiffeSANs()
	}
	if tls.CredentialName != "" {
		if mutual {
			cc.TlsCertificateSdsSecretConfigs = []*tlsv3.SdsSecretConfig{clCredentialSDS(tls.CredentialName)}
		}
		if !insecure {
			cc.ValidationContextType = &tlsv3.CommonTlsContext_CombinedValidationContext{
				CombinedValidationContext: &tlsv3.CommonTlsContext_CombinedCertificateValidationContext{
					DefaultValidationContext:         &tlsv3.CertificateValidationContext{MatchSubjectAltNames: clExactSANs(sans)},
					ValidationContextSdsSecretConfig: clCredentialSDS(tls.CredentialName + clCredentialCA),
				},
			}
		}
	} else {
		if mutual {
			if tls.ClientCertificate == "" || tls.PrivateKey == "" {
				// istiod logs and leaves the cluster without TLS.
				return nil
			}
			cc.TlsCertificateSdsSecretConfigs = []*tlsv3.SdsSecretConfig{
				clSDS("file-cert:" + tls.ClientCertificate + "~" + tls.PrivateKey),
			}
		}
		if insecure {
			cc.ValidationContextType = &tlsv3.CommonTlsContext_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{}}
		} else {
			ca := tls.CaCertificates
			if ca == "" {
				ca = "system"
			}
			vc := &tlsv3.CertificateValidationContext{MatchSubjectAltNames: clExactSANs(sans)}
			if tls.CaCrl != "" {
				vc.Crl = &corev3.DataSource{Specifier: &corev3.DataSource_Filename{Filename: tls.CaCrl}}
			}
			cc.ValidationContextType = &tlsv3.CommonTlsContext_CombinedValidationContext{
				CombinedValidationContext: &tlsv3.CommonTlsContext_CombinedCertificateValidationContext{
					DefaultValidationContext:         vc,
					ValidationContextSdsSecretConfig: clSDS("file-root:" + ca),
				},
			}
		}
	}
	if s.isH2() {
		cc.AlpnProtocols = clALPNH2
	}
	return ctx
}

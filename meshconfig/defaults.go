package meshconfig

import (
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	meshv1 "istio.io/api/mesh/v1alpha1"
	"istio.io/api/networking/v1alpha3"
)

// DefaultProxyConfig is istiod's code default for meshConfig.defaultConfig
// (pkg/config/mesh DefaultProxyConfig).
func DefaultProxyConfig() *meshv1.ProxyConfig {
	return &meshv1.ProxyConfig{
		ConfigPath:               "./etc/istio/proxy",
		ClusterName:              &meshv1.ProxyConfig_ServiceCluster{ServiceCluster: "istio-proxy"},
		DrainDuration:            durationpb.New(45 * time.Second),
		TerminationDrainDuration: durationpb.New(5 * time.Second),
		ProxyAdminPort:           15000,
		ControlPlaneAuthPolicy:   meshv1.AuthenticationPolicy_MUTUAL_TLS,
		DiscoveryAddress:         "istiod.istio-system.svc:15012",
		BinaryPath:               "/usr/local/bin/envoy",
		StatNameLength:           189,
		StatusPort:               15020,
	}
}

// Defaults is istiod's code default mesh config (pkg/config/mesh
// DefaultMeshConfig): what a mesh config's fields are applied over, and
// what a cluster without ConfigMap istio runs with.
func Defaults() *meshv1.MeshConfig {
	return &meshv1.MeshConfig{
		EnableTracing:                  true,
		AccessLogEncoding:              meshv1.MeshConfig_TEXT,
		ProtocolDetectionTimeout:       durationpb.New(0),
		IngressService:                 "istio-ingressgateway",
		IngressControllerMode:          meshv1.MeshConfig_STRICT,
		IngressClass:                   "istio",
		TrustDomain:                    "cluster.local",
		TrustDomainAliases:             []string{},
		EnableAutoMtls:                 wrapperspb.Bool(true),
		OutboundTrafficPolicy:          &meshv1.MeshConfig_OutboundTrafficPolicy{Mode: meshv1.MeshConfig_OutboundTrafficPolicy_ALLOW_ANY},
		InboundTrafficPolicy:           &meshv1.MeshConfig_InboundTrafficPolicy{Mode: meshv1.MeshConfig_InboundTrafficPolicy_PASSTHROUGH},
		LocalityLbSetting:              &v1alpha3.LocalityLoadBalancerSetting{Enabled: wrapperspb.Bool(true)},
		Certificates:                   []*meshv1.Certificate{},
		DefaultConfig:                  DefaultProxyConfig(),
		RootNamespace:                  "istio-system",
		ProxyListenPort:                15001,
		ProxyInboundListenPort:         15006,
		ConnectTimeout:                 durationpb.New(10 * time.Second),
		DefaultServiceExportTo:         []string{"*"},
		DefaultVirtualServiceExportTo:  []string{"*"},
		DefaultDestinationRuleExportTo: []string{"*"},
		DnsRefreshRate:                 durationpb.New(60 * time.Second),
		ServiceSettings:                []*meshv1.MeshConfig_ServiceSettings{},
		EnablePrometheusMerge:          wrapperspb.Bool(true),
		DefaultProviders:               &meshv1.MeshConfig_DefaultProviders{},
		ExtensionProviders: []*meshv1.MeshConfig_ExtensionProvider{
			{Name: "prometheus", Provider: &meshv1.MeshConfig_ExtensionProvider_Prometheus{
				Prometheus: &meshv1.MeshConfig_ExtensionProvider_PrometheusMetricsProvider{}}},
			{Name: "stackdriver", Provider: &meshv1.MeshConfig_ExtensionProvider_Stackdriver{
				Stackdriver: &meshv1.MeshConfig_ExtensionProvider_StackdriverProvider{}}},
			{Name: "envoy", Provider: &meshv1.MeshConfig_ExtensionProvider_EnvoyFileAccessLog{
				EnvoyFileAccessLog: &meshv1.MeshConfig_ExtensionProvider_EnvoyFileAccessLogProvider{Path: "/dev/stdout"}}},
		},
	}
}

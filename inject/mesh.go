package inject

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/golang/protobuf/jsonpb" //nolint:staticcheck // istiod's exact JSON (field order, no random spaces) and merge semantics
	protov1 "github.com/golang/protobuf/proto"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	"sigs.k8s.io/yaml"

	meshconfig "istio.io/api/mesh/v1alpha1"
	"istio.io/api/networking/v1alpha3"
)

// defaultProxyConfig is istiod's code default for meshConfig.defaultConfig.
func defaultProxyConfig() *meshconfig.ProxyConfig {
	return &meshconfig.ProxyConfig{
		ConfigPath:               "./etc/istio/proxy",
		ClusterName:              &meshconfig.ProxyConfig_ServiceCluster{ServiceCluster: "istio-proxy"},
		DrainDuration:            durationpb.New(45 * time.Second),
		TerminationDrainDuration: durationpb.New(5 * time.Second),
		ProxyAdminPort:           15000,
		ControlPlaneAuthPolicy:   meshconfig.AuthenticationPolicy_MUTUAL_TLS,
		DiscoveryAddress:         "istiod.istio-system.svc:15012",
		BinaryPath:               "/usr/local/bin/envoy",
		StatNameLength:           189,
		StatusPort:               15020,
	}
}

// DefaultMesh is istiod's code default mesh config (what a mesh config
// file's fields are applied over).
func DefaultMesh() *meshconfig.MeshConfig {
	return &meshconfig.MeshConfig{
		EnableTracing:                  true,
		AccessLogEncoding:              meshconfig.MeshConfig_TEXT,
		ProtocolDetectionTimeout:       durationpb.New(0),
		IngressService:                 "istio-ingressgateway",
		IngressControllerMode:          meshconfig.MeshConfig_STRICT,
		IngressClass:                   "istio",
		TrustDomain:                    "cluster.local",
		TrustDomainAliases:             []string{},
		EnableAutoMtls:                 wrapperspb.Bool(true),
		OutboundTrafficPolicy:          &meshconfig.MeshConfig_OutboundTrafficPolicy{Mode: meshconfig.MeshConfig_OutboundTrafficPolicy_ALLOW_ANY},
		InboundTrafficPolicy:           &meshconfig.MeshConfig_InboundTrafficPolicy{Mode: meshconfig.MeshConfig_InboundTrafficPolicy_PASSTHROUGH},
		LocalityLbSetting:              &v1alpha3.LocalityLoadBalancerSetting{Enabled: wrapperspb.Bool(true)},
		Certificates:                   []*meshconfig.Certificate{},
		DefaultConfig:                  defaultProxyConfig(),
		RootNamespace:                  "istio-system",
		ProxyListenPort:                15001,
		ProxyInboundListenPort:         15006,
		ConnectTimeout:                 durationpb.New(10 * time.Second),
		DefaultServiceExportTo:         []string{"*"},
		DefaultVirtualServiceExportTo:  []string{"*"},
		DefaultDestinationRuleExportTo: []string{"*"},
		DnsRefreshRate:                 durationpb.New(60 * time.Second),
		ServiceSettings:                []*meshconfig.MeshConfig_ServiceSettings{},
		EnablePrometheusMerge:          wrapperspb.Bool(true),
		DefaultProviders:               &meshconfig.MeshConfig_DefaultProviders{},
		ExtensionProviders: []*meshconfig.MeshConfig_ExtensionProvider{
			{Name: "prometheus", Provider: &meshconfig.MeshConfig_ExtensionProvider_Prometheus{
				Prometheus: &meshconfig.MeshConfig_ExtensionProvider_PrometheusMetricsProvider{}}},
			{Name: "stackdriver", Provider: &meshconfig.MeshConfig_ExtensionProvider_Stackdriver{
				Stackdriver: &meshconfig.MeshConfig_ExtensionProvider_StackdriverProvider{}}},
			{Name: "envoy", Provider: &meshconfig.MeshConfig_ExtensionProvider_EnvoyFileAccessLog{
				EnvoyFileAccessLog: &meshconfig.MeshConfig_ExtensionProvider_EnvoyFileAccessLogProvider{Path: "/dev/stdout"}}},
		},
	}
}

// ParseMesh reads a mesh config (the `mesh` key of ConfigMap `istio`)
// as istiod does: its fields replace the defaults', except that
// defaultConfig is merged into the default proxy config (proxyMetadata
// key by key), defaultProviders into the default providers, and
// extensionProviders replace the default providers of the same name.
// Unknown fields are ignored, as istiod ignores them.
func ParseMesh(data []byte) (*meshconfig.MeshConfig, error) {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMesh, err)
	}
	mc := DefaultMesh()
	prevPC, prevDP, prevEP, prevAliases := mc.DefaultConfig, mc.DefaultProviders, mc.ExtensionProviders, mc.TrustDomainAliases
	mc.DefaultConfig = defaultProxyConfig()
	if err := applyJSON(js, mc); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMesh, err)
	}
	var raw map[string]any
	if err := yaml.Unmarshal(js, &raw); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMesh, err)
	}
	mc.DefaultConfig = prevPC
	if pc, ok := raw["defaultConfig"]; ok && pc != nil {
		b, _ := yaml.Marshal(pc)
		if mc.DefaultConfig, err = mergeProxyConfig(prevPC, b); err != nil {
			return nil, fmt.Errorf("%w: defaultConfig: %v", ErrMesh, err)
		}
	}
	fresh := mc.DefaultProviders
	mc.DefaultProviders = prevDP
	if dp, ok := raw["defaultProviders"]; ok && dp != nil {
		mc.DefaultProviders = fresh
	}
	added := mc.ExtensionProviders
	mc.ExtensionProviders = prevEP
	for _, p := range added {
		i := slices.IndexFunc(mc.ExtensionProviders, func(e *meshconfig.MeshConfig_ExtensionProvider) bool { return e.Name == p.Name })
		if i >= 0 {
			mc.ExtensionProviders[i].Provider = p.Provider
		} else {
			mc.ExtensionProviders = append(mc.ExtensionProviders, p)
		}
	}
	aliases := append(slices.Clone(mc.TrustDomainAliases), prevAliases...)
	slices.Sort(aliases)
	mc.TrustDomainAliases = slices.Compact(aliases)
	return mc, nil
}

// mergeProxyConfig returns base with the proxy config in data (YAML or
// JSON) applied over it, as istiod applies proxy.istio.io/config and
// meshConfig.defaultConfig: each field given replaces base's, but
// proxyMetadata is merged key by key and proxyHeaders keeps base's
// headers the new value leaves unset. base is not modified.
func mergeProxyConfig(base *meshconfig.ProxyConfig, data []byte) (*meshconfig.ProxyConfig, error) {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, err
	}
	pc := proto.Clone(base).(*meshconfig.ProxyConfig)
	if err := applyJSON(js, pc); err != nil {
		return nil, err
	}
	if len(base.GetProxyMetadata()) > 0 {
		md := make(map[string]string, len(base.ProxyMetadata)+len(pc.ProxyMetadata))
		for k, v := range base.ProxyMetadata {
			md[k] = v
		}
		for k, v := range pc.ProxyMetadata { // base's own (cloned) or the new value's
			md[k] = v
		}
		pc.ProxyMetadata = md
	}
	if ph, old := pc.ProxyHeaders, base.GetProxyHeaders(); ph != nil && old != nil {
		ph.ForwardedClientCert = firstSet(ph.ForwardedClientCert, old.ForwardedClientCert)
		ph.RequestId = firstSet(ph.RequestId, old.RequestId)
		ph.AttemptCount = firstSet(ph.AttemptCount, old.AttemptCount)
		ph.Server = firstSet(ph.Server, old.Server)
		ph.EnvoyDebugHeaders = firstSet(ph.EnvoyDebugHeaders, old.EnvoyDebugHeaders)
	}
	return pc, nil
}

func firstSet[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// applyJSON sets the fields present in js on m (golang/protobuf's jsonpb:
// a field present replaces m's, one absent is left alone), ignoring
// unknown fields.
func applyJSON(js []byte, m proto.Message) error {
	u := jsonpb.Unmarshaler{AllowUnknownFields: true}
	return u.Unmarshal(strings.NewReader(string(js)), protov1.MessageV1(m))
}

// marshalJSONPB is istiod's protomarshal.ToJSON.
func marshalJSONPB(m proto.Message) (string, error) {
	return (&jsonpb.Marshaler{}).MarshalToString(protov1.MessageV1(m))
}

// trimProxyDefaults returns a copy of pc without the fields that equal
// istiod's defaults, which is what istiod puts in PROXY_CONFIG.
func trimProxyDefaults(pc *meshconfig.ProxyConfig) *meshconfig.ProxyConfig {
	c := proto.Clone(pc).(*meshconfig.ProxyConfig)
	d := defaultProxyConfig()
	if c.ConfigPath == d.ConfigPath {
		c.ConfigPath = ""
	}
	if c.BinaryPath == d.BinaryPath {
		c.BinaryPath = ""
	}
	if c.ControlPlaneAuthPolicy == d.ControlPlaneAuthPolicy {
		c.ControlPlaneAuthPolicy = 0
	}
	if sc, ok := c.ClusterName.(*meshconfig.ProxyConfig_ServiceCluster); ok && sc.ServiceCluster == "istio-proxy" {
		c.ClusterName = nil
	}
	if proto.Equal(c.DrainDuration, d.DrainDuration) {
		c.DrainDuration = nil
	}
	if proto.Equal(c.TerminationDrainDuration, d.TerminationDrainDuration) {
		c.TerminationDrainDuration = nil
	}
	if c.DiscoveryAddress == d.DiscoveryAddress {
		c.DiscoveryAddress = ""
	}
	if proto.Equal(c.EnvoyMetricsService, d.EnvoyMetricsService) {
		c.EnvoyMetricsService = nil
	}
	if proto.Equal(c.EnvoyAccessLogService, d.EnvoyAccessLogService) {
		c.EnvoyAccessLogService = nil
	}
	if proto.Equal(c.Tracing, d.Tracing) {
		c.Tracing = nil
	}
	if c.ProxyAdminPort == d.ProxyAdminPort {
		c.ProxyAdminPort = 0
	}
	if c.StatNameLength == d.StatNameLength {
		c.StatNameLength = 0
	}
	if c.StatusPort == d.StatusPort {
		c.StatusPort = 0
	}
	if proto.Equal(c.Concurrency, d.Concurrency) {
		c.Concurrency = nil
	}
	if len(c.ProxyMetadata) == 0 {
		c.ProxyMetadata = nil
	}
	return c
}

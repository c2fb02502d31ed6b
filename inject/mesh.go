package inject

import (
	"fmt"

	"github.com/golang/protobuf/jsonpb" //nolint:staticcheck // istiod's exact JSON (field order, no random spaces)
	protov1 "github.com/golang/protobuf/proto"
	"google.golang.org/protobuf/proto"

	meshv1 "istio.io/api/mesh/v1alpha1"

	"github.com/pilotfish-mesh/pilotfish/meshconfig"
)

// defaultProxyConfig is istiod's code default for meshConfig.defaultConfig.
func defaultProxyConfig() *meshv1.ProxyConfig { return meshconfig.DefaultProxyConfig() }

// DefaultMesh is istiod's code default mesh config (what a mesh config
// file's fields are applied over).
func DefaultMesh() *meshv1.MeshConfig { return meshconfig.Defaults() }

// ParseMesh reads a mesh config (the `mesh` key of ConfigMap `istio`)
// as istiod does (meshconfig.Parse: istiod's defaults, merge rules and
// validation). Unknown fields are ignored, as istiod ignores them (the
// control plane's mesh source reports them).
func ParseMesh(data []byte) (*meshv1.MeshConfig, error) {
	mc, _, err := meshconfig.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMesh, err)
	}
	return mc, nil
}

// mergeProxyConfig returns base with the proxy config in data applied
// over it, as istiod applies proxy.istio.io/config
// (meshconfig.MergeProxyConfig). base is not modified.
func mergeProxyConfig(base *meshv1.ProxyConfig, data []byte) (*meshv1.ProxyConfig, error) {
	return meshconfig.MergeProxyConfig(base, data)
}

// marshalJSONPB is istiod's protomarshal.ToJSON.
func marshalJSONPB(m proto.Message) (string, error) {
	return (&jsonpb.Marshaler{}).MarshalToString(protov1.MessageV1(m))
}

// trimProxyDefaults returns a copy of pc without the fields that equal
// istiod's defaults, which is what istiod puts in PROXY_CONFIG.
func trimProxyDefaults(pc *meshv1.ProxyConfig) *meshv1.ProxyConfig {
	c := proto.Clone(pc).(*meshv1.ProxyConfig)
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
	if sc, ok := c.ClusterName.(*meshv1.ProxyConfig_ServiceCluster); ok && sc.ServiceCluster == "istio-proxy" {
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

package rules

import (
	"net/netip"

	"github.com/pilotfish-mesh/pilotfish/encode"
)

// Node is what the engine learns about a proxy from its first request, in
// istiod's conventions: the node ID `TYPE~IP~POD.NAMESPACE~NAMESPACE.svc.DOMAIN`
// and istio-agent's metadata (NAMESPACE, LABELS, ISTIO_VERSION, CLUSTER_ID,
// NETWORK, GENERATOR, INSTANCE_IPS).
type Node struct {
	// ID is istiod's proxy ID: "POD.NAMESPACE".
	ID        string
	Type      encode.ProxyType
	IPs       []netip.Addr
	Namespace string
	// Labels are the workload's labels (metadata LABELS).
	Labels map[string]string
	// IstioVersion is ISTIO_VERSION's major.minor, FullIstioVersion all
	// of it (EnvoyFilter proxyVersion matches read it).
	IstioVersion     string
	FullIstioVersion string
	// Metadata returns a node metadata string field (nil: none), for
	// EnvoyFilter match.proxy.metadata (envoyfilter.go keeps in the class
	// only the keys some patch names).
	Metadata  func(key string) (string, bool)
	ClusterID string
	Network   string
	Locality  string
	// PodName is the part of the ID before the namespace.
	PodName string
	// GatewayTopology is PROXY_CONFIG's gatewayTopology; only a router's
	// class carries it.
	GatewayTopology encode.GatewayTopology
	// MeshID (metadata MESH_ID) and ServiceCluster (the node's cluster)
	// are read by tracing only (encode.TraceIdentity).
	MeshID         string
	ServiceCluster string
	// TraceProxyConfig is PROXY_CONFIG's tracing (TraceProxyConfig), ""
	// without PROXY_CONFIG.
	TraceProxyConfig string
}

// Class returns the proxy class of the node: what generated config depends on.
func (n *Node) Class() encode.ProxyClass {
	c := encode.ProxyClass{
		Type:         n.Type,
		Namespace:    n.Namespace,
		IstioVersion: n.IstioVersion,
		ClusterID:    n.ClusterID,
		Network:      n.Network,
		Locality:     n.Locality,
		Labels:       encodeLabels(n.Labels),
	}
	if n.Type == encode.ProxyRouter {
		c.GatewayTopology = n.GatewayTopology
	}
	c.IPv6 = true
	for _, ip := range n.IPs {
		if ip.Is4() {
			c.IPv6 = false
		}
	}
	return c
}

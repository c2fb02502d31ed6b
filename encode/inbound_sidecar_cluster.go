package encode

import (
	"net"
	"net/netip"
	"strconv"
	"strings"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/pilotfish-mesh/pilotfish/envoypatch"
	"github.com/pilotfish-mesh/pilotfish/index"
)

// SidecarInboundClusterKey is every input of an inbound|PORT|| cluster of a
// proxy under a Sidecar with ingress listeners or an inboundConnectionPool
// (istiod's buildInboundClustersFromSidecar and the Sidecar connection pool
// override of buildInboundCluster).
type SidecarInboundClusterKey struct {
	// Cluster is the cluster as a service port would build it: Role
	// ClusterInbound, the service (nil for an ingress port no service
	// backs), its DestinationRule, Port (an ingress listener's port and
	// protocol), TargetPort and Inbound.
	Cluster ClusterKey
	// Sidecar is the Sidecar row (its spec holds the ingress listeners and
	// connection pools).
	Sidecar *index.Config
	// Ingress: the cluster is an ingress listener's, on port TargetPort,
	// sending to its defaultEndpoint.
	Ingress bool
	// ProxyIPs are the proxy's addresses, comma-separated, set only when
	// the defaultEndpoint names the pod's address (0.0.0.0 or ::).
	ProxyIPs string
}

// SidecarInboundClusterGen generates SidecarInboundClusterKey's cluster.
var SidecarInboundClusterGen = resourceGen(KindCluster, ClusterType, SidecarInboundCluster)

// Hash feeds every field.
func (k *SidecarInboundClusterKey) Hash() uint64 {
	h := NewHasher("SidecarInboundClusterKey")
	h.U64(k.Cluster.Hash())
	hashCfgRow(&h, k.Sidecar)
	h.Bool(k.Ingress)
	h.Str(k.ProxyIPs)
	return h.Sum()
}

// patchSet: the patches of Cluster (inbound).
func (k *SidecarInboundClusterKey) patchSet() (*envoypatch.Set, envoypatch.Context) {
	return k.Cluster.Patches, envoypatch.Inbound
}

// SidecarInboundConnectionPool is istiod's InboundConnectionPoolForPort: the
// ingress listener's connectionPool on port, else the Sidecar's
// inboundConnectionPool (nil for none).
func SidecarInboundConnectionPool(c *index.Config, port uint32) *networking.ConnectionPoolSettings {
	if c == nil {
		return nil
	}
	sc, _ := c.Spec.(*networking.Sidecar)
	for _, in := range sc.GetIngress() {
		if in.GetPort().GetNumber() == port && in.GetConnectionPool() != nil {
			return in.GetConnectionPool()
		}
	}
	return sc.GetInboundConnectionPool()
}

// SidecarEndpointNeedsIPs reports whether a defaultEndpoint sends to the
// pod's own address, which makes the cluster depend on the proxy's IPs.
func SidecarEndpointNeedsIPs(ep string) bool {
	host, _, err := net.SplitHostPort(ep)
	return err == nil && (host == "0.0.0.0" || host == "::")
}

// sidecarEndpoint resolves an ingress listener's defaultEndpoint as istiod's
// buildInboundClustersFromSidecar does: "" for none (ORIGINAL_DST), a unix
// socket as is, loopback by the proxy's IP family, 0.0.0.0 and :: to the
// proxy's first IPv4 or IPv6 address (loopback without one).
func (k *SidecarInboundClusterKey) sidecarEndpoint(ep string) (string, uint32) {
	if strings.HasPrefix(ep, "unix://") {
		return ep, 0
	}
	host, portStr, err := net.SplitHostPort(ep)
	if err != nil || portStr == "" {
		return "", 0
	}
	port, err := strconv.ParseUint(portStr, 10, 32)
	if err != nil {
		return "", 0
	}
	loop4, loop6 := "127.0.0.1", "::1"
	if k.Cluster.IPv6 {
		loop4 = loop6 // an IPv6-only proxy has only ::1
	} else {
		loop6 = loop4 // istiod's localhosts of an IPv4 proxy
	}
	switch host {
	case "127.0.0.1":
		return loop4, uint32(port)
	case "::1":
		return loop6, uint32(port)
	case "0.0.0.0", "::":
		for _, s := range strings.Split(k.ProxyIPs, ",") {
			if a, err := netip.ParseAddr(s); err == nil && a.Is4() == (host == "0.0.0.0") {
				return s, uint32(port)
			}
		}
		if host == "0.0.0.0" {
			return "127.0.0.1", uint32(port)
		}
		return "::1", uint32(port)
	}
	return "", uint32(port)
}

// SidecarInboundCluster builds the cluster k describes. It is a pure
// function of k.
func SidecarInboundCluster(n index.Names, k *SidecarInboundClusterKey) (string, proto.Message) {
	ck := clIn{&k.Cluster, n}
	name := InboundClusterName(ck.TargetPort)
	c := &clusterv3.Cluster{
		Name:           name,
		AltStatName:    name + ";",
		CommonLbConfig: &clusterv3.Cluster_CommonLbConfig{},
	}
	var bind string
	if k.Ingress {
		var port uint32
		for _, in := range SidecarIngressOf(k.Sidecar) {
			if in.GetPort().GetNumber() == ck.TargetPort {
				bind, port = k.sidecarEndpoint(in.GetDefaultEndpoint())
				break
			}
		}
		if bind != "" {
			c.ClusterDiscoveryType = &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC}
			c.LoadAssignment = &endpointv3.ClusterLoadAssignment{
				ClusterName: name,
				Endpoints: []*endpointv3.LocalityLbEndpoints{{LbEndpoints: []*endpointv3.LbEndpoint{{
					HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{Address: sidecarAddress(bind, port)}},
				}}}},
			}
		}
	}
	if bind == "" {
		c.ClusterDiscoveryType = &clusterv3.Cluster_Type{Type: clusterv3.Cluster_ORIGINAL_DST}
		c.CleanupInterval = &durationpb.Duration{Seconds: clMaxSeconds}
	}
	s := &clState{k: ck, c: c}
	s.setUpstreamProtocol(ck.Port)
	if ck.Service != nil && !ck.Service.MeshExternal {
		var vals []*structpb.Value
		seen := map[index.Sym]bool{}
		for _, svc := range ck.Inbound {
			if svc != nil && !seen[svc.Key.Host] {
				seen[svc.Key.Host] = true
				vals = append(vals, clServiceMetadata(ck, svc))
			}
		}
		if len(vals) == 0 {
			vals = append(vals, clServiceMetadata(ck, ck.Service))
		}
		clSetServiceMetadata(c, vals...)
	}
	var policy clPolicy
	if dr := clDestinationRule(ck.DestinationRule); dr != nil && dr.TrafficPolicy != nil {
		policy = clResolvePolicy(dr, ck.Port.Number, nil, nil)
		if c.Metadata != nil {
			clAddConfigMetadata(c, ck)
		}
	}
	policy = policy.withMeshDefault(ck.Mesh.defaultPolicy())
	// The Sidecar's pool replaces the DestinationRule's, the rest of the
	// rule's policy staying.
	if cp := SidecarInboundConnectionPool(k.Sidecar, ck.TargetPort); cp != nil {
		policy.connectionPool = cp
	}
	s.applyTrafficPolicy(policy, false, "")
	// Loopback needs no magic source address: iptables leaves it alone.
	if bind != "127.0.0.1" && bind != "::1" {
		c.UpstreamBindConfig = &corev3.BindConfig{SourceAddress: clInboundBind(ck.IPv6)}
	}
	return name, s.finish()
}

// sidecarAddress is istiod's BuildAddress: a pipe for unix://PATH, else a
// socket address.
func sidecarAddress(bind string, port uint32) *corev3.Address {
	if path, ok := strings.CutPrefix(bind, "unix://"); ok {
		return &corev3.Address{Address: &corev3.Address_Pipe{Pipe: &corev3.Pipe{Path: path}}}
	}
	return lsAddress(bind, port)
}

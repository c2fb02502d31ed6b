package encode

import (
	"strconv"
	"strings"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"google.golang.org/protobuf/types/known/structpb"
)

// clSNIDNAT builds the SNI-DNAT variant of an outbound cluster, as istiod's
// buildOutboundSniDnatClusters does for routers with an AUTO_PASSTHROUGH
// server: the same cluster under the name sidecars send as SNI
// (outbound_.PORT_.SUBSET_.HOST) and without any upstream TLS, since the
// client's mTLS passes through the gateway untouched.
func clSNIDNAT(k clIn) *clusterv3.Cluster {
	c := clOutbound(k)
	name := ClusterSNI(k.Port.Number, k.Subset, clHostname(k))
	c.Name = name
	c.AltStatName = name + ";"
	if c.LoadAssignment != nil {
		c.LoadAssignment.ClusterName = name
	}
	if c.EdsClusterConfig != nil {
		c.EdsClusterConfig.ServiceName = name
	}
	c.TransportSocket = nil
	c.TransportSocketMatches = nil
	// alpn_override goes with the upstream TLS. The struct is copied, not
	// edited: metadata values may be shared between clusters.
	if m := c.GetMetadata().GetFilterMetadata()["istio"]; m != nil && m.Fields["alpn_override"] != nil {
		f := make(map[string]*structpb.Value, len(m.Fields))
		for n, v := range m.Fields {
			if n != "alpn_override" {
				f[n] = v
			}
		}
		c.Metadata.FilterMetadata["istio"] = &structpb.Struct{Fields: f}
	}
	return c
}

// ParseSNIDNATName splits "outbound_.PORT_.SUBSET_.HOST" into its parts
// (substrings of name, no allocation); ok is false for other names.
func ParseSNIDNATName(name string) (port uint32, subset, host string, ok bool) {
	rest, found := strings.CutPrefix(name, "outbound_.")
	if !found {
		return 0, "", "", false
	}
	i := strings.Index(rest, "_.")
	if i <= 0 || rest[0] == '0' { // names are built without leading zeros
		return 0, "", "", false
	}
	p, err := strconv.ParseUint(rest[:i], 10, 32)
	if err != nil || p == 0 {
		return 0, "", "", false
	}
	rest = rest[i+2:]
	j := strings.Index(rest, "_.")
	if j < 0 || rest[j+2:] == "" {
		return 0, "", "", false
	}
	return uint32(p), rest[:j], rest[j+2:], true
}

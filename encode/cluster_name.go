package encode

import (
	"strconv"
	"strings"
)

// Istio's fixed cluster names.
const (
	// BlackHoleCluster drops traffic (routes to unknown destinations with
	// outboundTrafficPolicy REGISTRY_ONLY, VirtualService catch-alls).
	BlackHoleCluster = "BlackHoleCluster"
	// PassthroughCluster forwards to the original destination (ALLOW_ANY).
	PassthroughCluster = "PassthroughCluster"
	// InboundPassthroughCluster forwards inbound traffic for ports no
	// service declares to the workload, binding 127.0.0.6 (or ::6).
	InboundPassthroughCluster = "InboundPassthroughCluster"
)

// Direction is the traffic direction a cluster name encodes.
type Direction uint8

const (
	Outbound Direction = iota
	Inbound
)

func (d Direction) String() string {
	if d == Inbound {
		return "inbound"
	}
	return "outbound"
}

// ClusterName returns Istio's outbound cluster name "outbound|PORT|SUBSET|HOST".
func ClusterName(port uint32, subset, host string) string {
	return string(AppendClusterName(make([]byte, 0, 16+len(subset)+len(host)), port, subset, host))
}

// AppendClusterName appends "outbound|PORT|SUBSET|HOST" to dst.
func AppendClusterName(dst []byte, port uint32, subset, host string) []byte {
	dst = append(dst, "outbound|"...)
	dst = strconv.AppendUint(dst, uint64(port), 10)
	dst = append(dst, '|')
	dst = append(dst, subset...)
	dst = append(dst, '|')
	return append(dst, host...)
}

// InboundClusterName returns "inbound|PORT||", the name of the cluster for
// a workload port (istiod's BuildInboundSubsetKey).
func InboundClusterName(port uint32) string {
	return "inbound|" + strconv.FormatUint(uint64(port), 10) + "||"
}

// ClusterSNI returns the SNI istiod sets for ISTIO_MUTUAL to a cluster:
// "outbound_.PORT_.SUBSET_.HOST" (BuildDNSSrvSubsetKey).
func ClusterSNI(port uint32, subset, host string) string {
	b := make([]byte, 0, 20+len(subset)+len(host))
	b = append(b, "outbound_."...)
	b = strconv.AppendUint(b, uint64(port), 10)
	b = append(b, "_."...)
	b = append(b, subset...)
	b = append(b, "_."...)
	b = append(b, host...)
	return string(b)
}

// ParseClusterName splits "outbound|PORT|SUBSET|HOST" or "inbound|PORT|SUBSET|HOST"
// into its parts. The strings returned are substrings of name: parsing
// allocates nothing. ok is false for names of another shape (the fixed
// clusters, SNI-DNAT names).
func ParseClusterName(name string) (dir Direction, port uint32, subset, host string, ok bool) {
	rest, found := strings.CutPrefix(name, "outbound|")
	if !found {
		rest, found = strings.CutPrefix(name, "inbound|")
		if !found {
			return 0, 0, "", "", false
		}
		dir = Inbound
	}
	i := strings.IndexByte(rest, '|')
	if i <= 0 {
		return 0, 0, "", "", false
	}
	p, err := strconv.ParseUint(rest[:i], 10, 32)
	if err != nil || p == 0 {
		return 0, 0, "", "", false
	}
	rest = rest[i+1:]
	j := strings.IndexByte(rest, '|')
	if j < 0 {
		return 0, 0, "", "", false
	}
	subset, host = rest[:j], rest[j+1:]
	if strings.IndexByte(host, '|') >= 0 {
		return 0, 0, "", "", false
	}
	if dir == Outbound && host == "" {
		return 0, 0, "", "", false
	}
	return dir, uint32(p), subset, host, true
}

package engine

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"unicode/utf8"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/pilotfish-mesh/pilotfish/encode"
)

// ParseNode reads a proxy's identity from its Node (and a router's
// gatewayTopology from PROXY_CONFIG, node_proxyconfig.go). Errors wrap
// ErrBadNode and name the offending part.
func ParseNode(n *corev3.Node) (*Node, error) {
	if n == nil || n.Id == "" {
		return nil, fmt.Errorf("%w: empty node id", ErrBadNode)
	}
	// Strings from the node reach generated messages (tracing tags, the
	// namespace); protobuf refuses to marshal invalid UTF-8, so a node
	// gRPC's decoder would have refused is refused here too.
	if !utf8.ValidString(n.Id) {
		return nil, fmt.Errorf("%w: node id %q is not valid UTF-8", ErrBadNode, n.Id)
	}
	if l := n.GetLocality(); !utf8.ValidString(l.GetRegion()) || !utf8.ValidString(l.GetZone()) || !utf8.ValidString(l.GetSubZone()) {
		return nil, fmt.Errorf("%w: node locality is not valid UTF-8", ErrBadNode)
	}
	parts := strings.Split(n.Id, "~")
	if len(parts) != 4 {
		return nil, fmt.Errorf("%w: node id %q is not TYPE~IP~ID~DOMAIN", ErrBadNode, n.Id)
	}
	out := &Node{ID: parts[2]}
	switch parts[0] {
	case "sidecar":
		out.Type = encode.ProxySidecar
	case "router":
		out.Type = encode.ProxyRouter
	default:
		return nil, fmt.Errorf("%w: node id %q: unknown proxy type %q (want sidecar or router)", ErrBadNode, n.Id, parts[0])
	}
	md := n.GetMetadata().GetFields()
	if str(md, "GENERATOR") == "grpc" {
		out.Type = encode.ProxyGRPC
	}
	for _, s := range strings.Split(parts[1], ",") {
		if a, err := netip.ParseAddr(s); err == nil {
			out.IPs = append(out.IPs, a)
		}
	}
	for _, s := range strings.Split(str(md, "INSTANCE_IPS"), ",") {
		if a, err := netip.ParseAddr(strings.TrimSpace(s)); err == nil && !slices.Contains(out.IPs, a) {
			out.IPs = append(out.IPs, a)
		}
	}
	if len(out.IPs) == 0 {
		return nil, fmt.Errorf("%w: node id %q: no valid IP address", ErrBadNode, n.Id)
	}
	out.Namespace = str(md, "NAMESPACE")
	if out.Namespace == "" {
		// istiod's fallback: the namespace is the ID's part after the first dot.
		if i := strings.IndexByte(out.ID, '.'); i >= 0 {
			out.Namespace = out.ID[i+1:]
		}
	}
	if out.Namespace == "" {
		return nil, fmt.Errorf("%w: node id %q: no namespace (set metadata NAMESPACE or use POD.NAMESPACE)", ErrBadNode, n.Id)
	}
	out.PodName = strings.TrimSuffix(out.ID, "."+out.Namespace)
	if l := md["LABELS"].GetStructValue(); l != nil {
		out.Labels = make(map[string]string, len(l.Fields))
		for k, v := range l.Fields {
			out.Labels[k] = v.GetStringValue()
		}
	}
	out.FullIstioVersion = str(md, "ISTIO_VERSION")
	out.IstioVersion = majorMinor(out.FullIstioVersion)
	out.Metadata = func(k string) (string, bool) {
		v, ok := md[k].GetKind().(*structpb.Value_StringValue)
		if !ok {
			return "", false
		}
		return v.StringValue, true
	}
	out.ClusterID = str(md, "CLUSTER_ID")
	out.Network = str(md, "NETWORK")
	out.MeshID = str(md, "MESH_ID")
	out.ServiceCluster = n.GetCluster()
	if out.Type == encode.ProxyRouter { // only a gateway's listeners read it
		var err error
		if out.GatewayTopology, err = gatewayTopology(md); err != nil {
			return nil, fmt.Errorf("node id %q: %w", n.Id, err)
		}
	}
	var err error
	if out.TraceProxyConfig, err = proxyConfigTracing(md); err != nil {
		return nil, fmt.Errorf("node id %q: %w", n.Id, err)
	}
	if loc, ok := labelsLocality(out.Labels); ok {
		out.Locality = loc
	} else if loc := n.GetLocality(); loc != nil && (loc.Region != "" || loc.Zone != "" || loc.SubZone != "") {
		out.Locality = loc.Region + "/" + loc.Zone + "/" + loc.SubZone
	}
	return out, nil
}

// labelsLocality is the locality a proxy's labels give, which istiod
// prefers to the node's: its topology region, zone and subzone labels if
// it has one, else its topology.istio.io/locality (or istio-locality)
// label "region/zone/subzone".
func labelsLocality(labels map[string]string) (string, bool) {
	region, r := labels["topology.kubernetes.io/region"]
	zone, z := labels["topology.kubernetes.io/zone"]
	subzone, s := labels["topology.istio.io/subzone"]
	if !r && !z && !s {
		l, ok := labels["topology.istio.io/locality"]
		if !ok {
			l, ok = labels["istio-locality"]
		}
		if !ok || l == "" {
			return "", false
		}
		region, rest, _ := strings.Cut(l, "/")
		zone, subzone, _ = strings.Cut(rest, "/")
		subzone, _, _ = strings.Cut(subzone, "/")
		return region + "/" + zone + "/" + subzone, true
	}
	return region + "/" + zone + "/" + subzone, true
}

func str(md map[string]*structpb.Value, k string) string { return md[k].GetStringValue() }

// majorMinor trims "1.31.0-dev" to "1.31".
func majorMinor(v string) string {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return v
	}
	return parts[0] + "." + parts[1]
}

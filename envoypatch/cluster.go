package envoypatch

import (
	"slices"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/proto"
	networking "istio.io/api/networking/v1alpha3"
)

// PatchCluster applies the set's CLUSTER patches to a generated cluster of
// this context, in order, as istiod does (cluster_patch.go): the first
// REMOVE that matches drops it (nil); MERGE and MERGE_AND_REPLACE_LIST
// merge the value, except that a value with a transport socket merges only
// that (see mergeTransportSocket). Matches by name, else by the name's
// subset key (service, subset, port). For an inbound cluster, whose name
// holds no service, use PatchClusterOfServices.
func (s *Set) PatchCluster(c Context, cl *cluster.Cluster) (*cluster.Cluster, []Failure) {
	return s.PatchClusterOfServices(c, cl, nil)
}

// PatchClusterOfServices is PatchCluster for a cluster whose name holds no
// service (an inbound cluster "inbound|port||"): a match on service then
// matches any of hosts, the services of the cluster's port, as istiod
// passes them for inbound clusters.
func (s *Set) PatchClusterOfServices(c Context, cl *cluster.Cluster, hosts []string) (*cluster.Cluster, []Failure) {
	if s == nil || cl == nil {
		return cl, nil
	}
	var fails []Failure
	for _, p := range s.by[networking.EnvoyFilter_CLUSTER] {
		if p.Operation != networking.EnvoyFilter_Patch_REMOVE && !isMerge(p.Operation) {
			continue
		}
		if !p.inContext(c) || !clusterMatch(cl, p, hosts) {
			continue
		}
		if p.Operation == networking.EnvoyFilter_Patch_REMOVE {
			return nil, fails
		}
		v := p.Value.(*cluster.Cluster)
		if v.GetTransportSocket() == nil {
			mergeValue(p.Operation, cl, v)
			continue
		}
		if err := mergeClusterTransportSocket(cl, v.GetTransportSocket()); err != nil {
			fails = append(fails, Failure{Patch: p, Err: err})
		}
	}
	return cl, fails
}

// mergeClusterTransportSocket is istiod's MERGE of a value with a transport
// socket (the value's other fields are not merged): into the cluster's
// transport socket match of the same name if it has matches (none of that
// name: nothing changes, since a cluster cannot have both), else into its
// transport socket of the same name (typed configs merged), else the
// value's socket replaces the cluster's.
func mergeClusterTransportSocket(cl *cluster.Cluster, ts *core.TransportSocket) error {
	var dst *core.TransportSocket
	if len(cl.GetTransportSocketMatches()) > 0 {
		for _, m := range cl.GetTransportSocketMatches() {
			if m.GetTransportSocket() != nil && m.GetTransportSocket().GetName() == ts.GetName() {
				dst = m.GetTransportSocket()
				break
			}
		}
		if dst == nil {
			return nil
		}
	} else if cl.GetTransportSocket().GetName() == ts.GetName() && cl.GetTransportSocket() != nil {
		dst = cl.GetTransportSocket()
	}
	if dst == nil {
		cl.TransportSocket = proto.Clone(ts).(*core.TransportSocket)
		return nil
	}
	return mergeSocketConfig(dst, ts)
}

// mergeSocketConfig merges a patch socket's typed config into a generated
// socket's (both present; else nothing changes, as in istiod).
func mergeSocketConfig(dst, src *core.TransportSocket) error {
	d, sc := dst.GetTypedConfig(), src.GetTypedConfig()
	if d == nil || sc == nil {
		return nil
	}
	merged, err := mergeAny(d, sc)
	if err != nil {
		return err
	}
	d.TypeUrl, d.Value = merged.TypeUrl, merged.Value
	return nil
}

// clusterMatch is istiod's cluster match: by name when the match names
// one; else by the service, subset and port of the name's subset key (an
// inbound cluster's service: any of hosts).
func clusterMatch(cl *cluster.Cluster, p *Patch, hosts []string) bool {
	m := p.Match.GetCluster()
	if m == nil {
		return true
	}
	if m.GetName() != "" {
		return m.GetName() == cl.GetName()
	}
	dir, subset, hostname, port := parseSubsetKey(cl.GetName())
	if m.GetSubset() != "" && m.GetSubset() != subset {
		return false
	}
	if svc := m.GetService(); svc != "" {
		if dir == "inbound" && len(hosts) > 0 {
			if !slices.Contains(hosts, svc) {
				return false
			}
		} else if svc != hostname {
			return false
		}
	}
	return m.GetPortNumber() == 0 || int(m.GetPortNumber()) == port
}

// AddedClusters are fresh copies of the set's CLUSTER ADD values for this
// context, in order (istiod's InsertedClusters): a patch without a context
// adds only to sidecars' outbound and gateways' clusters.
func (s *Set) AddedClusters(c Context) []*cluster.Cluster {
	if s == nil {
		return nil
	}
	var out []*cluster.Cluster
	for _, p := range s.by[networking.EnvoyFilter_CLUSTER] {
		if p.Operation != networking.EnvoyFilter_Patch_ADD || !addsIn(p, c) {
			continue
		}
		out = append(out, proto.Clone(p.Value).(*cluster.Cluster))
	}
	return out
}

// addsIn is istiod's context rule for ADD of a whole resource (cluster,
// listener): the patch's own context, or ANY for outbound and gateway.
func addsIn(p *Patch, c Context) bool {
	if p.Match.GetContext() == networking.EnvoyFilter_ANY {
		return c == Outbound || c == Gateway
	}
	return p.inContext(c)
}

package rules

import (
	"fmt"

	networking "istio.io/api/networking/v1alpha3"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/index"
)

// buildEndpoints generates EDS for the named clusters
// ("outbound|80|v1|reviews.bookinfo.svc.cluster.local"). Every name gets a
// ClusterLoadAssignment, empty when it names no visible service, port or
// EDS cluster, as istiod answers (Envoy keeps waiting for a name it asked
// for otherwise). A wildcard request gets the assignments of every EDS
// cluster of the scope.
//
// The key of an assignment holds the service's endpoint shard, so an
// endpoint change re-encodes only that service's assignments; the proxy's
// locality is in the key only when failover or a locality distribution
// applies, and its labels only the values a failoverPriority list names
// (build_eds_failover.go), so proxies of other localities share the bytes.
//
// Only names the configuration defines are cached: a client may invent
// any number of names, and the answer to one no configuration defines is
// built through the cache's transient view (kept by nothing once sent).
func buildEndpoints(sc *Scope, mesh *encode.Mesh, cache *encode.Cache, names []string, wildcard bool, dst []Resource) ([]Resource, error) {
	if wildcard {
		names = clusterNamesForEDS(sc, mesh, nil)
	}
	b := newEDSBuilder(sc, mesh)
	for _, name := range names {
		c := cache
		if !b.keyFor(name) {
			c = cache.Transient()
		}
		e, err := encode.Resource(c, b.names, &b.key, encode.EndpointsGen)
		if err != nil {
			return dst, fmt.Errorf("eds: %w", err)
		}
		dst = append(dst, resourceOf(e))
	}
	return dst, nil
}

// edsBuilder holds one key reused for every assignment of a build. It is
// the one allocation of a warm build: keep it small (240 bytes, a size
// class; what is cheap to derive again is not a field).
type edsBuilder struct {
	sc    *Scope
	names index.Names
	mesh  *encode.Mesh
	mtls  mtlsCache
	key   encode.EndpointsKey
	// proxy holds the proxies' labels, read when a failoverPriority first
	// applies (nil until then).
	proxy *edsProxyLabels
}

// edsProxyLabels are the scope's proxy labels (proxyLabels).
type edsProxyLabels struct {
	labels map[string]string
	has    bool
}

func newEDSBuilder(sc *Scope, mesh *encode.Mesh) *edsBuilder {
	snap := sc.Snapshot
	root, _ := snap.Symbols.Lookup(mesh.RootNamespace)
	return &edsBuilder{sc: sc, names: snap.Names(), mesh: mesh, mtls: mtlsCache{snap: snap, root: root}}
}

// clusterID is the registry's cluster, reported in endpoint metadata.
func (b *edsBuilder) clusterID() string {
	if id := registryClusterID(b.mesh); id != "" {
		return id
	}
	return defaultClusterID
}

// keyFor fills b.key for the cluster name and reports whether the
// configuration defines that name: a visible service's port, with no
// subset or one its DestinationRule declares, spelled as pilotfish spells
// it. It allocates nothing: the name is parsed in place and every lookup is
// by interned symbol.
func (b *edsBuilder) keyFor(name string) (defined bool) {
	k := &b.key
	*k = encode.EndpointsKey{ClusterName: name, ClusterID: b.clusterID()}
	dir, port, subset, host, ok := encode.ParseClusterName(name)
	if ok {
		// "outbound|080||h" parses as port 80 but is another name.
		ok = len(name) == len("outbound|||")+decimalLen(port)+len(subset)+len(host)
	} else {
		// A router's SNI-DNAT cluster has its service port's endpoints.
		port, subset, host, ok = encode.ParseSNIDNATName(name)
	}
	if !ok || dir != encode.Outbound {
		return false
	}
	snap := b.sc.Snapshot
	hs, ok := snap.Symbols.Lookup(host)
	if !ok {
		return false
	}
	svc := b.sc.Service(hs)
	if svc == nil {
		return false
	}
	p := svc.PortByNumber(port)
	if p == nil {
		return false
	}
	k.Service, k.Port, k.Subset = svc, *p, subset
	if svc.Resolution != index.ResolutionDNS && svc.Resolution != index.ResolutionDNSRoundRobin {
		k.Shard = snap.Endpoints(svc.Key)
	}
	dr := destinationRule(b.sc, b.mesh, svc)
	defined = subset == ""
	if subset != "" && dr != nil {
		k.SubsetLabels = subsetLabels(dr, subset)
		defined = hasSubset(dr, subset)
	}
	peerDisabled := !svc.MeshExternal && b.mtls.get(svc.Key.Namespace) == encode.ServiceMTLSDisable
	if b.mesh != nil {
		k.MeshLocality = b.mesh.LocalityLB // meshConfig.localityLbSetting
	}
	k.ApplyDestinationRule(dr, b.sc.Class.Locality, peerDisabled)
	if entries := k.FailoverPriority(); len(entries) > 0 {
		k.FailoverLabels = b.failoverLabels(entries)
	}
	return defined
}

// failoverLabels is EndpointsKey.FailoverLabels for the scope's proxies
// (their labels read once per build).
func (b *edsBuilder) failoverLabels(entries []string) string {
	if b.proxy == nil {
		b.proxy = &edsProxyLabels{}
		b.proxy.labels, b.proxy.has = proxyLabels(b.sc)
	}
	return failoverLabels(b.sc.Class, b.proxy.labels, b.proxy.has, entries)
}

// hasSubset: the rule declares a subset of that name.
func hasSubset(dr *index.Config, subset string) bool {
	spec, _ := dr.Spec.(*networking.DestinationRule)
	for _, ss := range spec.GetSubsets() {
		if ss.GetName() == subset {
			return true
		}
	}
	return false
}

// decimalLen is the length of n written in decimal.
func decimalLen(n uint32) int {
	l := 1
	for ; n >= 10; n /= 10 {
		l++
	}
	return l
}

// clusterNamesForEDS appends to dst the names of the scope's EDS clusters:
// the clusters whose endpoints a proxy of the scope subscribes to (services
// resolved from the index, and passthrough services on gateways), with
// their DestinationRule subsets.
func clusterNamesForEDS(sc *Scope, mesh *encode.Mesh, dst []string) []string {
	snap := sc.Snapshot
	for _, id := range sc.Services {
		svc := snap.ServiceByID(id)
		if svc == nil || svc.ExternalName != 0 {
			continue
		}
		switch svc.Resolution {
		case index.ResolutionClientSideLB:
		case index.ResolutionPassthrough:
			if sc.Class.Type != encode.ProxyRouter {
				continue
			}
		default:
			continue
		}
		host := snap.String(svc.Key.Host)
		spec, _ := clusterDRSpec(destinationRule(sc, mesh, svc))
		for _, p := range svc.Ports {
			if p.Protocol == index.ProtocolUDP {
				continue
			}
			if !drPortPassthrough(spec, p.Number, nil) {
				dst = append(dst, encode.ClusterName(p.Number, "", host))
			}
			for _, ss := range spec.GetSubsets() {
				if !drPortPassthrough(spec, p.Number, ss) {
					dst = append(dst, encode.ClusterName(p.Number, ss.GetName(), host))
				}
			}
		}
	}
	return dst
}

// drPortPassthrough: the cluster's load balancer is PASSTHROUGH (an
// ORIGINAL_DST cluster, which has no EDS).
func drPortPassthrough(spec *networking.DestinationRule, port uint32, ss *networking.Subset) bool {
	if ss != nil {
		if lb := portLB(ss.GetTrafficPolicy(), port); lb != nil {
			return lb.GetSimple() == networking.LoadBalancerSettings_PASSTHROUGH
		}
	}
	return portLB(spec.GetTrafficPolicy(), port).GetSimple() == networking.LoadBalancerSettings_PASSTHROUGH
}

func portLB(tp *networking.TrafficPolicy, port uint32) *networking.LoadBalancerSettings {
	for _, p := range tp.GetPortLevelSettings() {
		if p.GetPort().GetNumber() == port {
			return p.LoadBalancer
		}
	}
	return tp.GetLoadBalancer()
}

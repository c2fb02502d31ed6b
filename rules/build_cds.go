package rules

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/puzpuzpuz/xsync/v4"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/envoypatch"
	"github.com/pilotfish-mesh/pilotfish/index"
)

// defaultClusterID is istiod's default cluster name for its own registry.
const defaultClusterID = "Kubernetes"

// registryClusterID is the cluster the mesh's endpoints belong to: the
// server's --cluster-id (mesh.ClusterID), as istiod stamps its registry's
// cluster on what it generates; a proxy's own CLUSTER_ID does not change it.
func registryClusterID(mesh *encode.Mesh) string {
	if mesh == nil {
		return ""
	}
	return mesh.ClusterID
}

// buildClusters generates CDS for a scope. Sidecars and routers get every
// visible cluster (wildcard), in istiod's order: outbound clusters service
// by service (ports as declared, then DestinationRule subsets),
// BlackHoleCluster, and for sidecars PassthroughCluster, the inbound
// clusters and InboundPassthroughCluster. Proxyless gRPC clients get only
// the clusters they name. A non-wildcard request from an Envoy filters the
// same list by name.
//
// Every cluster goes through the cache: a warm build does no generation and
// allocates only the growth of dst.
func buildClusters(sc *Scope, mesh *encode.Mesh, cache *encode.Cache, names []string, wildcard bool, dst []Resource) ([]Resource, error) {
	b := newCDSBuilder(sc, mesh, cache)
	if sc.Class.Type == encode.ProxyGRPC {
		return b.named(names, dst)
	}
	var want map[string]bool
	if !wildcard {
		want = make(map[string]bool, len(names))
		for _, n := range names {
			want[n] = true
		}
	}
	b.want = want
	if wildcard {
		// One cluster per service port at least: grown once, not doubled
		// (each doubling copies the list and its pointers again).
		dst = slices.Grow(dst, len(sc.Services)+8)
	}
	for _, id := range sc.Services {
		var err error
		if dst, err = b.outbound(sc.Snapshot.ServiceByID(id), dst); err != nil {
			return dst, err
		}
	}
	fixed := [...]encode.ClusterRole{encode.ClusterBlackHole, encode.ClusterPassthrough}
	n := 2
	if sc.Class.Type == encode.ProxyRouter {
		n = 1
	}
	var err error
	for _, r := range fixed[:n] {
		if dst, err = b.fixed(r, dst); err != nil {
			return dst, err
		}
	}
	if dst, err = b.sniDNAT(dst); err != nil {
		return dst, err
	}
	if sc.Class.Type != encode.ProxySidecar {
		return b.added(dst, envoypatch.Gateway) // envoyfilter.go
	}
	if dst, err = b.added(dst, envoypatch.Outbound); err != nil {
		return dst, err
	}
	if dst, err = b.inboundClusters(dst); err != nil { // sidecar_ingress.go
		return dst, err
	}
	if dst, err = b.fixed(encode.ClusterInboundPassthrough, dst); err != nil {
		return dst, err
	}
	return b.added(dst, envoypatch.Inbound)
}

// cdsBuilder holds the per-build state: one key reused for every cluster
// (the cache reads it synchronously and keeps only bytes), scratch slices,
// and memoized per-namespace PeerAuthentication modes.
type cdsBuilder struct {
	sc    *Scope
	snap  *index.Snapshot
	cache *encode.Cache
	key   encode.ClusterKey
	mtls  mtlsCache
	want  map[string]bool
	// sni: outbound emits SNI-DNAT clusters (build_gateway_snidnat.go).
	sni bool
	// inbound is scratch for ClusterKey.Inbound.
	inboundSvcs []*index.Service
	// patches are the class's CLUSTER patches (nil: none; envoyfilter.go).
	patches *envoypatch.Set
}

func newCDSBuilder(sc *Scope, mesh *encode.Mesh, cache *encode.Cache) *cdsBuilder {
	snap := sc.Snapshot
	root, _ := snap.Symbols.Lookup(mesh.RootNamespace)
	clusterID := registryClusterID(mesh)
	if clusterID == "" {
		clusterID = defaultClusterID
	}
	return &cdsBuilder{
		sc: sc, snap: snap, cache: cache,
		patches: sc.Patches(mesh).Family(envoypatch.Clusters),
		mtls:    mtlsCache{snap: snap, root: root},
		key: encode.ClusterKey{
			Mesh:      mesh,
			ProxyType: sc.Class.Type,
			IPv6:      sc.Class.IPv6,
			ClusterID: clusterID,
		},
	}
}

// emit generates (or finds) the cluster of the current key.
func (b *cdsBuilder) emit(dst []Resource) ([]Resource, error) {
	k := &b.key
	k.Locality = ""
	if k.UsesLocality() {
		k.Locality = b.sc.Class.Locality
	}
	if encode.ClusterSkipped(b.snap.Names(), k) {
		return dst, nil
	}
	if b.sni {
		k.Role = encode.ClusterSNIDNAT
		defer func() { k.Role = encode.ClusterOutbound }()
	}
	k.Patches = b.clusterPatches(&b.key)
	e, err := encode.ClusterResource(b.cache, b.snap.Names(), k)
	if err != nil {
		return dst, fmt.Errorf("cds: %w", err)
	}
	if e.Removed() || (b.want != nil && !b.want[e.Name]) {
		return dst, nil
	}
	return append(dst, resourceOf(e)), nil
}

// outbound emits the clusters of one service: a default cluster per port
// (UDP ports have none) and one per DestinationRule subset.
func (b *cdsBuilder) outbound(svc *index.Service, dst []Resource) ([]Resource, error) {
	if svc == nil || svc.ExternalName != 0 {
		// ExternalName services are aliases of their target (istiod's
		// ENABLE_EXTERNAL_NAME_ALIAS): routes use the target's cluster.
		return dst, nil
	}
	k := &b.key
	dr := destinationRule(b.sc, k.Mesh, svc)
	dns := svc.Resolution == index.ResolutionDNS || svc.Resolution == index.ResolutionDNSRoundRobin
	// A mesh-external service without a DestinationRule reads nothing from
	// its endpoints but inline DNS endpoints (no auto mTLS: no SANs, no
	// inferred mode), so a router over thousands of ServiceEntries skips
	// the lookups.
	var shard *index.EndpointShard
	if dr != nil || !svc.MeshExternal || dns {
		shard = b.snap.Endpoints(svc.Key)
	}
	spec, _ := clusterDRSpec(dr)
	*k = encode.ClusterKey{
		Role: encode.ClusterOutbound, Mesh: k.Mesh, ProxyType: k.ProxyType, IPv6: k.IPv6,
		ClusterID:       k.ClusterID,
		Service:         svc,
		DestinationRule: dr,
		ServiceAccounts: serviceAccounts(b.snap.Symbols, svc, shard),
	}
	if dns {
		k.Endpoints = shard
	}
	topPassthrough := spec.GetTrafficPolicy().GetLoadBalancer().GetSimple() == networking.LoadBalancerSettings_PASSTHROUGH
	var err error
	for _, p := range svc.Ports {
		if p.Protocol == index.ProtocolUDP || !b.sc.portImported(svc, p.Number) {
			continue // a Sidecar egress port imports its port alone
		}
		k.Port = p
		k.Subset, k.SubsetLabels = "", 0
		k.MTLS = serviceMTLS(&b.mtls, svc, p, shard, topPassthrough)
		if dst, err = b.emit(dst); err != nil {
			return dst, err
		}
		for _, ss := range spec.GetSubsets() {
			k.Subset = ss.GetName()
			k.SubsetLabels = subsetLabels(dr, k.Subset)
			passthrough := ss.GetTrafficPolicy().GetLoadBalancer().GetSimple() == networking.LoadBalancerSettings_PASSTHROUGH
			k.MTLS = serviceMTLS(&b.mtls, svc, p, shard, passthrough)
			if dst, err = b.emit(dst); err != nil {
				return dst, err
			}
		}
	}
	return dst, nil
}

func clusterDRSpec(dr *index.Config) (*networking.DestinationRule, bool) {
	if dr == nil {
		return nil, false
	}
	spec, ok := dr.Spec.(*networking.DestinationRule)
	return spec, ok
}

func (b *cdsBuilder) fixed(role encode.ClusterRole, dst []Resource) ([]Resource, error) {
	k := &b.key
	*k = encode.ClusterKey{Role: role, Mesh: k.Mesh, ProxyType: k.ProxyType, IPv6: k.IPv6,
		ClusterID: k.ClusterID}
	return b.emit(dst)
}

// inbound emits one inbound|PORT|| cluster per workload port the proxy's
// instances use, in port order. The first instance on a port decides the
// cluster's protocol and DestinationRule; every service on it goes into the
// telemetry metadata.
func (b *cdsBuilder) inbound(dst []Resource) ([]Resource, error) {
	in := b.sc.Instances
	if len(in) == 0 {
		return dst, nil
	}
	order := make([]int, len(in))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(x, y int) int { return cmp.Compare(in[x].TargetPort, in[y].TargetPort) })
	k := &b.key
	var err error
	for i := 0; i < len(order); {
		first := &in[order[i]]
		j := i
		b.inboundSvcs = b.inboundSvcs[:0]
		for ; j < len(order) && in[order[j]].TargetPort == first.TargetPort; j++ {
			if inst := &in[order[j]]; inst.Port.Number == first.Port.Number {
				b.inboundSvcs = append(b.inboundSvcs, inst.Service)
			}
		}
		*k = encode.ClusterKey{Role: encode.ClusterInbound, Mesh: k.Mesh, ProxyType: k.ProxyType, IPv6: k.IPv6,
			ClusterID:       k.ClusterID,
			Service:         first.Service,
			Port:            first.Port,
			TargetPort:      first.TargetPort,
			Inbound:         b.inboundSvcs,
			DestinationRule: inboundDestinationRule(b.sc, k.Mesh, first.Service),
		}
		if dst, err = b.emit(dst); err != nil {
			return dst, err
		}
		i = j
	}
	return dst, nil
}

// named emits the clusters a proxyless gRPC client asked for (istiod's
// grpcgen): outbound default or subset clusters of visible services.
// Unknown names are left out.
func (b *cdsBuilder) named(names []string, dst []Resource) ([]Resource, error) {
	k := &b.key
	var err error
	for _, name := range names {
		dir, port, subset, host, ok := encode.ParseClusterName(name)
		if !ok || dir != encode.Outbound {
			continue
		}
		hs, ok := b.snap.Symbols.Lookup(host)
		if !ok {
			continue
		}
		svc := b.sc.Service(hs)
		if svc == nil {
			continue
		}
		p := svc.PortByNumber(port)
		if p == nil || !b.sc.portImported(svc, port) {
			continue
		}
		dr := destinationRule(b.sc, k.Mesh, svc)
		*k = encode.ClusterKey{Role: encode.ClusterOutbound, Mesh: k.Mesh, ProxyType: k.ProxyType, IPv6: k.IPv6,
			ClusterID: k.ClusterID,
			Service:   svc, Port: *p, DestinationRule: dr,
		}
		if subset != "" {
			spec, _ := clusterDRSpec(dr)
			found := false
			for _, ss := range spec.GetSubsets() {
				if ss.GetName() == subset {
					found = true
					break
				}
			}
			if !found {
				continue
			}
			k.Subset = subset
			k.SubsetLabels = subsetLabels(dr, subset)
		}
		if drTLSIstioMutual(dr) {
			k.ServiceAccounts = serviceAccounts(b.snap.Symbols, svc, b.snap.Endpoints(svc.Key))
		}
		if dst, err = b.emit(dst); err != nil {
			return dst, err
		}
	}
	return dst, nil
}

// drTLSIstioMutual: some policy of the rule uses ISTIO_MUTUAL (the only TLS
// gRPC clusters carry, with the service accounts as SANs).
func drTLSIstioMutual(dr *index.Config) bool {
	spec, _ := clusterDRSpec(dr)
	if spec == nil {
		return false
	}
	has := func(tp *networking.TrafficPolicy) bool {
		if tp.GetTls().GetMode() == networking.ClientTLSSettings_ISTIO_MUTUAL {
			return true
		}
		for _, p := range tp.GetPortLevelSettings() {
			if p.GetTls().GetMode() == networking.ClientTLSSettings_ISTIO_MUTUAL {
				return true
			}
		}
		return false
	}
	if has(spec.TrafficPolicy) {
		return true
	}
	for _, ss := range spec.Subsets {
		if has(ss.GetTrafficPolicy()) {
			return true
		}
	}
	return false
}

// saKey names a version of a service's endpoint shard.
type saKey struct {
	syms *index.Symbols // symbols are per writer; several may share a process
	svc  index.ServiceKey
	hash uint64
}

// saCache memoizes the service accounts of endpoint shards, so that a warm
// CDS build does not walk endpoints. It is dropped when it grows past a
// bound (stale shard versions are unreachable).
var saCache = xsync.NewMap[saKey, []index.Sym]()

const saCacheMax = 1 << 16

// serviceAccounts returns the sorted, unique service accounts of a
// service's endpoints (istiod's PushContext.ServiceAccounts; encode adds a
// ServiceEntry's subjectAltNames, index.Service.SubjectAltNames).
func serviceAccounts(syms *index.Symbols, svc *index.Service, shard *index.EndpointShard) []index.Sym {
	if shard == nil {
		return nil
	}
	k := saKey{syms: syms, svc: svc.Key, hash: shard.Hash}
	if sas, ok := saCache.Load(k); ok {
		return sas
	}
	var sas []index.Sym
	for gi := range shard.Groups {
		for _, e := range shard.Groups[gi].Endpoints {
			if e.ServiceAccount != 0 {
				sas = append(sas, e.ServiceAccount)
			}
		}
	}
	slices.Sort(sas)
	sas = slices.Clip(slices.Compact(sas))
	if saCache.Size() > saCacheMax {
		saCache.Clear()
	}
	saCache.Store(k, sas)
	return sas
}

// ClusterEndpointDigest summarizes what CDS reads from a service's endpoint
// shard: all of it for DNS services (their clusters carry the endpoints
// inline), else the service accounts (ISTIO_MUTUAL SANs) and, for
// passthrough services, whether every endpoint has a sidecar (the inferred
// mTLS mode). An endpoint-only change whose digest differs must push CDS
// too, not only EDS, to the scopes that see the service; any other endpoint
// change leaves every cluster unchanged.
func ClusterEndpointDigest(syms *index.Symbols, svc *index.Service, shard *index.EndpointShard) uint64 {
	if svc == nil {
		return 0
	}
	if svc.Resolution == index.ResolutionDNS || svc.Resolution == index.ResolutionDNSRoundRobin {
		if shard == nil {
			return 1
		}
		return shard.Hash | 1
	}
	// No shard digests like a shard of plain endpoints: both give clusters
	// without SANs or inferred mTLS.
	h := encode.NewHasher("cds-endpoints")
	sas := serviceAccounts(syms, svc, shard)
	h.Int(len(sas))
	for _, sa := range sas {
		h.U32(uint32(sa))
	}
	for _, p := range svc.Ports {
		h.Bool(allEndpointsIstioTLS(svc, p, shard))
	}
	return h.Sum()
}

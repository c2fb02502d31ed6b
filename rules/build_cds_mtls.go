package rules

import (
	security "istio.io/api/security/v1beta1"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/index"
)

// namespaceMTLS is the mTLS mode PeerAuthentication sets for workloads of
// ns: the namespace-wide policy (no selector), inheriting the mesh-wide one
// in the root namespace when unset (istiod's GetNamespaceMutualTLSMode).
// Selector and port-level policies are workload-specific and do not change
// what clients of the service are configured with.
func namespaceMTLS(snap *index.Snapshot, root, ns index.Sym) encode.ServiceMTLS {
	if snap.NumConfigs(index.ConfigPeerAuthentication) == 0 {
		return encode.ServiceMTLSUnknown
	}
	if m := namespacePAMode(snap, ns); m != security.PeerAuthentication_MutualTLS_UNSET {
		return paMode(m)
	}
	if root != 0 && root != ns {
		if m := namespacePAMode(snap, root); m != security.PeerAuthentication_MutualTLS_UNSET {
			return paMode(m)
		}
	}
	return encode.ServiceMTLSUnknown
}

func namespacePAMode(snap *index.Snapshot, ns index.Sym) security.PeerAuthentication_MutualTLS_Mode {
	mode := security.PeerAuthentication_MutualTLS_UNSET
	snap.ConfigsInNamespace(index.ConfigPeerAuthentication, ns, func(c *index.Config) bool {
		if c.HasSelector {
			return true
		}
		pa, ok := c.Spec.(*security.PeerAuthentication)
		if !ok {
			return true
		}
		mode = pa.GetMtls().GetMode()
		return false
	})
	return mode
}

func paMode(m security.PeerAuthentication_MutualTLS_Mode) encode.ServiceMTLS {
	switch m {
	case security.PeerAuthentication_MutualTLS_DISABLE:
		return encode.ServiceMTLSDisable
	case security.PeerAuthentication_MutualTLS_STRICT:
		return encode.ServiceMTLSStrict
	default:
		return encode.ServiceMTLSPermissive
	}
}

// mtlsCache memoizes namespaceMTLS for the namespaces of one build.
type mtlsCache struct {
	snap  *index.Snapshot
	root  index.Sym
	n     int
	ns    [8]index.Sym
	modes [8]encode.ServiceMTLS
}

func (m *mtlsCache) get(ns index.Sym) encode.ServiceMTLS {
	for i := 0; i < m.n; i++ {
		if m.ns[i] == ns {
			return m.modes[i]
		}
	}
	mode := namespaceMTLS(m.snap, m.root, ns)
	if m.n < len(m.ns) {
		m.ns[m.n], m.modes[m.n] = ns, mode
		m.n++
	}
	return mode
}

// serviceMTLS is istiod's BestEffortInferServiceMTLSMode: unknown for
// mesh-external services; for passthrough traffic disabled unless every
// endpoint of the port has a sidecar; else the namespace's mode, permissive
// by default.
func serviceMTLS(m *mtlsCache, svc *index.Service, port index.Port, shard *index.EndpointShard, passthroughLB bool) encode.ServiceMTLS {
	if svc.MeshExternal {
		return encode.ServiceMTLSUnknown
	}
	if svc.Resolution == index.ResolutionPassthrough || passthroughLB {
		if !allEndpointsIstioTLS(svc, port, shard) {
			return encode.ServiceMTLSDisable
		}
	}
	if mode := m.get(svc.Key.Namespace); mode != encode.ServiceMTLSUnknown {
		return mode
	}
	return encode.ServiceMTLSPermissive
}

func allEndpointsIstioTLS(svc *index.Service, port index.Port, shard *index.EndpointShard) bool {
	if shard == nil {
		return false
	}
	n := 0
	for gi := range shard.Groups {
		g := &shard.Groups[gi]
		if svc.Origin == index.OriginKubernetes && !groupHasPort(g, port) {
			continue
		}
		for i := range g.Endpoints {
			if g.Endpoints[i].TLSMode != index.TLSModeIstio {
				return false
			}
			n++
		}
	}
	return n > 0
}

func groupHasPort(g *index.EndpointGroup, p index.Port) bool {
	for _, gp := range g.Ports {
		if gp.Name == p.Name {
			return true
		}
	}
	return false
}

package rules

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	networking "istio.io/api/networking/v1alpha3"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/envoypatch"
	"github.com/pilotfish-mesh/pilotfish/index"
)

// The inbound side of a Sidecar: its ingress listeners (which replace the
// workload's service ports, listeners in build_lds.go and clusters in
// build_cds.go) and its inboundConnectionPool. See encode/inbound_sidecar.go.

// sidecarRow returns the row of the scope's Sidecar and its spec, or nils.
func sidecarRow(sc *Scope) (*index.Config, *networking.Sidecar) {
	if sc.Class.Sidecar == "" {
		return nil, nil
	}
	c := configByRef(sc.Snapshot, index.ConfigSidecar, sc.Class.Sidecar)
	if c == nil {
		return nil, nil
	}
	spec, _ := c.Spec.(*networking.Sidecar)
	if spec == nil {
		return nil, nil
	}
	return c, spec
}

// sidecarProxyIPs is the class's ProxyIPs: the node's addresses when the
// Sidecar ref's ingress listeners depend on them (one without bind takes the
// pod's address, a defaultEndpoint of 0.0.0.0 or :: sends to it), else "".
func sidecarProxyIPs(snap *index.Snapshot, ref string, node *Node) string {
	if ref == "" || node.Type != encode.ProxySidecar {
		return ""
	}
	ingress := encode.SidecarIngressOf(configByRef(snap, index.ConfigSidecar, ref))
	need := false
	for _, in := range ingress {
		if in.GetBind() == "" || encode.SidecarEndpointNeedsIPs(in.GetDefaultEndpoint()) {
			need = true
		}
	}
	if !need {
		return ""
	}
	ips := make([]string, 0, len(node.IPs))
	for _, ip := range node.IPs {
		ips = append(ips, ip.String())
	}
	// Only the address a name or an endpoint is taken from matters: a
	// private or public one (istiod's GlobalUnicastIP) and the first per
	// family. Keep them all; they are a handful.
	return strings.Join(ips, ",")
}

// setSidecarInbound fills the Sidecar fields of the virtualInbound key when
// the scope's Sidecar has ingress listeners.
func setSidecarInbound(sc *Scope, sec *workloadSecurity, k *encode.VirtualInboundKey) {
	row, spec := sidecarRow(sc)
	if len(spec.GetIngress()) == 0 {
		return
	}
	k.Sidecar, k.ProxyIPs = row, sc.Class.ProxyIPs
	var ports []uint32
	for _, in := range spec.GetIngress() {
		p := in.GetPort().GetNumber()
		ports = append(ports, p)
		k.SidecarMTLS = append(k.SidecarMTLS, encode.PortMTLS{Port: p, MTLS: sec.portMTLS(p)})
	}
	// PeerAuthentication ports that an ingress listener serves get no
	// passthrough chains of their own.
	k.PassthroughPorts = slices.DeleteFunc(k.PassthroughPorts, func(pm encode.PortMTLS) bool { return slices.Contains(ports, pm.Port) })
	for port, m := range sec.ports {
		if !slices.Contains(ports, port) && !slices.ContainsFunc(k.PassthroughPorts, func(pm encode.PortMTLS) bool { return pm.Port == port }) {
			k.PassthroughPorts = append(k.PassthroughPorts, encode.PortMTLS{Port: port, MTLS: m})
		}
	}
	slices.SortFunc(k.PassthroughPorts, func(a, b encode.PortMTLS) int { return cmp.Compare(a.Port, b.Port) })
}

// sidecarIngressListeners appends the listeners of ingress ports whose
// captureMode is NONE, in port order, after virtualInbound (istiod's order).
func sidecarIngressListeners(cache *encode.Cache, n index.Names, vk *encode.VirtualInboundKey, lp *envoypatch.Set, names []string, wildcard bool, dst []Resource) ([]Resource, error) {
	if vk.Sidecar == nil {
		return dst, nil
	}
	var ports []uint32
	for _, in := range encode.SidecarIngressOf(vk.Sidecar) {
		if p := in.GetPort().GetNumber(); encode.SidecarBindsPort(in) && !slices.Contains(ports, p) &&
			encode.SidecarProtocol(in.GetPort().GetProtocol()) != index.ProtocolUDP {
			ports = append(ports, p)
		}
	}
	slices.Sort(ports)
	var err error
	for _, p := range ports {
		k := &encode.SidecarIngressListenerKey{Inbound: *vk, Port: p}
		k.Inbound.Patches = mayPatchListener(lp, envoypatch.Inbound, p)
		if !wildcard && len(names) > 0 && !slices.Contains(names, k.Name()) {
			continue
		}
		if dst, err = appendResource(dst, cache, n, k, encode.SidecarIngressListenerGen); err != nil {
			return dst, err
		}
	}
	return dst, nil
}

// inboundClusters emits the proxy's inbound clusters: the Sidecar's when it
// has ingress listeners or an inboundConnectionPool, else the service
// ports' (cdsBuilder.inbound).
func (b *cdsBuilder) inboundClusters(dst []Resource) ([]Resource, error) {
	row, spec := sidecarRow(b.sc)
	switch {
	case len(spec.GetIngress()) > 0:
		return b.sidecarIngressClusters(row, spec, dst)
	case spec.GetInboundConnectionPool() != nil:
		return b.sidecarPoolClusters(row, dst)
	}
	return b.inbound(dst)
}

// sidecarIngressClusters is istiod's buildInboundClustersFromSidecar: one
// inbound|PORT|| per ingress listener, in the Sidecar's order, for the
// service the proxy backs on that port if any.
func (b *cdsBuilder) sidecarIngressClusters(row *index.Config, spec *networking.Sidecar, dst []Resource) ([]Resource, error) {
	var done []uint32
	var err error
	for _, in := range spec.GetIngress() {
		p := in.GetPort().GetNumber()
		if in.GetPort() == nil || slices.Contains(done, p) {
			continue
		}
		done = append(done, p)
		port := index.Port{Number: p, Protocol: encode.SidecarProtocol(in.GetPort().GetProtocol())}
		if name, ok := b.snap.Symbols.Lookup(in.GetPort().GetName()); ok {
			port.Name = name
		}
		k := b.sidecarKey(row)
		k.Ingress = true
		k.Cluster.Port, k.Cluster.TargetPort = port, p
		if encode.SidecarEndpointNeedsIPs(in.GetDefaultEndpoint()) {
			k.ProxyIPs = b.sc.Class.ProxyIPs
		}
		for _, inst := range b.sc.Instances {
			if inst.TargetPort == p {
				k.Cluster.Service = inst.Service
				k.Cluster.Inbound = []*index.Service{inst.Service}
				k.Cluster.DestinationRule = inboundDestinationRule(b.sc, k.Cluster.Mesh, inst.Service)
				break
			}
		}
		if dst, err = b.emitSidecar(k, dst); err != nil {
			return dst, err
		}
	}
	return dst, nil
}

// sidecarPoolClusters are the service ports' inbound clusters (grouped as
// cdsBuilder.inbound groups them) with the Sidecar's inboundConnectionPool.
func (b *cdsBuilder) sidecarPoolClusters(row *index.Config, dst []Resource) ([]Resource, error) {
	in := slices.Clone(b.sc.Instances)
	slices.SortStableFunc(in, func(x, y Instance) int { return cmp.Compare(x.TargetPort, y.TargetPort) })
	var err error
	for i := 0; i < len(in); {
		first := &in[i]
		var svcs []*index.Service
		j := i
		for ; j < len(in) && in[j].TargetPort == first.TargetPort; j++ {
			if in[j].Port.Number == first.Port.Number {
				svcs = append(svcs, in[j].Service)
			}
		}
		k := b.sidecarKey(row)
		k.Cluster.Service, k.Cluster.Port, k.Cluster.TargetPort, k.Cluster.Inbound = first.Service, first.Port, first.TargetPort, svcs
		k.Cluster.DestinationRule = inboundDestinationRule(b.sc, k.Cluster.Mesh, first.Service)
		if dst, err = b.emitSidecar(k, dst); err != nil {
			return dst, err
		}
		i = j
	}
	return dst, nil
}

func (b *cdsBuilder) sidecarKey(row *index.Config) *encode.SidecarInboundClusterKey {
	base := &b.key
	return &encode.SidecarInboundClusterKey{
		Cluster: encode.ClusterKey{Role: encode.ClusterInbound, Mesh: base.Mesh, ProxyType: base.ProxyType, IPv6: base.IPv6,
			ClusterID: base.ClusterID},
		Sidecar: row,
	}
}

func (b *cdsBuilder) emitSidecar(k *encode.SidecarInboundClusterKey, dst []Resource) ([]Resource, error) {
	k.Cluster.Patches = b.clusterPatches(&k.Cluster)
	e, err := encode.Resource(b.cache, b.snap.Names(), k, encode.SidecarInboundClusterGen)
	if err != nil {
		return dst, fmt.Errorf("cds: %w", err)
	}
	if e.Removed() || (b.want != nil && !b.want[e.Name]) {
		return dst, nil
	}
	return append(dst, resourceOf(e)), nil
}

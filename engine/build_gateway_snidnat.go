package engine

import (
	networking "istio.io/api/networking/v1alpha3"

	"github.com/pilotfish-mesh/pilotfish/encode"
)

// hasAutoPassthrough: one of the router's servers is AUTO_PASSTHROUGH
// (istiod's MergedGateway.ContainsAutoPassthroughGateways), so its CDS
// carries the SNI-DNAT clusters those servers forward to.
func (m *mergedGateway) hasAutoPassthrough() bool {
	for i := range m.ports {
		for j := range m.ports[i].servers {
			if m.ports[i].servers[j].Server().GetTls().GetMode() == networking.ServerTLSSettings_AUTO_PASSTHROUGH {
				return true
			}
		}
	}
	return false
}

// sniDNAT emits, after the router's other clusters, the SNI-DNAT cluster
// of every mesh-internal service port and DestinationRule subset the
// router sees (istiod's buildOutboundSniDnatClusters: all of them, not
// only those an AUTO_PASSTHROUGH server's hosts match).
func (b *cdsBuilder) sniDNAT(dst []Resource) ([]Resource, error) {
	if b.sc.Class.Type != encode.ProxyRouter || !gatewayOf(b.sc).hasAutoPassthrough() {
		return dst, nil
	}
	b.sni = true
	defer func() { b.sni = false }()
	var err error
	for _, id := range b.sc.Services {
		svc := b.snap.ServiceByID(id)
		if svc == nil || svc.MeshExternal {
			continue
		}
		if dst, err = b.outbound(svc, dst); err != nil {
			return dst, err
		}
	}
	return dst, nil
}

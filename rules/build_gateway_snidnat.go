package rules

import (
	"fmt"
	"strings"

	networking "istio.io/api/networking/v1alpha3"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/index"
)

// HasAutoPassthrough: one of the servers of the router's Gateways is
// AUTO_PASSTHROUGH (istiod's MergedGateway.ContainsAutoPassthroughGateways),
// so its CDS carries the SNI-DNAT clusters those servers forward to. It
// reads the selected Gateways directly rather than the merged gateway, which
// a CDS build does not otherwise need (computing it tripled a warm CDS push).
// The answer is kept per Scope (view.go), like the merged gateway.
func hasAutoPassthrough(sc *Scope) bool {
	m := sc.memo
	got, ok := m.autoPassthrough.get()
	if !ok {
		got = scanAutoPassthrough(sc)
		m.autoPassthrough.set(got)
		return got
	}
	if sc.view.verify && firstUseIn(&m.checkedAuto, sc.Snapshot) {
		if fresh := scanAutoPassthrough(sc); fresh != got {
			panic(fmt.Sprintf("engine: verify: AUTO_PASSTHROUGH of router scope %s memoized as %v, now %v", sc.Class.Gateways, got, fresh))
		}
	}
	return got
}

func scanAutoPassthrough(sc *Scope) bool {
	for ref := range strings.SplitSeq(sc.Class.Gateways, ",") {
		c := configByRef(sc.Snapshot, index.ConfigGateway, ref)
		if c == nil {
			continue
		}
		gw, _ := c.Spec.(*networking.Gateway)
		for _, srv := range gw.GetServers() {
			if srv.GetTls().GetMode() == networking.ServerTLSSettings_AUTO_PASSTHROUGH {
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
	if b.sc.Class.Type != encode.ProxyRouter || !hasAutoPassthrough(b.sc) {
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

// AutoPassthrough: some Gateway of the snapshot has an
// AUTO_PASSTHROUGH server (configView.HasAutoPassthrough keeps the answer
// per config version).
func AutoPassthrough(snap *index.Snapshot) bool {
	v := false
	snap.Configs(index.ConfigGateway, func(c *index.Config) bool {
		gw, _ := c.Spec.(*networking.Gateway)
		for _, srv := range gw.GetServers() {
			if srv.GetTls().GetMode() == networking.ServerTLSSettings_AUTO_PASSTHROUGH {
				v = true
			}
		}
		return !v
	})
	return v
}

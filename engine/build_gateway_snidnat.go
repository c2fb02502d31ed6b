package engine

import (
	"runtime"
	"strings"
	"sync"
	"weak"

	networking "istio.io/api/networking/v1alpha3"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/index"
)

// hasAutoPassthrough: one of the servers of the router's Gateways is
// AUTO_PASSTHROUGH (istiod's MergedGateway.ContainsAutoPassthroughGateways),
// so its CDS carries the SNI-DNAT clusters those servers forward to. It
// reads the selected Gateways directly rather than the merged gateway, which
// a CDS build does not otherwise need (computing it tripled a warm CDS push).
// The answer is kept per Scope, like the merged gateway: a warm CDS build
// then costs one map lookup instead of a lookup per Gateway.
func hasAutoPassthrough(sc *Scope) bool {
	wp := weak.Make(sc)
	if v, ok := autoPassthroughOf.Load(wp); ok {
		return v.(bool)
	}
	v := scanAutoPassthrough(sc)
	if _, loaded := autoPassthroughOf.LoadOrStore(wp, v); !loaded {
		runtime.AddCleanup(sc, func(wp weak.Pointer[Scope]) { autoPassthroughOf.Delete(wp) }, wp)
	}
	return v
}

var autoPassthroughOf sync.Map // weak.Pointer[Scope] → bool

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

// appendSNIDNATNames appends the SNI-DNAT names of a service port (port in
// decimal) and its subsets, for the endpoint fast path when some Gateway
// has an AUTO_PASSTHROUGH server: a router with one subscribes to them, and
// serve intersects the list with each proxy's subscription.
func appendSNIDNATNames(dst []string, port string, subsets []string, host string) []string {
	dst = append(dst, "outbound_."+port+"_._."+host)
	for _, s := range subsets {
		dst = append(dst, "outbound_."+port+"_."+s+"_."+host)
	}
	return dst
}

// snapHasAutoPassthrough: some Gateway of the snapshot has an
// AUTO_PASSTHROUGH server, so some router may subscribe to SNI-DNAT names.
// Kept per snapshot: the endpoint fast path asks at every push.
func snapHasAutoPassthrough(snap *index.Snapshot) bool {
	wp := weak.Make(snap)
	if v, ok := autoPassthroughSnap.Load(wp); ok {
		return v.(bool)
	}
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
	if _, loaded := autoPassthroughSnap.LoadOrStore(wp, v); !loaded {
		runtime.AddCleanup(snap, func(wp weak.Pointer[index.Snapshot]) { autoPassthroughSnap.Delete(wp) }, wp)
	}
	return v
}

var autoPassthroughSnap sync.Map // weak.Pointer[index.Snapshot] → bool

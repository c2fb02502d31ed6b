package rules

import (
	"cmp"
	"slices"
	"unsafe"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/index"
)

// Consistent-hash load balancing on gateway routes: a router's route to a
// destination whose DestinationRule (as the router's lookup finds it) sets
// a consistent hash gets the hash_policy sidecars' routes get (istiod's
// GetConsistentHashForVirtualService in buildGatewayVirtualHosts).

// gatewayHashRules returns the consistent-hash DestinationRules of dests,
// by hostname, in dests' order.
func gatewayHashRules(sc *Scope, mesh *encode.Mesh, dests []*index.Service) []encode.HostDestinationRule {
	if sc.Snapshot.NumConfigs(index.ConfigDestinationRule) == 0 {
		return nil
	}
	var out []encode.HostDestinationRule
	for _, svc := range dests {
		dr := destinationRule(sc, mesh, svc)
		if dr == nil || !hasConsistentHash(dr) {
			continue
		}
		host := sc.Snapshot.String(svc.Key.Host)
		dup := false
		for i := range out {
			dup = dup || out[i].Host == host
		}
		if !dup {
			out = append(out, encode.HostDestinationRule{Host: host, Rule: dr})
		}
	}
	return out
}

// withDestinationRules folds into a merged gateway's digest the
// DestinationRules its routes' hash policies may read: those of the
// destinations of its VirtualServices.
func withDestinationRules(sc *Scope, digest uint64, dests map[*index.Config][]*index.Service) uint64 {
	if sc.Snapshot.NumConfigs(index.ConfigDestinationRule) == 0 {
		return digest
	}
	var all []*index.Service
	seen := map[*index.Service]bool{}
	for _, ds := range dests {
		for _, d := range ds {
			if !seen[d] {
				seen[d] = true
				all = append(all, d)
			}
		}
	}
	slices.SortFunc(all, func(a, b *index.Service) int {
		if c := cmp.Compare(a.Key.Host, b.Key.Host); c != 0 {
			return c
		}
		return cmp.Compare(a.Key.Namespace, b.Key.Namespace)
	})
	h := encode.NewHasher("gateway-digest")
	h.U64(digest)
	h.U64(destinationRuleDigest(sc, all))
	return h.Sum()
}

// destinationRuleDigest hashes every DestinationRule a lookup for one of
// dests may read (those of each host and of every wildcard that matches
// it, in any namespace), and, when one has a workloadSelector, the class's
// labels: a merged gateway reused across config versions (its digest
// unchanged) keeps route keys whose DestinationRules are still the ones a
// fresh lookup finds.
func destinationRuleDigest(sc *Scope, dests []*index.Service) uint64 {
	snap := sc.Snapshot
	if snap.NumConfigs(index.ConfigDestinationRule) == 0 {
		return 0
	}
	h := encode.NewHasher("gateway-destination-rules")
	selector := false
	row := func(c *index.Config) bool {
		h.U32(uint32(c.Key.Namespace))
		h.U32(uint32(c.Key.Name))
		h.U64(c.Hash)
		selector = selector || c.HasSelector
		return true
	}
	for _, svc := range dests {
		host := snap.String(svc.Key.Host)
		h.Str(host)
		snap.ConfigsByHost(index.ConfigDestinationRule, svc.Key.Host, row)
		var buf [256]byte
		for i := 0; i < len(host); i++ {
			if host[i] != '.' || 1+len(host)-i > len(buf) {
				continue
			}
			buf[0] = '*'
			n := 1 + copy(buf[1:], host[i:])
			if s, ok := snap.Symbols.Lookup(unsafe.String(&buf[0], n)); ok && s != svc.Key.Host {
				snap.ConfigsByHost(index.ConfigDestinationRule, s, row)
			}
		}
		if s, ok := snap.Symbols.Lookup("*"); ok && s != svc.Key.Host {
			snap.ConfigsByHost(index.ConfigDestinationRule, s, row)
		}
	}
	if selector {
		h.Str(sc.Class.Labels)
	}
	return h.Sum()
}

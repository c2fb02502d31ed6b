package engine

// The endpoint fast path, end to end.
//
// An index change set that touches only endpoint shards (changes.go:
// endpointsOnly) is not a config change: the services, their ports and
// every config row are the rows the classes' scopes already hold, so no
// scope is recomputed (class.scope copies the previous one for the new
// snapshot) and no Full push is made. Instead, at the end of the debounce
// (run.go, with PILOT_ENABLE_EDS_DEBOUNCE=false at once), push calls
// pushEndpoints with the set of services whose shards changed, which:
//
//  1. names the EDS clusters of those services (edsClusterNames): every
//     port, without and with each DestinationRule subset of the host, and
//     the SNI-DNAT names when some Gateway of the config version has an
//     AUTO_PASSTHROUGH server (a router with one subscribes to them). The
//     list is a superset; serve intersects it with each proxy's
//     subscription;
//  2. decides whether clusters changed too (clusterFactsChanged): CDS
//     reads a few facts of a service's endpoints (DNS services carry them
//     inline, service accounts become SANs, passthrough services infer
//     mTLS from sidecars; rules.ClusterEndpointDigest). When a digest moved
//     from what the last CDS push carried, the push is CDS+EDS for all
//     subscribed clusters instead of EDS for the named ones;
//  3. adds the name table (NDS) when one of the services is headless
//     (headlessChanged): its name resolves to its endpoints;
//  4. targets the classes whose scope sees one of the services (by the
//     scope's ByHost, as builders resolve hosts) and every proxyless gRPC
//     class, whose connections are then filtered by the services they
//     watch by cluster name (pushClasses, Conn.noteEDSNames with
//     serviceOfCluster).
//
// The builders then answer from the class's copied scope: EDS keys hold
// the new shard, so only the changed ClusterLoadAssignments miss the
// cache.

import (
	"strconv"
	"strings"

	networking "istio.io/api/networking/v1alpha3"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/index"
	"github.com/pilotfish-mesh/pilotfish/rules"
)

// pushEndpoints pushes an endpoint-only change of the services in
// endpoints to the classes that see them (see above).
func (e *Engine) pushEndpoints(classes []*class, endpoints map[index.ServiceKey]struct{}) {
	snap := e.idx.Snapshot()
	names := edsClusterNames(snap, e.views.Of(snap).HasAutoPassthrough(snap), endpoints)
	push := Push{Types: []string{TypeEndpoint}, Endpoints: names, Reason: "endpoint"}
	if e.clusterFactsChanged(snap, endpoints) {
		push = Push{Types: []string{TypeCluster, TypeEndpoint}, Reason: "endpoint"}
	}
	if headlessChanged(snap, endpoints) {
		push.Types = append(push.Types, TypeNameTable) // names resolve to its endpoints
	}
	var targets []*class
	for _, cl := range classes {
		if cl.key.class.Type == encode.ProxyGRPC {
			targets = append(targets, cl) // filtered per connection below
			continue
		}
		sc := cl.scope(e)
		for k := range endpoints {
			if id, ok := sc.ByHost[k.Host]; ok && snap.ServiceByID(id).Key == k {
				targets = append(targets, cl)
				break
			}
		}
	}
	e.pushClasses(targets, push, endpoints)
}

// edsClusterNames lists every EDS cluster name of the given services: each
// port, without subset and with each subset any DestinationRule for the host
// defines (a superset is harmless: serve intersects it with what each proxy
// subscribed to).
// With sni set (some Gateway has an AUTO_PASSTHROUGH server), the SNI-DNAT
// names too.
func edsClusterNames(snap *index.Snapshot, sni bool, services map[index.ServiceKey]struct{}) []string {
	var out []string
	for k := range services {
		svc, _, ok := snap.Service(k)
		if !ok {
			continue
		}
		host := snap.String(k.Host)
		var subsets []string
		snap.ConfigsByHost(index.ConfigDestinationRule, k.Host, func(c *index.Config) bool {
			if dr, ok := c.Spec.(*networking.DestinationRule); ok {
				for _, s := range dr.Subsets {
					subsets = append(subsets, s.Name)
				}
			}
			return true
		})
		for _, p := range svc.Ports {
			port := strconv.FormatUint(uint64(p.Number), 10)
			out = append(out, "outbound|"+port+"||"+host)
			for _, s := range subsets {
				out = append(out, "outbound|"+port+"|"+s+"|"+host)
			}
			if sni {
				out = appendSNIDNATNames(out, port, subsets, host)
			}
		}
	}
	return out
}

// serviceOfCluster maps an outbound cluster name to its service key, using
// the proxy-independent rule that a host's service is the one in the only
// namespace defining it (or any, when several do: the fast path then pushes
// to a superset).
func serviceOfCluster(snap *index.Snapshot, name string) (index.ServiceKey, bool) {
	var hostName string
	if rest, ok := strings.CutPrefix(name, "outbound|"); ok {
		i := strings.LastIndexByte(rest, '|')
		if i < 0 {
			return index.ServiceKey{}, false
		}
		hostName = rest[i+1:]
	} else if _, _, h, ok := encode.ParseSNIDNATName(name); ok {
		hostName = h // a router's SNI-DNAT cluster
	} else {
		return index.ServiceKey{}, false
	}
	host, ok := snap.Symbols.Lookup(hostName)
	if !ok {
		return index.ServiceKey{}, false
	}
	ids := snap.ServicesByHost(host)
	if len(ids) == 0 {
		return index.ServiceKey{}, false
	}
	return snap.ServiceByID(ids[0]).Key, true
}

// clusterFactsChanged reports whether any of the services' endpoints now
// differ in a way their clusters see (ClusterEndpointDigest) from what the last
// CDS push carried, and records the new facts. The record is refreshed for
// every service at each full push (which sends CDS from a snapshot at least
// as new), so it always describes config a push has sent.
func (e *Engine) clusterFactsChanged(snap *index.Snapshot, services map[index.ServiceKey]struct{}) bool {
	changed := false
	for k := range services {
		svc, _, _ := snap.Service(k)
		d := rules.ClusterEndpointDigest(snap.Symbols, svc, snap.Endpoints(k))
		if old, ok := e.cdsDigests[k]; !ok || old != d {
			changed = true
			e.cdsDigests[k] = d
		}
	}
	return changed
}

// recordClusterFacts refreshes the cluster facts of every service.
func (e *Engine) recordClusterFacts(snap *index.Snapshot) {
	clear(e.cdsDigests)
	snap.Services(func(_ index.ServiceID, svc *index.Service) bool {
		e.cdsDigests[svc.Key] = rules.ClusterEndpointDigest(snap.Symbols, svc, snap.Endpoints(svc.Key))
		return true
	})
}

// headlessChanged reports whether one of the services is headless: its
// name resolves to its endpoints, so the name table changes with them.
func headlessChanged(snap *index.Snapshot, services map[index.ServiceKey]struct{}) bool {
	for k := range services {
		if svc, _, ok := snap.Service(k); ok && encode.IsHeadless(svc) {
			return true
		}
	}
	return false
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

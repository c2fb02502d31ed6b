package rules

import (
	"fmt"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/index"
)

// buildNameTable generates the DNS name table istio-agent's DNS proxy asks
// for (ISTIO_META_DNS_CAPTURE): every host the proxy's scope sees with its
// VIPs, or a headless service's endpoint addresses. Being built from the
// scope, it is as narrow as the proxy's Sidecar. Proxyless gRPC clients do
// not ask for it.
func buildNameTable(sc *Scope, _ *encode.Mesh, cache *encode.Cache, _ []string, _ bool, dst []Resource) ([]Resource, error) {
	if sc.Class.Type == encode.ProxyGRPC {
		return dst, nil
	}
	snap := sc.Snapshot
	k := &encode.NameTableKey{Services: make([]*index.Service, 0, len(sc.Services))}
	for _, id := range sc.Services {
		svc := snap.ServiceByID(id)
		k.Services = append(k.Services, svc)
		if encode.IsHeadless(svc) {
			if k.Headless == nil {
				k.Headless = make([]*index.EndpointShard, len(sc.Services))
			}
			k.Headless[len(k.Services)-1] = snap.Endpoints(svc.Key)
		}
	}
	e, err := encode.Resource(cache, snap.Names(), k, encode.NameTableGen)
	if err != nil {
		return dst, fmt.Errorf("name table: %w", err)
	}
	return append(dst, resourceOf(e)), nil
}

package rules

import (
	"fmt"
	"slices"
	"strings"

	security "istio.io/api/security/v1beta1"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/index"
)

// authzProviders resolves the ext_authz providers the CUSTOM policies
// name, as istiod's CUSTOM builder does: a provider must be defined in the
// mesh config (ext_authz kinds only), valid, and its service must be in the
// registry ("namespace/host", or a host defined in exactly one namespace);
// its cluster is then the service's outbound cluster on the provider's
// port. A provider failing any of these carries the reason in Err, and
// encode turns its policies into DENY rules.
func authzProviders(snap *index.Snapshot, mesh *encode.Mesh, custom []*index.Config) []encode.AuthzProvider {
	var names []string
	for _, c := range custom {
		if ap, ok := c.Spec.(*security.AuthorizationPolicy); ok {
			names = append(names, ap.GetProvider().GetName())
		}
	}
	slices.Sort(names)
	names = slices.Compact(names)
	out := make([]encode.AuthzProvider, 0, len(names))
	for _, name := range names {
		p := encode.AuthzProvider{Name: name}
		i := slices.IndexFunc(mesh.ExtAuthz, func(e encode.ExtAuthzProvider) bool { return e.Name == name })
		switch {
		case i < 0:
			p.Err = fmt.Sprintf("extension provider %q is not defined", name)
		case mesh.ExtAuthz[i].Err != "":
			p.Provider, p.Err = mesh.ExtAuthz[i], mesh.ExtAuthz[i].Err
		default:
			p.Provider = mesh.ExtAuthz[i]
			host, err := lookupProviderService(snap, p.Provider.Service)
			if err != nil {
				p.Err = err.Error()
				break
			}
			p.Hostname = host
			p.Cluster = fmt.Sprintf("outbound|%d||%s", p.Provider.Port, host)
		}
		out = append(out, p)
	}
	return out
}

// lookupProviderService is istiod's LookupCluster: "namespace/host", or a
// host that exactly one namespace defines.
func lookupProviderService(snap *index.Snapshot, service string) (string, error) {
	if ns, host, ok := strings.Cut(service, "/"); ok && !strings.Contains(host, "/") {
		if _, _, found := snap.LookupService(host, ns); found {
			return host, nil
		}
	} else if !ok {
		if h, found := snap.Symbols.Lookup(service); found {
			switch ids := snap.ServicesByHost(h); {
			case len(ids) == 1:
				return service, nil
			case len(ids) > 1:
				return "", fmt.Errorf("found %s in multiple namespaces, specify the namespace as <Namespace>/<Hostname>", service)
			}
		}
	}
	return "", fmt.Errorf("could not find service %s in the service registry", service)
}

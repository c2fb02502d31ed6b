package rules

import (
	"slices"
	"strings"
	"testing"

	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/pilotfish-mesh/pilotfish/index"
)

// namedRoute is a VirtualService whose one HTTP route is named after it, so
// tests can tell which VirtualService a virtual host got.
func namedRoute(name string, hosts []string, mods ...func(*networking.VirtualService)) *networking.VirtualService {
	vs := &networking.VirtualService{Hosts: hosts, Http: []*networking.HTTPRoute{{
		Name:  name,
		Route: []*networking.HTTPRouteDestination{{Destination: &networking.Destination{Host: "reviews.default.svc.cluster.local"}}},
	}}}
	for _, m := range mods {
		m(vs)
	}
	return vs
}

// vhostRoutes maps each virtual host of a route configuration to the name
// of its first route ("default" when no VirtualService applies).
func vhostRoutes(rc *route.RouteConfiguration) map[string]string {
	out := map[string]string{}
	for _, vh := range rc.VirtualHosts {
		out[vh.Name] = vh.Routes[0].Name
	}
	return out
}

func TestVirtualServiceSelection(t *testing.T) {
	tests := []struct {
		name   string
		setup  func(f *meshFixture)
		proxy  string // proxy namespace
		port   string
		vhosts map[string]string // virtual host → first route name; "" means absent
	}{
		{"exact host, short name resolved in the VirtualService's namespace", func(f *meshFixture) {
			f.virtualService("r", "default", namedRoute("by-short-name", []string{"reviews"}))
		}, "default", "9080", map[string]string{"reviews.default.svc.cluster.local:9080": "by-short-name"}},
		{"a VirtualService in the proxy's namespace, private, wins over a public one", func(f *meshFixture) {
			f.virtualService("a-public", "shop", namedRoute("public", []string{"reviews.default.svc.cluster.local"}))
			f.virtualService("z-private", "default", namedRoute("private", []string{"reviews.default.svc.cluster.local"}, func(vs *networking.VirtualService) {
				vs.ExportTo = []string{"."}
			}))
		}, "default", "9080", map[string]string{"reviews.default.svc.cluster.local:9080": "private"}},
		{"among public ones the first by name wins", func(f *meshFixture) {
			f.virtualService("b", "default", namedRoute("b", []string{"reviews"}))
			f.virtualService("a", "shop", namedRoute("a", []string{"reviews.default.svc.cluster.local"}))
		}, "default", "9080", map[string]string{"reviews.default.svc.cluster.local:9080": "a"}},
		{"not exported to the proxy's namespace", func(f *meshFixture) {
			f.virtualService("r", "shop", namedRoute("hidden", []string{"reviews.default.svc.cluster.local"}, func(vs *networking.VirtualService) {
				vs.ExportTo = []string{"."}
			}))
		}, "default", "9080", map[string]string{"reviews.default.svc.cluster.local:9080": "default"}},
		{"exported to the proxy's namespace by name", func(f *meshFixture) {
			f.virtualService("r", "shop", namedRoute("exported", []string{"reviews.default.svc.cluster.local"}, func(vs *networking.VirtualService) {
				vs.ExportTo = []string{"default"}
			}))
		}, "default", "9080", map[string]string{"reviews.default.svc.cluster.local:9080": "exported"}},
		{"bound to a gateway only", func(f *meshFixture) {
			f.virtualService("r", "default", namedRoute("gateway", []string{"reviews"}, func(vs *networking.VirtualService) {
				vs.Gateways = []string{"istio-system/ingress"}
			}))
		}, "default", "9080", map[string]string{"reviews.default.svc.cluster.local:9080": "default"}},
		{"bound to a gateway and the mesh", func(f *meshFixture) {
			f.virtualService("r", "default", namedRoute("both", []string{"reviews"}, func(vs *networking.VirtualService) {
				vs.Gateways = []string{"istio-system/ingress", "mesh"}
			}))
		}, "default", "9080", map[string]string{"reviews.default.svc.cluster.local:9080": "both"}},
		{"the most specific wildcard wins, an exact host over any wildcard", func(f *meshFixture) {
			f.virtualService("any", "default", namedRoute("star", []string{"*"}))
			f.virtualService("svc", "default", namedRoute("svc-wildcard", []string{"*.svc.cluster.local"}))
			f.virtualService("ns", "default", namedRoute("ns-wildcard", []string{"*.default.svc.cluster.local"}))
			f.virtualService("exact", "default", namedRoute("exact", []string{"ratings.default.svc.cluster.local"}))
		}, "default", "9080", map[string]string{
			"reviews.default.svc.cluster.local:9080": "ns-wildcard",
			"ratings.default.svc.cluster.local:9080": "exact",
			"details.shop.svc.cluster.local:9080":    "svc-wildcard",
		}},
		{"a host that names no service is a virtual host on port 80", func(f *meshFixture) {
			f.virtualService("ext", "default", namedRoute("external", []string{"bookinfo.example.com"}))
		}, "default", "80", map[string]string{"bookinfo.example.com:80": "external"}},
		{"but not on other ports", func(f *meshFixture) {
			f.virtualService("ext", "default", namedRoute("external", []string{"bookinfo.example.com"}))
		}, "default", "9080", map[string]string{"bookinfo.example.com:9080": ""}},
		{"with a service on the port, its other hosts come along", func(f *meshFixture) {
			f.virtualService("r", "default", namedRoute("both", []string{"reviews", "reviews.example.com"}))
		}, "default", "9080", map[string]string{"reviews.default.svc.cluster.local:9080": "both", "reviews.example.com:9080": "both"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newMeshFixture(t)
			f.kubeService("reviews", "default", "10.0.0.10", httpPort(9080))
			f.kubeService("ratings", "default", "10.0.0.11", httpPort(9080))
			f.kubeService("details", "shop", "10.0.0.12", httpPort(9080))
			f.kubeService("web", "default", "10.0.0.13", httpPort(80))
			tc.setup(f)
			rcs := buildRoutesFor(t, f.apply(), sidecarClass(tc.proxy), tc.port)
			got := vhostRoutes(rcs[0])
			for vh, want := range tc.vhosts {
				if got[vh] != want {
					t.Errorf("%s: route %q, want %q (all: %v)", vh, got[vh], want, got)
				}
			}
		})
	}
}

// TestRouteDomainDedupe: a domain belongs to the first virtual host that
// lists it, and a short name yields to a service named exactly that.
func TestRouteDomainDedupe(t *testing.T) {
	f := newMeshFixture(t)
	// Two services sharing a VIP on port 80, and a ServiceEntry whose host
	// is the short name "web.default" of the Kubernetes service web.
	f.kubeService("web", "default", "10.0.0.13", httpPort(80))
	f.serviceEntry("se", "default", []string{"shared.example"}, []string{"10.0.0.13"}, index.ResolutionDNS, httpPort(80))
	f.serviceEntry("short", "default", []string{"web.default"}, nil, index.ResolutionDNS, httpPort(80))
	rc := buildRoutesFor(t, f.apply(), sidecarClass("default"), "80")[0]
	domains := map[string][]string{}
	owner := map[string]string{}
	for _, vh := range rc.VirtualHosts {
		domains[vh.Name] = vh.Domains
		for _, d := range vh.Domains {
			if prev, dup := owner[d]; dup {
				t.Errorf("domain %q in %s and %s", d, prev, vh.Name)
			}
			owner[d] = vh.Name
		}
	}
	if owner["10.0.0.13"] == "" || owner["web.default"] != "web.default:80" {
		t.Errorf("owners: VIP %q, web.default %q; domains %v", owner["10.0.0.13"], owner["web.default"], domains)
	}
	if slices.Contains(domains["web.default.svc.cluster.local:80"], "web.default") {
		t.Errorf("the short name stayed with the Kubernetes service: %v", domains)
	}
}

// TestRoutesSniffedAndAliases covers a protocol-sniffed service's own route
// configuration and Kubernetes ExternalName aliases.
func TestRoutesSniffedAndAliases(t *testing.T) {
	f := newMeshFixture(t)
	f.kubeService("auto", "default", "10.0.0.20", index.Port{Number: 8000, Protocol: index.ProtocolUnknown})
	backend := f.kubeService("backend", "default", "10.0.0.21", httpPort(80))
	alias := f.kubeService("legacy", "default", "", httpPort(80))
	snap := f.apply()
	// Make legacy an ExternalName alias of backend.
	a, _, _ := snap.Service(alias)
	row := *a
	row.ExternalName = backend.Host
	f.put(row)
	f.virtualService("legacy", "default", &networking.VirtualService{Hosts: []string{"web.example"}, Http: []*networking.HTTPRoute{{
		Name: "to-legacy", Route: []*networking.HTTPRouteDestination{{Destination: &networking.Destination{Host: "legacy"}}},
	}}})
	snap = f.apply()

	rcs := buildRoutesFor(t, snap, sidecarClass("default"), "auto.default.svc.cluster.local:8000", "80")
	if vh := rcs[0].VirtualHosts; len(vh) != 1 || vh[0].Name != "auto.default.svc.cluster.local:8000" || !slices.Equal(vh[0].Domains, []string{"*"}) {
		t.Errorf("sniffed route = %v", rcs[0])
	}
	var names []string
	for _, vh := range rcs[1].VirtualHosts {
		names = append(names, vh.Name)
		if vh.Name == "backend.default.svc.cluster.local:80" && !slices.Contains(vh.Domains, "legacy.default.svc.cluster.local") {
			t.Errorf("alias not among the backend's domains: %v", vh.Domains)
		}
		if vh.Name == "web.example:80" {
			if c := vh.Routes[0].GetRoute().GetCluster(); c != "outbound|80||backend.default.svc.cluster.local" {
				t.Errorf("route to an alias goes to %q, want its target's cluster", c)
			}
		}
	}
	if slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, "legacy.") }) {
		t.Errorf("an alias gets no virtual host of its own: %v", names)
	}
}

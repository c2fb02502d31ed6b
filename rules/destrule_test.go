package rules

import (
	"testing"

	networking "istio.io/api/networking/v1alpha3"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/index"
)

func TestDestinationRuleLookup(t *testing.T) {
	type dr struct {
		ns, name, host string
		exportTo       index.ExportTo
		exportNS       []string
		selector       bool
	}
	cases := []struct {
		name    string
		rules   []dr
		proxyNS string
		want    string // "ns/name" or ""
	}{
		{name: "none", proxyNS: "app"},
		{name: "service namespace", proxyNS: "app",
			rules: []dr{{ns: "shop", name: "r", host: "cart.shop.svc.cluster.local"}}, want: "shop/r"},
		{name: "proxy namespace first", proxyNS: "app",
			rules: []dr{{ns: "shop", name: "svc", host: "cart.shop.svc.cluster.local"}, {ns: "app", name: "mine", host: "cart.shop.svc.cluster.local"}}, want: "app/mine"},
		{name: "proxy namespace private rule applies to it", proxyNS: "app",
			rules: []dr{{ns: "shop", name: "svc", host: "cart.shop.svc.cluster.local"}, {ns: "app", name: "mine", host: "cart.shop.svc.cluster.local", exportTo: index.ExportTo{Private: true}}}, want: "app/mine"},
		{name: "private rule in the service namespace is not visible", proxyNS: "app",
			rules: []dr{{ns: "shop", name: "svc", host: "cart.shop.svc.cluster.local", exportTo: index.ExportTo{Private: true}}}},
		{name: "exportTo other namespaces", proxyNS: "app",
			rules: []dr{{ns: "shop", name: "svc", host: "cart.shop.svc.cluster.local", exportNS: []string{"web"}}}},
		{name: "exportTo the proxy namespace", proxyNS: "web",
			rules: []dr{{ns: "shop", name: "svc", host: "cart.shop.svc.cluster.local", exportNS: []string{"web"}}}, want: "shop/svc"},
		{name: "exportTo none", proxyNS: "shop",
			rules: []dr{{ns: "shop", name: "svc", host: "cart.shop.svc.cluster.local", exportTo: index.ExportTo{None: true}}}},
		{name: "root namespace last", proxyNS: "app",
			rules: []dr{{ns: "istio-system", name: "mesh", host: "*.local"}, {ns: "shop", name: "svc", host: "cart.shop.svc.cluster.local"}}, want: "shop/svc"},
		{name: "root namespace wildcard", proxyNS: "app",
			rules: []dr{{ns: "istio-system", name: "mesh", host: "*.local"}}, want: "istio-system/mesh"},
		{name: "exact host before wildcard", proxyNS: "shop",
			rules: []dr{{ns: "shop", name: "wild", host: "*.shop.svc.cluster.local"}, {ns: "shop", name: "exact", host: "cart.shop.svc.cluster.local"}}, want: "shop/exact"},
		{name: "most specific wildcard", proxyNS: "shop",
			rules: []dr{{ns: "shop", name: "broad", host: "*.cluster.local"}, {ns: "shop", name: "narrow", host: "*.shop.svc.cluster.local"}}, want: "shop/narrow"},
		{name: "star", proxyNS: "shop",
			rules: []dr{{ns: "shop", name: "all", host: "*"}}, want: "shop/all"},
		{name: "other host", proxyNS: "shop",
			rules: []dr{{ns: "shop", name: "other", host: "checkout.shop.svc.cluster.local"}}},
		{name: "workload selector rules are skipped", proxyNS: "shop",
			rules: []dr{{ns: "shop", name: "sel", host: "cart.shop.svc.cluster.local", selector: true}}},
		{name: "proxy in the root namespace: root private rules first", proxyNS: "istio-system",
			rules: []dr{{ns: "shop", name: "svc", host: "cart.shop.svc.cluster.local"}, {ns: "istio-system", name: "local", host: "cart.shop.svc.cluster.local", exportTo: index.ExportTo{Private: true}}}, want: "istio-system/local"},
		{name: "proxy in the root namespace: public root rule after the service's", proxyNS: "istio-system",
			rules: []dr{{ns: "istio-system", name: "pub", host: "cart.shop.svc.cluster.local"}, {ns: "shop", name: "svc", host: "cart.shop.svc.cluster.local"}}, want: "shop/svc"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newXDSFixture(t)
			svc := index.Service{Key: index.ServiceKey{Host: f.sym("cart.shop.svc.cluster.local"), Namespace: f.sym("shop")},
				Name: f.sym("cart"), Origin: index.OriginKubernetes, Ports: []index.Port{f.port("http", 80, index.ProtocolHTTP)}}
			f.b.PutService(svc)
			for _, r := range tc.rules {
				var sel index.LabelSetID
				if r.selector {
					sel = f.labels("app", "x")
				}
				e := r.exportTo
				for _, n := range r.exportNS {
					e.Namespaces = append(e.Namespaces, f.sym(n))
				}
				f.config(index.ConfigDestinationRule, r.ns, r.name, &networking.DestinationRule{Host: r.host}, sel, e, r.host)
			}
			snap := f.apply()
			s, _, _ := snap.Service(svc.Key)
			ns, _ := snap.Symbols.Lookup(tc.proxyNS)
			got := destinationRule(snap, encode.DefaultMesh(), ns, s)
			name := ""
			if got != nil {
				name = snap.String(got.Key.Namespace) + "/" + snap.String(got.Key.Name)
			}
			if name != tc.want {
				t.Fatalf("got %q, want %q", name, tc.want)
			}
			if n := testing.AllocsPerRun(100, func() { _ = destinationRule(snap, encode.DefaultMesh(), ns, s) }); n != 0 {
				t.Errorf("lookup allocates %v times", n)
			}
		})
	}
}

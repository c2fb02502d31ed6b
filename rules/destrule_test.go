package rules

import (
	"slices"
	"testing"

	networking "istio.io/api/networking/v1alpha3"
	typev1beta1 "istio.io/api/type/v1beta1"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/index"
)

// TestDestinationRuleLookup: istiod's pools, most specific host per pool,
// exportTo, workloadSelector and merging (PushContext.setDestinationRules,
// mergeDestinationRule, SidecarScope.DestinationRule), on the rule a
// proxy's lookup returns: its name and its subsets.
func TestDestinationRuleLookup(t *testing.T) {
	type dr struct {
		ns, name, host string
		exportTo       []string
		selector       bool // app=x
		subsets        []string
		lb             bool // a top-level traffic policy
		created        int64
	}
	const cart = "cart.shop.svc.cluster.local"
	cases := []struct {
		name    string
		rules   []dr
		proxyNS string
		labels  string // the class's labels
		inbound bool
		want    string   // "ns/name" or ""
		subsets []string // of the rule returned, when set
		lb      bool
	}{
		{name: "none", proxyNS: "app"},
		{name: "service namespace", proxyNS: "app",
			rules: []dr{{ns: "shop", name: "r", host: cart}}, want: "shop/r"},
		{name: "proxy namespace first", proxyNS: "app",
			rules: []dr{{ns: "shop", name: "svc", host: cart}, {ns: "app", name: "mine", host: cart}}, want: "app/mine"},
		{name: "proxy namespace private rule applies to it", proxyNS: "app",
			rules: []dr{{ns: "shop", name: "svc", host: cart}, {ns: "app", name: "mine", host: cart, exportTo: []string{"."}}}, want: "app/mine"},
		{name: "private rule in the service namespace is not visible", proxyNS: "app",
			rules: []dr{{ns: "shop", name: "svc", host: cart, exportTo: []string{"."}}}},
		{name: "exportTo other namespaces", proxyNS: "app",
			rules: []dr{{ns: "shop", name: "svc", host: cart, exportTo: []string{"web"}}}},
		{name: "exportTo the proxy namespace", proxyNS: "web",
			rules: []dr{{ns: "shop", name: "svc", host: cart, exportTo: []string{"web"}}}, want: "shop/svc"},
		{name: "exportTo none", proxyNS: "shop",
			rules: []dr{{ns: "shop", name: "svc", host: cart, exportTo: []string{"~"}}}},
		{name: "root namespace last", proxyNS: "app",
			rules: []dr{{ns: "istio-system", name: "mesh", host: "*.local"}, {ns: "shop", name: "svc", host: cart}}, want: "shop/svc"},
		{name: "root namespace wildcard", proxyNS: "app",
			rules: []dr{{ns: "istio-system", name: "mesh", host: "*.local"}}, want: "istio-system/mesh"},
		{name: "exact host before wildcard", proxyNS: "shop",
			rules: []dr{{ns: "shop", name: "wild", host: "*.shop.svc.cluster.local"}, {ns: "shop", name: "exact", host: cart}}, want: "shop/exact"},
		{name: "most specific wildcard", proxyNS: "shop",
			rules: []dr{{ns: "shop", name: "broad", host: "*.cluster.local"}, {ns: "shop", name: "narrow", host: "*.shop.svc.cluster.local"}}, want: "shop/narrow"},
		{name: "star", proxyNS: "shop",
			rules: []dr{{ns: "shop", name: "all", host: "*"}}, want: "shop/all"},
		{name: "other host", proxyNS: "shop",
			rules: []dr{{ns: "shop", name: "other", host: "checkout.shop.svc.cluster.local"}}},
		{name: "exported pool: the most specific host decides even when not exported to the proxy", proxyNS: "app",
			rules: []dr{{ns: "shop", name: "exact", host: cart, exportTo: []string{"web"}}, {ns: "shop", name: "wild", host: "*.shop.svc.cluster.local"}}},
		{name: "exported pool not exported: the root namespace's next", proxyNS: "app",
			rules: []dr{{ns: "shop", name: "exact", host: cart, exportTo: []string{"web"}}, {ns: "istio-system", name: "mesh", host: "*.local"}}, want: "istio-system/mesh"},
		{name: "proxy in the root namespace: root private rules first", proxyNS: "istio-system",
			rules: []dr{{ns: "shop", name: "svc", host: cart}, {ns: "istio-system", name: "local", host: cart, exportTo: []string{"."}}}, want: "istio-system/local"},
		{name: "proxy in the root namespace: public root rule after the service's", proxyNS: "istio-system",
			rules: []dr{{ns: "istio-system", name: "pub", host: cart}, {ns: "shop", name: "svc", host: cart}}, want: "shop/svc"},

		// Merging.
		{name: "two rules merge: subsets appended, the oldest's policy", proxyNS: "app",
			rules: []dr{{ns: "shop", name: "b", host: cart, subsets: []string{"v2", "v1"}, created: 2}, {ns: "shop", name: "a", host: cart, subsets: []string{"v1"}, lb: true, created: 1}},
			want:  "shop/a", subsets: []string{"v1", "v2"}, lb: true},
		{name: "same creation time: by name", proxyNS: "app",
			rules: []dr{{ns: "shop", name: "b", host: cart, subsets: []string{"v2"}, lb: true}, {ns: "shop", name: "a", host: cart, subsets: []string{"v1"}}},
			want:  "shop/a", subsets: []string{"v1", "v2"}, lb: true},
		{name: "different exportTo: not merged, the last wins", proxyNS: "shop",
			rules: []dr{{ns: "shop", name: "a", host: cart, subsets: []string{"v1"}}, {ns: "shop", name: "b", host: cart, subsets: []string{"v2"}, exportTo: []string{"*"}}},
			want:  "shop/b", subsets: []string{"v2"}},
		{name: "exportTo superset: merged", proxyNS: "web",
			rules: []dr{{ns: "shop", name: "a", host: cart, subsets: []string{"v1"}, exportTo: []string{"web"}}, {ns: "shop", name: "b", host: cart, subsets: []string{"v2"}, exportTo: []string{"web", "app"}}},
			want:  "shop/a", subsets: []string{"v1", "v2"}},
		{name: "in other namespaces: not merged", proxyNS: "app",
			rules: []dr{{ns: "app", name: "a", host: cart, subsets: []string{"v1"}}, {ns: "shop", name: "b", host: cart, subsets: []string{"v2"}}},
			want:  "app/a", subsets: []string{"v1"}},

		// workloadSelector.
		{name: "selector rule selects the proxy", proxyNS: "shop", labels: "app=x",
			rules: []dr{{ns: "shop", name: "all", host: cart, subsets: []string{"v1"}}, {ns: "shop", name: "sel", host: cart, selector: true, subsets: []string{"v2"}}},
			want:  "shop/sel", subsets: []string{"v2"}},
		{name: "selector rule not selecting the proxy: the rule without", proxyNS: "shop", labels: "app=y",
			rules: []dr{{ns: "shop", name: "all", host: cart}, {ns: "shop", name: "sel", host: cart, selector: true}}, want: "shop/all"},
		{name: "selector rule alone, not selecting: none", proxyNS: "shop", labels: "app=y",
			rules: []dr{{ns: "shop", name: "sel", host: cart, selector: true}}},
		{name: "selector rule shadows the service namespace's rule", proxyNS: "app", labels: "app=y",
			rules: []dr{{ns: "shop", name: "svc", host: cart}, {ns: "app", name: "sel", host: cart, selector: true}}},
		{name: "selector rule of another namespace", proxyNS: "app", labels: "app=x",
			rules: []dr{{ns: "shop", name: "sel", host: cart, selector: true}}},
		{name: "selector rules do not apply inbound", proxyNS: "shop", labels: "app=x", inbound: true,
			rules: []dr{{ns: "shop", name: "all", host: cart}, {ns: "shop", name: "sel", host: cart, selector: true}}, want: "shop/all"},
		{name: "selector rules with one selector merge", proxyNS: "shop", labels: "app=x",
			rules: []dr{{ns: "shop", name: "s1", host: cart, selector: true, subsets: []string{"v1"}}, {ns: "shop", name: "s2", host: cart, selector: true, subsets: []string{"v2"}}},
			want:  "shop/s1", subsets: []string{"v1", "v2"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newXDSFixture(t)
			svc := index.Service{Key: index.ServiceKey{Host: f.sym(cart), Namespace: f.sym("shop")},
				Name: f.sym("cart"), Origin: index.OriginKubernetes, Ports: []index.Port{f.port("http", 80, index.ProtocolHTTP)}}
			f.b.PutService(svc)
			for _, r := range tc.rules {
				var sel index.LabelSetID
				spec := &networking.DestinationRule{Host: r.host, ExportTo: r.exportTo}
				if r.selector {
					sel = f.labels("app", "x")
					spec.WorkloadSelector = &typev1beta1.WorkloadSelector{MatchLabels: map[string]string{"app": "x"}}
				}
				for _, s := range r.subsets {
					spec.Subsets = append(spec.Subsets, &networking.Subset{Name: s, Labels: map[string]string{"version": s}})
				}
				if r.lb {
					spec.TrafficPolicy = &networking.TrafficPolicy{LoadBalancer: &networking.LoadBalancerSettings{}}
				}
				f.created = r.created
				f.config(index.ConfigDestinationRule, r.ns, r.name, spec, sel, index.ExportTo{}, r.host)
			}
			snap := f.apply()
			s, _, _ := snap.Service(svc.Key)
			// A view without verify mode: the allocation count is the lookup's.
			sc := NewScopeIn(newConfigView(snap.ConfigVersion, false, nil, nil), snap,
				&encode.ProxyClass{Type: encode.ProxySidecar, Namespace: tc.proxyNS, Labels: tc.labels})
			lookup := destinationRule
			if tc.inbound {
				lookup = inboundDestinationRule
			}
			mesh := encode.DefaultMesh()
			got := lookup(sc, mesh, s)
			name := ""
			if got != nil {
				name = snap.String(got.Key.Namespace) + "/" + snap.String(got.Key.Name)
			}
			if name != tc.want {
				t.Fatalf("got %q, want %q", name, tc.want)
			}
			if tc.subsets != nil {
				var subsets []string
				for i, ss := range drSpec(got).GetSubsets() {
					subsets = append(subsets, ss.GetName())
					if l := snap.Labels.Get(got.SubsetLabels[i]); len(l) != 1 || snap.String(l[0].Value) != ss.GetName() {
						t.Errorf("subset %s has labels %v", ss.GetName(), l)
					}
				}
				if !slices.Equal(subsets, tc.subsets) {
					t.Errorf("subsets %v, want %v", subsets, tc.subsets)
				}
				if (drSpec(got).GetTrafficPolicy() != nil) != tc.lb {
					t.Errorf("traffic policy %v, want one: %v", drSpec(got).GetTrafficPolicy(), tc.lb)
				}
			}
			if again := lookup(sc, mesh, s); again != got {
				t.Errorf("a second lookup returns another row: the merge is not memoized")
			}
			if n := testing.AllocsPerRun(100, func() { _ = lookup(sc, mesh, s) }); n != 0 {
				t.Errorf("lookup allocates %v times", n)
			}
		})
	}
}

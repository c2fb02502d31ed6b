package rules

import (
	"fmt"
	"testing"

	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/pilotfish-mesh/pilotfish/encode"
	"github.com/pilotfish-mesh/pilotfish/index"
)

// httpBench mirrors istio-bench's http.yaml: ServiceEntry example.com (the
// proxy's own) and n ServiceEntries random-i.host.example with a VIP, all
// HTTP on port 80, plus the apiserver's kubernetes Service.
func httpBench(t testing.TB, n int) *index.Snapshot {
	f := newMeshFixture(t)
	f.kubeService("kubernetes", "default", "10.0.0.1", index.Port{Name: f.sym("https"), Number: 443, Protocol: index.ProtocolHTTPS})
	se := f.serviceEntry("proxy-service-instance", "default", []string{"example.com"}, nil, index.ResolutionClientSideLB, httpPort(80))
	f.endpoints(se[0], "proxy-service-instance", nil, "1.1.1.1")
	for i := range n {
		f.serviceEntry(fmt.Sprint("service-", i), "default", []string{fmt.Sprintf("random-%d.host.example", i)},
			[]string{fmt.Sprintf("240.240.%d.%d", i/255, i%255)}, index.ResolutionClientSideLB, httpPort(80))
	}
	return f.apply()
}

// vsBench mirrors istio-bench's virtualservice.yaml: n ServiceEntries
// without VIPs, each routed by a VirtualService matching /foo and /bar.
func vsBench(t testing.TB, n int) *index.Snapshot {
	f := newMeshFixture(t)
	f.kubeService("kubernetes", "default", "10.0.0.1", index.Port{Name: f.sym("https"), Number: 443, Protocol: index.ProtocolHTTPS})
	se := f.serviceEntry("proxy-service-instance", "default", []string{"example.com"}, nil, index.ResolutionClientSideLB, httpPort(80))
	f.endpoints(se[0], "proxy-service-instance", nil, "1.1.1.1")
	for i := range n {
		host := fmt.Sprintf("random-%d.host.example", i)
		f.virtualService(fmt.Sprint("vs-", i), "default", &networking.VirtualService{
			Hosts: []string{host},
			Http: []*networking.HTTPRoute{{
				Name: "match-route",
				Match: []*networking.HTTPMatchRequest{
					{Uri: &networking.StringMatch{MatchType: &networking.StringMatch_Prefix{Prefix: "/foo"}}},
					{Uri: &networking.StringMatch{MatchType: &networking.StringMatch_Regex{Regex: "/bar"}}},
				},
				Rewrite: &networking.HTTPRewrite{Uri: "/new-url"},
				Route:   []*networking.HTTPRouteDestination{{Destination: &networking.Destination{Host: host}}},
			}},
		})
		f.serviceEntry(fmt.Sprint("service-", i), "default", []string{host}, nil, index.ResolutionClientSideLB, httpPort(80))
	}
	return f.apply()
}

func buildRoutesFor(t testing.TB, snap *index.Snapshot, class *encode.ProxyClass, names ...string) []*route.RouteConfiguration {
	t.Helper()
	rs, err := buildRoutes(NewScope(snap, class), encode.DefaultMesh(), verifyCache(), names, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := decodeRoutes(t, rs)
	for _, rc := range out {
		validate(t, rc)
	}
	return out
}

// TestRoutesMatchIstiod compares the port-80 route configuration with the
// one istiod generated for the same workload (istiod-output/*.s10.sidecar.json):
// they must be equal field for field.
func TestRoutesMatchIstiod(t *testing.T) {
	tests := []struct {
		name, file string
		snap       func(testing.TB, int) *index.Snapshot
	}{
		{"http", "http.s10.sidecar.json", httpBench},
		{"http 1.1.1.1", "http.s10.sidecar-1.1.1.1.json", httpBench},
		{"virtualservice", "virtualservice.s10.sidecar.json", vsBench},
		{"virtualservice 1.1.1.1", "virtualservice.s10.sidecar-1.1.1.1.json", vsBench},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want := istiodRoutes(t, tc.file)["80"]
			got := buildRoutesFor(t, tc.snap(t, 10), sidecarClass("default"), "80")
			if len(got) != 1 {
				t.Fatalf("got %d route configurations", len(got))
			}
			if d := protoDiff(t, want, got[0]); d != "" {
				t.Errorf("route 80 differs from istiod's (-istiod +pilotfish):\n%s", d)
			}
		})
	}
}

// TestBuildWarmAllocations: with every virtual host and listener cached, a
// build allocates a small constant, whatever the number of services
// (STYLE.md: allocation budgets are hard failures).
func TestBuildWarmAllocations(t *testing.T) {
	mesh := encode.DefaultMesh()
	for _, n := range []int{10, 100} {
		snap := httpBench(t, n)
		cache := encode.NewCache()
		cache.SetVerify(false) // verify mode regenerates on every hit
		sc := scopeFor(snap, sidecarClass("default"), "1.1.1.1")
		names := []string{"80"}
		dst := make([]Resource, 0, 8)
		if _, err := buildRoutes(sc, mesh, cache, names, false, dst); err != nil {
			t.Fatal(err)
		}
		if a := testing.AllocsPerRun(20, func() { _, _ = buildRoutes(sc, mesh, cache, names, false, dst[:0]) }); a > 0 {
			t.Errorf("warm buildRoutes, %d services: %v allocations, want 0", n, a)
		}
		if _, err := buildListeners(sc, mesh, cache, nil, true, dst[:0]); err != nil {
			t.Fatal(err)
		}
		if a := testing.AllocsPerRun(20, func() { _, _ = buildListeners(sc, mesh, cache, nil, true, dst[:0]) }); a > 4 {
			t.Errorf("warm buildListeners, %d services: %v allocations, want at most 4", n, a)
		}
	}
}

// TestRoutesOneServiceChanged: after one service changes, rebuilding its
// port's route configuration generates exactly one virtual host; the
// others come from the cache.
func TestRoutesOneServiceChanged(t *testing.T) {
	f := newMeshFixture(t)
	for i := range 20 {
		f.serviceEntry(fmt.Sprint("service-", i), "default", []string{fmt.Sprintf("random-%d.host.example", i)},
			[]string{fmt.Sprintf("240.240.0.%d", i)}, index.ResolutionClientSideLB, httpPort(80))
	}
	mesh := encode.DefaultMesh()
	cache := verifyCache()
	misses := func() (vh, rc uint64) {
		for _, s := range cache.Stats() {
			switch s.Kind {
			case encode.KindVirtualHost.String():
				vh = s.Misses
			case encode.KindRoute.String():
				rc = s.Misses
			}
		}
		return vh, rc
	}
	if _, err := buildRoutes(NewScope(f.apply(), sidecarClass("default")), mesh, cache, []string{"80"}, false, nil); err != nil {
		t.Fatal(err)
	}
	vh0, rc0 := misses()
	if vh0 != 20 || rc0 != 1 {
		t.Fatalf("cold build: %d virtual host and %d route misses, want 20 and 1", vh0, rc0)
	}
	f.serviceEntry("service-7", "default", []string{"random-7.host.example"}, []string{"240.240.1.7"}, index.ResolutionClientSideLB, httpPort(80))
	rs, err := buildRoutes(NewScope(f.apply(), sidecarClass("default")), mesh, cache, []string{"80"}, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	vh1, rc1 := misses()
	if vh1-vh0 != 1 || rc1-rc0 != 1 {
		t.Errorf("after one change: %d virtual hosts and %d route configurations generated, want 1 and 1", vh1-vh0, rc1-rc0)
	}
	rc := decodeRoutes(t, rs)[0]
	for _, vh := range rc.VirtualHosts {
		if vh.Name == "random-7.host.example:80" && vh.Domains[2] != "240.240.1.7" {
			t.Errorf("changed virtual host = %v", vh.Domains)
		}
	}
}

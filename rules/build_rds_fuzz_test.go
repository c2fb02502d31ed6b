package rules

import (
	"testing"

	"github.com/pilotfish-mesh/pilotfish/encode"
)

// FuzzRouteNames: route names come from proxies' requests. Any name gives
// a valid answer or none, never a panic, for sidecars and gRPC clients.
func FuzzRouteNames(f *testing.F) {
	for _, s := range []string{"80", "0", "65536", "-1", "random-0.host.example:80", "[::1]:80", ":80", "host:",
		"outbound|80||random-0.host.example", "outbound|80|v1|x", "outbound||", "outbound|x||h", "inbound|80||", ""} {
		f.Add(s)
	}
	snap := httpBench(f, 3)
	mesh := encode.DefaultMesh()
	scopes := []*Scope{NewScope(snap, sidecarClass("default")), NewScope(snap, grpcClass("default"))}
	cache := encode.NewCache()
	f.Fuzz(func(t *testing.T, name string) {
		for _, sc := range scopes {
			rs, err := buildRoutes(sc, mesh, cache, []string{name}, false, nil)
			if err != nil {
				t.Fatalf("%q: %v", name, err)
			}
			for _, rc := range decodeRoutes(t, rs) {
				if rc.Name != name {
					t.Fatalf("asked for %q, got %q", name, rc.Name)
				}
			}
		}
	})
}

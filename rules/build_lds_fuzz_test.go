package rules

import (
	"testing"

	"github.com/pilotfish-mesh/pilotfish/encode"
)

// FuzzListenerNames: proxyless gRPC clients and servers name the listeners
// they want. Any name gives valid listeners or none, never a panic.
func FuzzListenerNames(f *testing.F) {
	for _, s := range []string{"random-0.host.example:80", "random-0.host.example", "random-0", "random-0.default:80",
		"example.com:99999", "xds.istio.io/grpc/lds/inbound/1.1.1.1:80", "xds.istio.io/grpc/lds/inbound/", "xds.istio.io/grpc/lds/inbound/[::1]:x", "xds.istio.io/grpc/lds/inbound/:80", ":", ""} {
		f.Add(s)
	}
	snap := httpBench(f, 3)
	mesh := encode.DefaultMesh()
	sc := scopeFor(snap, grpcClass("default"), "1.1.1.1")
	cache := encode.NewCache()
	f.Fuzz(func(t *testing.T, name string) {
		ls, err := buildListeners(sc, mesh, cache, []string{name}, false, nil)
		if err != nil {
			t.Fatalf("%q: %v", name, err)
		}
		for _, l := range decodeListeners(t, ls) {
			if err := l.ValidateAll(); err != nil {
				t.Fatalf("%q: invalid listener: %v", name, err)
			}
		}
	})
}

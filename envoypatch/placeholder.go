package envoypatch

// PLACEHOLDER (branch wt-ef-apply only, never merged as is): bodies that
// compile so that users can be written against the API while the real
// ones are. Each is replaced by its file named in api.go.

import (
	"github.com/cespare/xxhash/v2"
	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
)

func NewSet(patches []*Patch) *Set {
	if len(patches) == 0 {
		return nil
	}
	d := xxhash.New()
	for _, p := range patches {
		var b [8]byte
		for i := range b {
			b[i] = byte(p.Hash >> (8 * i))
		}
		d.Write(b[:])
	}
	return &Set{Patches: patches, Digest: d.Sum64()}
}

func (s *Set) Family(f Family) *Set                                 { return s }
func (s *Set) MayPatchCluster(Context, string, uint32, string) bool { return s != nil }
func (s *Set) MayPatchListener(Context, uint32) bool                { return s != nil }
func (s *Set) MayPatchRouteConfig(Context, string) bool             { return s != nil }
func (s *Set) PatchCluster(_ Context, c *cluster.Cluster) (*cluster.Cluster, []Failure) {
	return c, nil
}
func (s *Set) AddedClusters(Context) []*cluster.Cluster { return nil }
func (s *Set) PatchListener(_ Context, l *listener.Listener) (*listener.Listener, []Failure) {
	return l, nil
}
func (s *Set) AddedListeners(Context) []*listener.Listener { return nil }
func (s *Set) PatchRouteConfiguration(_ Context, rc *route.RouteConfiguration, _ GatewayPorts) (*route.RouteConfiguration, []Failure) {
	return rc, nil
}
func (s *Set) ExtensionConfigs() []*core.TypedExtensionConfig { return nil }

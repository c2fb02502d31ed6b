package envoypatch

// PLACEHOLDER (branch wt-ef-apply only, never merged as is): bodies that
// compile so that users can be written against the API while the real
// ones are. Each is replaced by its file named in api.go.

import (
	"fmt"

	"github.com/cespare/xxhash/v2"
	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	networking "istio.io/api/networking/v1alpha3"
)

type proxyMatcher struct{}

func Compile(namespace, name string, ef *networking.EnvoyFilter) (*Filter, error) {
	f := &Filter{Source: namespace + "/" + name}
	for i, cp := range ef.GetConfigPatches() {
		p := &Patch{Source: f.Source, Index: i, ApplyTo: cp.GetApplyTo(), Operation: cp.GetPatch().GetOperation(),
			FilterClass: cp.GetPatch().GetFilterClass(), Match: cp.GetMatch()}
		if p.Match == nil {
			p.Match = &networking.EnvoyFilter_EnvoyConfigObjectMatch{}
		}
		if v := cp.GetPatch().GetValue(); v != nil {
			var msg proto.Message
			switch p.ApplyTo {
			case networking.EnvoyFilter_CLUSTER:
				msg = &cluster.Cluster{}
			case networking.EnvoyFilter_HTTP_FILTER:
				msg = &hcm.HttpFilter{}
			case networking.EnvoyFilter_NETWORK_FILTER:
				msg = &listener.Filter{}
			case networking.EnvoyFilter_LISTENER:
				msg = &listener.Listener{}
			case networking.EnvoyFilter_VIRTUAL_HOST:
				msg = &route.VirtualHost{}
			case networking.EnvoyFilter_ROUTE_CONFIGURATION:
				msg = &route.RouteConfiguration{}
			default:
				return nil, fmt.Errorf("placeholder: applyTo %s", p.ApplyTo)
			}
			js, _ := protojson.Marshal(v)
			if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(js, msg); err != nil {
				return nil, fmt.Errorf("spec.configPatches[%d].patch.value: %w", i, err)
			}
			p.Value = msg
		}
		b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(cp)
		p.Hash = xxhash.Sum64(b)
		f.Patches = append(f.Patches, p)
	}
	return f, nil
}

func (p *Patch) MatchesProxy(istioVersion string, metadata func(string) string) bool { return true }

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

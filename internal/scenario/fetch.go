package scenario

import (
	"fmt"
	"slices"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// Resource is one fetched xDS resource: its name and its encoded
// google.protobuf.Any.
type Resource struct {
	Name string
	Any  []byte
}

// Fetcher answers one discovery request: the resources of typeURL named
// (every one of the type when wildcard).
type Fetcher interface {
	Fetch(typeURL string, names []string, wildcard bool) ([]Resource, error)
}

// typeURLs of the script's TYPE words.
var typeURLs = map[string]string{
	"cds": resourcev3.ClusterType,
	"eds": resourcev3.EndpointType,
	"lds": resourcev3.ListenerType,
	"rds": resourcev3.RouteType,
}

// Config is a proxy's config by TYPE word, then resource name.
type Config map[string]map[string]*anypb.Any

// fetchSidecar fetches what a sidecar subscribes to: every cluster and
// listener, the endpoints of each EDS cluster, each route configuration a
// listener's HTTP connection manager names.
func fetchSidecar(f Fetcher) (Config, error) {
	cfg := Config{}
	get := func(word string, names []string, wildcard bool) error {
		rs, err := f.Fetch(typeURLs[word], names, wildcard)
		if err != nil {
			return fmt.Errorf("fetch %s: %w", word, err)
		}
		m := make(map[string]*anypb.Any, len(rs))
		for _, r := range rs {
			a := &anypb.Any{}
			if err := proto.Unmarshal(r.Any, a); err != nil {
				return fmt.Errorf("%s %s: %w", word, r.Name, err)
			}
			m[r.Name] = a
		}
		cfg[word] = m
		return nil
	}
	if err := get("cds", nil, true); err != nil {
		return nil, err
	}
	var eds []string
	for name, a := range cfg["cds"] {
		c := &clusterv3.Cluster{}
		if err := a.UnmarshalTo(c); err != nil {
			return nil, fmt.Errorf("cds %s: %w", name, err)
		}
		if c.GetType() == clusterv3.Cluster_EDS {
			eds = append(eds, cmpOr(c.GetEdsClusterConfig().GetServiceName(), name))
		}
	}
	slices.Sort(eds)
	if err := get("eds", eds, false); err != nil {
		return nil, err
	}
	if err := get("lds", nil, true); err != nil {
		return nil, err
	}
	var rds []string
	for name, a := range cfg["lds"] {
		l := &listenerv3.Listener{}
		if err := a.UnmarshalTo(l); err != nil {
			return nil, fmt.Errorf("lds %s: %w", name, err)
		}
		chains := l.GetFilterChains()
		if l.GetDefaultFilterChain() != nil {
			chains = append(chains, l.GetDefaultFilterChain())
		}
		for _, fc := range chains {
			for _, fl := range fc.GetFilters() {
				h := &hcmv3.HttpConnectionManager{}
				if fl.GetTypedConfig().MessageIs(h) && fl.GetTypedConfig().UnmarshalTo(h) == nil {
					if n := h.GetRds().GetRouteConfigName(); n != "" && !slices.Contains(rds, n) {
						rds = append(rds, n)
					}
				}
			}
		}
	}
	slices.Sort(rds)
	if err := get("rds", rds, false); err != nil {
		return nil, err
	}
	return cfg, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

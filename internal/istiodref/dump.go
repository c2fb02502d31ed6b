package istiodref

import (
	"encoding/json"
	"fmt"
	"os"
)

// Dump is what one of istiod's config dumps holds, as generic JSON (the
// protojson form) keyed by resource name; "@type" fields of the resources
// themselves are removed.
type Dump struct {
	Clusters  map[string]map[string]any // CDS, by cluster name
	Endpoints map[string]map[string]any // EDS, by cluster name
	Listeners map[string]map[string]any // LDS, by listener name
	Routes    map[string]map[string]any // RDS, by route configuration name
	// ClusterOrder is the order of the clusters in the dump (istiod's).
	ClusterOrder []string
}

// ReadDump reads a dump written by the producer.
func ReadDump(file string) (*Dump, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var doc struct {
		Configs []map[string]any `json:"configs"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	d := &Dump{Clusters: map[string]map[string]any{}, Endpoints: map[string]map[string]any{},
		Listeners: map[string]map[string]any{}, Routes: map[string]map[string]any{}}
	for _, c := range doc.Configs {
		switch c["@type"] {
		case "type.googleapis.com/envoy.admin.v3.ClustersConfigDump":
			for _, x := range list(c["dynamicActiveClusters"]) {
				if r := field(x, "cluster"); r != nil {
					name, _ := r["name"].(string)
					d.Clusters[name] = r
					d.ClusterOrder = append(d.ClusterOrder, name)
				}
			}
			for _, x := range list(c["staticClusters"]) {
				if r := field(x, "cluster"); r != nil {
					name, _ := r["name"].(string)
					d.Clusters[name] = r
				}
			}
		case "type.googleapis.com/envoy.admin.v3.EndpointsConfigDump":
			for _, x := range list(c["dynamicEndpointConfigs"]) {
				if r := field(x, "endpointConfig"); r != nil {
					name, _ := r["clusterName"].(string)
					d.Endpoints[name] = r
				}
			}
		case "type.googleapis.com/envoy.admin.v3.ListenersConfigDump":
			for _, x := range list(c["dynamicListeners"]) {
				m, _ := x.(map[string]any)
				if r := field(m["activeState"], "listener"); r != nil {
					name, _ := r["name"].(string)
					d.Listeners[name] = r
				}
			}
		case "type.googleapis.com/envoy.admin.v3.RoutesConfigDump":
			for _, x := range list(c["dynamicRouteConfigs"]) {
				if r := field(x, "routeConfig"); r != nil {
					name, _ := r["name"].(string)
					d.Routes[name] = r
				}
			}
		}
	}
	return d, nil
}

func list(v any) []any { l, _ := v.([]any); return l }

// field returns v[name] as a resource with its "@type" removed.
func field(v any, name string) map[string]any {
	m, _ := v.(map[string]any)
	r, _ := m[name].(map[string]any)
	if r != nil {
		delete(r, "@type")
	}
	return r
}

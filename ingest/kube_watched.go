package ingest

import "strings"

// WatchedIstioResource is an Istio config resource the Kubernetes source
// lists and watches: what a deployment's RBAC must grant and its
// validation webhook must cover.
type WatchedIstioResource struct {
	Group, Version, Resource string
}

// WatchedIstioResources lists the Istio resources the Kubernetes source
// watches (those discovery serves), in a fixed order.
func WatchedIstioResources() []WatchedIstioResource {
	out := make([]WatchedIstioResource, 0, len(istioKinds))
	for _, k := range istioKinds {
		g, v, _ := strings.Cut(k.groupVersion, "/")
		out = append(out, WatchedIstioResource{Group: g, Version: v, Resource: k.resource})
	}
	return out
}

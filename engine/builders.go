package engine

// builders maps each served type URL to its generator (build_*.go).
var builders = map[string]builder{
	TypeCluster:  buildClusters,
	TypeEndpoint: buildEndpoints,
	TypeListener: buildListeners,
	TypeRoute:    buildRoutes,
}

package envoypatch

import (
	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/proto"
	networking "istio.io/api/networking/v1alpha3"
)

// This file is the contract between envoypatch and its users (rules selects
// the patches of a proxy class into a Set, encode keys carry the Set and
// apply it to the messages they generate). Bodies live in the other files.

// Context is istiod's patch context of a generated resource.
type Context uint8

const (
	// Outbound: a sidecar's outbound listeners, routes and clusters
	// (SIDECAR_OUTBOUND).
	Outbound Context = iota + 1
	// Inbound: a sidecar's inbound listener, its routes and the inbound
	// clusters (SIDECAR_INBOUND).
	Inbound
	// Gateway: everything generated for a router (GATEWAY).
	Gateway
)

// Family groups the applyTo values by the xDS type they patch.
type Family uint8

const (
	// Clusters: CLUSTER.
	Clusters Family = iota
	// Listeners: LISTENER, FILTER_CHAIN, NETWORK_FILTER, HTTP_FILTER,
	// LISTENER_FILTER.
	Listeners
	// Routes: ROUTE_CONFIGURATION, VIRTUAL_HOST, HTTP_ROUTE.
	Routes
	// Extensions: EXTENSION_CONFIG.
	Extensions
	numFamilies
)

// Filter is one EnvoyFilter compiled once per object version (at ingest):
// its patches with typed values, in spec order.
type Filter struct {
	// Source is "namespace/name", for errors and metrics.
	Source  string
	Patches []*Patch
}

// Patch is one configPatch ready to apply. It is shared and immutable:
// application clones Value before it lets it into a generated message.
type Patch struct {
	Source string // "namespace/name" of the EnvoyFilter
	Index  int    // position in spec.configPatches

	ApplyTo networking.EnvoyFilter_ApplyTo
	// Operation after istiod's rewrite (INSERT_* on an applyTo without an
	// order becomes ADD).
	Operation   networking.EnvoyFilter_Patch_Operation
	FilterClass networking.EnvoyFilter_Patch_FilterClass
	// Match is never nil: {context: ANY} when the spec has none.
	Match *networking.EnvoyFilter_EnvoyConfigObjectMatch
	// Value is the patch value as the Envoy message applyTo names (a
	// *cluster.Cluster for CLUSTER, an *hcm.HttpFilter for HTTP_FILTER, ...);
	// nil for REMOVE.
	Value proto.Message
	// Hash covers everything above but Source and Index: two patches with
	// equal hashes apply identically.
	Hash uint64

	proxy proxyMatcher
}

// Set is the ordered patches that apply to one proxy class (istiod's
// order: priority, root namespace first, creation time, name). Sets are
// immutable; the selector interns them so that classes with the same
// patches share one *Set, and keys hash only Digest.
type Set struct {
	Patches []*Patch
	// Digest is the hash of the patches' hashes in order.
	Digest uint64

	families [numFamilies]*Set
	by       byApplyTo
}

// GatewayPorts is istiod's GatewayPortMap for a router: route port (the
// number in a gateway route configuration's name) -> the gateway server
// ports merged onto it. Only ROUTE_CONFIGURATION matches with a portNumber
// in the GATEWAY context read it.
type GatewayPorts map[int][]int

// Failure is a patch istiod would skip with an error (an Any merge of
// different types, a value that does not apply): the patch is skipped, the
// rest applies, the user reports it.
type Failure struct {
	Patch *Patch
	Err   error
}

// The functions below are the API users call; see the files named in each
// comment for their bodies.
var (
	_ func(namespace, name string, ef *networking.EnvoyFilter) (*Filter, error) = Compile               // compile.go
	_ func(*Patch, string, func(string) string) bool                            = (*Patch).MatchesProxy // proxy.go
	_ func([]*Patch) *Set                                                       = NewSet                // set.go
	_ func(*Set, Family) *Set                                                   = (*Set).Family         // set.go

	// Prefilters for key builders (set.go): false when no patch of the set
	// can touch the resource, so its key stays the unpatched one.
	_ func(*Set, Context, string, uint32, string) bool = (*Set).MayPatchCluster     // hostname, port, subset
	_ func(*Set, Context, uint32) bool                 = (*Set).MayPatchListener    // listener port (0: virtual listeners)
	_ func(*Set, Context, string) bool                 = (*Set).MayPatchRouteConfig // route configuration name
	_ func(string) int                                 = GatewayRoutePort           // a gateway route name's GatewayPorts key

	// Application (cluster.go, listener.go, route.go, extension.go): the
	// message passed in is the caller's own (it is patched in place and
	// returned); nil means a REMOVE removed it. Added resources are fresh.
	_ func(*Set, Context, *cluster.Cluster) (*cluster.Cluster, []Failure)                                 = (*Set).PatchCluster
	_ func(*Set, Context, *cluster.Cluster, []string) (*cluster.Cluster, []Failure)                       = (*Set).PatchClusterOfServices // an inbound cluster: its port's services
	_ func(*Set, Context) []*cluster.Cluster                                                              = (*Set).AddedClusters
	_ func(*Set, Context, *listener.Listener) (*listener.Listener, []Failure)                             = (*Set).PatchListener
	_ func(*Set, Context) []*listener.Listener                                                            = (*Set).AddedListeners
	_ func(*Set, Context, *route.RouteConfiguration, GatewayPorts) (*route.RouteConfiguration, []Failure) = (*Set).PatchRouteConfiguration
	_ func(*Set) []*core.TypedExtensionConfig                                                             = (*Set).ExtensionConfigs
)

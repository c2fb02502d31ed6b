package rules

import "github.com/pilotfish-mesh/pilotfish/encode"

// Type URLs of the xDS resources pilotfish serves.
const (
	TypeCluster   = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
	TypeEndpoint  = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"
	TypeListener  = "type.googleapis.com/envoy.config.listener.v3.Listener"
	TypeRoute     = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration"
	TypeSecret    = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret"
	TypeNameTable = "type.googleapis.com/istio.networking.nds.v1.NameTable"
)

// Resource is one generated xDS resource, marshaled once and shared by every
// proxy that receives it.
type Resource struct {
	// Name is the xDS resource name (cluster, listener, route config name...).
	Name string
	// Version identifies the content: equal versions mean equal bytes.
	Version string
	// Any is the resource encoded as a google.protobuf.Any message (fields
	// type_url and value). It is shared: never mutate it.
	Any []byte
	// Digest is ResourceDigest(Name, Version), computed once per cached
	// entry: a response's set digest sums them (0: not computed).
	Digest uint64
}

// resourceOf is the Resource of a cache entry.
func resourceOf(e *encode.Entry) Resource {
	return Resource{Name: e.Name, Version: e.Version, Any: e.Bytes, Digest: e.Digest}
}

// ResourceDigest is the hash of a resource's name and version that SotW
// set digests (version_info) sum: equal on every replica.
func ResourceDigest(name, version string) uint64 { return encode.ResourceDigest(name, version) }

package engine

import "github.com/pilotfish-mesh/pilotfish/rules"

// The type URLs served and the resource type are rules'; engine's names
// for them keep serve's and cmd's imports to engine alone.
const (
	TypeCluster   = rules.TypeCluster
	TypeEndpoint  = rules.TypeEndpoint
	TypeListener  = rules.TypeListener
	TypeRoute     = rules.TypeRoute
	TypeSecret    = rules.TypeSecret
	TypeNameTable = rules.TypeNameTable
	// TypeExtensionConfig is ECDS: WasmPlugins' filter configs.
	TypeExtensionConfig = rules.TypeExtensionConfig
)

// Resource is one generated xDS resource (rules.Resource).
type Resource = rules.Resource

// Node is what the engine learns about a proxy from its first request
// (rules.Node; ParseNode makes one).
type Node = rules.Node

// ResourceDigest is the hash of a resource's name and version that SotW
// set digests (version_info) sum: equal on every replica.
func ResourceDigest(name, version string) uint64 { return rules.ResourceDigest(name, version) }

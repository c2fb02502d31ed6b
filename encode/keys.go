package encode

import "github.com/pilotfish-mesh/pilotfish/index"

// The key types: the only implementations of [Key]. Each holds values only
// — scalars, strings, value structs and slices of them, and pointers to
// immutable content-hashed rows of index (or to entries of this cache, by
// version) — never a table, a map, a function or an interface; the
// reflection test (keys_test.go) finds every type with this marker in the
// package's source and checks that, and that every field changes the hash.

func (*ClusterKey) key()                {}
func (*EndpointsKey) key()              {}
func (*VirtualHostKey) key()            {}
func (*OutboundListenerKey) key()       {}
func (*VirtualOutboundKey) key()        {}
func (*VirtualInboundKey) key()         {}
func (*GRPCListenerKey) key()           {}
func (*GRPCServerListenerKey) key()     {}
func (*GatewayListenerKey) key()        {}
func (*GatewayVirtualHostKey) key()     {}
func (*NameTableKey) key()              {}
func (*SecretKey) key()                 {}
func (*SidecarIngressListenerKey) key() {}
func (*SidecarInboundClusterKey) key()  {}
func (*RouteConfigKey) key()            {}
func (*GatewayRoutesKey) key()          {}
func (*EgressCatchAllKey) key()         {}
func (*ExtensionConfigKey) key()        {}

// Generation wrappers: a key with the names that resolve its symbols, what
// the helpers of one generator read.
type (
	gwlIn struct {
		*GatewayListenerKey
		names index.Names
	}
	olIn struct {
		*OutboundListenerKey
		names index.Names
	}
	viIn struct {
		*VirtualInboundKey
		names index.Names
	}
)
